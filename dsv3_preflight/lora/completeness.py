"""When is a save finished, so that `lora watch` may judge it (pure: one observation of a save in, a decision out).

A save is finished when the trainer says so, or when the file itself proves it:

- the trainer says so: ``trainer_state.json`` is written beside the adapter (the Trainer writes it after the
  model, the optimizer and the scheduler), or a later ``checkpoint-<step>`` appears;
- the file proves it: a safetensors file whose header is readable, whose declared tensor data ends exactly at
  the end of the file, and which has no hole in that data (a preallocated file has its full size long before
  its bytes are written); a torch zip pickle whose end-of-central-directory record is in place.

And in every case the weights and ``adapter_config.json`` have stayed unchanged for ``settle`` seconds. A
save that is not finished is never judged: a half-written file is not a finding. One that never finishes is
reported, when the watch stops, as not judged.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Decision:
    ready: bool
    why: str


def decide_save(obs: Mapping[str, Any], *, stable_for: float, settle: float) -> Decision:
    """Whether the save ``obs`` describes may be judged now.

    ``obs`` holds: ``trainer_state`` (bool: trainer_state.json exists beside it), ``next_checkpoint`` (bool),
    ``config`` (bool: adapter_config.json exists), ``file_complete`` (bool or None: the header/zip proves the
    file whole; None when it cannot tell), ``missing_weights`` (bool: a config without weights), ``not_regular``
    (what the weights path is when it is no regular file: "a FIFO (named pipe)"; judged at once).
    ``stable_for`` is how long the weights and config have been unchanged.
    """
    if obs.get("not_regular"):
        # a FIFO, a device or a socket where the weights belong is what it is, not a save in progress
        return Decision(True, f"the weights path is {obs['not_regular']}, not a regular file")
    if stable_for < settle:
        return Decision(False, f"changed {stable_for:.1f}s ago (settle {settle:g}s)")
    trainer_done = bool(obs.get("trainer_state") or obs.get("next_checkpoint"))
    if trainer_done:
        return Decision(True, "trainer_state.json written" if obs.get("trainer_state") else "a later checkpoint appeared")
    if obs.get("missing_weights"):
        return Decision(False, "adapter_config.json without weights yet")
    if not obs.get("file_complete"):
        return Decision(False, "the weights are not completely written yet")
    if not obs.get("config"):
        return Decision(False, "the weights are complete; adapter_config.json is not written yet")
    return Decision(True, "the weights are completely written and adapter_config.json is beside them")
