"""The phases a rank of the collective probe goes through, in order (shared by the worker and the parent)."""

PHASES = ("started", "imported", "store_connected", "all_joined", "pg_up", "first_collective", "steady_state",
          "sweep_done", "done")
