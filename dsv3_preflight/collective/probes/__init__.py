"""Probes of the collective domain: the rank processes (``worker``), the per-node driver that starts and
bounds them (``node``), and the ``collective`` fact of a single-node run (``local``)."""
