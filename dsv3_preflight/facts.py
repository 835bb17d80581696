"""Gathering facts: each probe runs once per run, in its own daemon thread, under its timeout.

A probe that raises or outlives its timeout leaves an error for that fact; the checks that need it
become ERROR results while everything else goes on. Facts can be saved and replayed: replay never
touches the system, and a fact missing from the recording is an error, not a guess.
"""
from __future__ import annotations

import json
import threading
import time
import traceback
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from .portclaim import PortBusy
from .registry import ENGINE_FACTS, ProbeSpec, Registry

FACTS_FORMAT = "dsv3-preflight/facts"
FACTS_VERSION = 1
#: a facts document (--facts-in) larger than this is refused before parsing (a node's facts are < 1 MiB)
MAX_FACTS_BYTES = 32 << 20


#: the engine fact a probe needs to read a recorded machine instead of this one (``needs=["replay"]``)
REPLAY_FACT = "replay"


@dataclass(frozen=True)
class Replay:
    """Recorded sources that stand in for this machine's libraries, at the library boundary only: a property of the
    run, held in its fact store as the engine fact ``replay``. The probes of a domain read it like any other fact
    (``needs=["replay"]``) and never an environment variable; a live run holds the empty Replay.

    - ``nvml``: a recorded NVML document, answered by ``gpu.probes.replay.NvmlReplay`` instead of pynvml;
    - ``kmsg``: a recorded kernel log (``/dev/kmsg`` records, ``dmesg`` or ``journalctl -k`` lines);
    - ``sysroot``: a directory standing for ``/`` (sysfs PCI functions, /dev, /proc/driver/nvidia, the FM log);
    - ``libcuda``: the libcuda the driver-API child process loads (default ``libcuda.so.1``).

    :meth:`from_environ` is how the CLI's run (and a node task's) sets it up from ``$DSV3_PREFLIGHT_NVML_REPLAY``,
    ``$DSV3_PREFLIGHT_KMSG_REPLAY``, ``$DSV3_PREFLIGHT_SYSROOT`` and ``$DSV3_PREFLIGHT_LIBCUDA``, once, when the
    run starts; tests hand a Replay to the run or to a probe directly.
    """

    nvml: str | None = None
    kmsg: str | None = None
    sysroot: str | None = None
    libcuda: str | None = None

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> Replay:
        return cls(**{name: environ.get(var) or None for name, var in REPLAY_ENV.items()})

    @property
    def root(self) -> Path:
        """The directory standing for ``/``: the recorded sysroot, else ``/``."""
        return Path(self.sysroot or "/")

    def as_environ(self) -> dict[str, str]:
        """The environment variables that set this replay up in another process's run (a CLI child)."""
        return {REPLAY_ENV[f.name]: value for f in fields(self) if (value := getattr(self, f.name))}


#: the environment variable that sets up each field of :class:`Replay` when a run starts
REPLAY_ENV = {"nvml": "DSV3_PREFLIGHT_NVML_REPLAY", "kmsg": "DSV3_PREFLIGHT_KMSG_REPLAY",
              "sysroot": "DSV3_PREFLIGHT_SYSROOT", "libcuda": "DSV3_PREFLIGHT_LIBCUDA"}
#: a live run: every library of this machine answers itself
LIVE = Replay()


class FactError(Exception):
    """A fact could not be gathered: the probe raised, timed out, or the replay lacks it."""


class FactBusy(FactError):
    """A fact was not gathered because another dsv3-preflight run on this node held the port it binds or
    inspects (the message names that run's pid): not a finding about this node, never a PASS."""


class FactNotRecorded(FactError):
    """A replay's recording does not hold the fact at all (recorded before the probe existed, or by a run that
    did not gather it): the check cannot be judged from it; not a finding about the node, never a PASS."""


@dataclass
class _Slot:
    done: threading.Event
    value: Any = None
    error: str | None = None
    started: float = 0.0
    duration_s: float | None = None
    timeout: float = 0.0
    busy: bool = False
    not_recorded: bool = False


class FactStore:
    """The facts of one node for one run."""

    def __init__(
        self,
        registry: Registry,
        engine_facts: Mapping[str, Any],
        recorded: Mapping[str, Any] | None = None,
        recorded_errors: Mapping[str, str] | None = None,
        replay_source: str | None = None,
        replay: Replay = LIVE,
    ) -> None:
        """``replay_source``: the facts are a recording (``--facts-in``), no probe runs. ``replay``: the probes run,
        and read the recorded sources it names at the library boundary (the engine fact ``replay``)."""
        self._registry = registry
        self._engine = {REPLAY_FACT: replay, **engine_facts}
        self._slots: dict[str, _Slot] = {}
        self._lock = threading.Lock()
        self._replay_source = replay_source
        self._recorded = dict(recorded or {})
        self._recorded_errors = dict(recorded_errors or {})
        #: probes that had to wait for a port another dsv3-preflight run held: fact -> what happened
        self.waits: dict[str, str] = {}

    @property
    def replaying(self) -> bool:
        return self._replay_source is not None

    def start(self, facts: Iterable[str]) -> None:
        """Start gathering every fact in ``facts`` and what they depend on, in parallel."""
        # every slot exists before any probe runs, so a probe declared ``after`` another sees it is part of the run
        new = [f for f in self._registry.fact_closure([f for f in facts if f not in ENGINE_FACTS]) if self._add_slot(f)]
        for fact in new:
            self._launch(fact)

    def _add_slot(self, fact: str) -> bool:
        """Create the slot of ``fact``; False when it already existed."""
        with self._lock:
            if fact in self._slots:
                return False
            spec = self._registry.probes[fact]
            self._slots[fact] = _Slot(done=threading.Event(), started=time.monotonic(), timeout=spec.timeout)
            return True

    def _start_one(self, fact: str) -> None:
        if self._add_slot(fact):
            self._launch(fact)

    def _launch(self, fact: str) -> None:
        slot = self._slots[fact]
        if not self.replaying and fact in self._recorded:  # gathered earlier in this process (pytest items)
            slot.value, slot.duration_s = self._recorded[fact], 0.0
            slot.done.set()
            return
        if self.replaying:
            if fact in self._recorded:
                slot.value = self._recorded[fact]
            elif fact in self._recorded_errors:
                slot.error = self._recorded_errors[fact]
            else:
                slot.error = f"fact {fact!r} is not in the replayed facts ({self._replay_source})"
                slot.not_recorded = True
            slot.duration_s = 0.0
            slot.done.set()
            return
        thread = threading.Thread(target=self._run_probe, args=(fact, slot), name=f"probe:{fact}", daemon=True)
        thread.start()

    def _run_probe(self, fact: str, slot: _Slot) -> None:
        spec = self._registry.probes[fact]
        claims: list[Any] = []
        try:
            kwargs = {}
            for need in spec.needs:
                kwargs[need] = self.get(need)
            self._wait_for_earlier(spec)
            claims = self._claim(fact, spec)
            slot.started = time.monotonic()  # the probe's own timeout starts once its inputs are there
            slot.value = spec.gather(**kwargs)
            json.dumps(slot.value, allow_nan=False)  # facts are plain JSON data
        except FactError as exc:
            slot.error = f"needs a fact that could not be gathered: {exc}"
        except PortBusy as exc:  # another dsv3-preflight run holds the port: said, never judged as ours
            slot.error, slot.busy = str(exc), True
        except BaseException as exc:  # noqa: BLE001 - a probe that raises or exits is an error for this fact only
            tb = traceback.extract_tb(exc.__traceback__)
            where = f" (at {tb[-1].filename}:{tb[-1].lineno})" if tb else ""
            slot.error = f"probe {fact!r} raised {type(exc).__name__}: {exc}{where}"
        finally:
            for held in claims:
                held.release()
            slot.duration_s = time.monotonic() - slot.started
            slot.done.set()

    def _claim(self, fact: str, spec: ProbeSpec) -> list[Any]:
        """Claim the ports the probe binds or inspects (portclaim), waiting at most its timeout for another run."""
        if not spec.claims or self.replaying:
            return []
        from .portclaim import claim

        profile = self._engine.get("profile")
        held: list[Any] = []
        for field_name in spec.claims:
            port = getattr(profile, field_name, None) if profile is not None else None
            if not isinstance(port, int):
                continue
            try:
                got = claim(port, wait_s=spec.timeout)
            except BaseException:
                for h in held:
                    h.release()
                raise
            held.append(got)
            if got.waited_for is not None:
                self.waits[fact] = (f"waited {got.waited_s:.1f} s for port {port}: it was in use by "
                                    f"{got.waited_for.describe()}")
        return held

    def _wait_for_earlier(self, spec: ProbeSpec) -> None:
        """Wait (bounded by their timeouts) for the probes this one runs ``after``, when this run gathers them."""
        for first in spec.after:
            with self._lock:
                other = self._slots.get(first)
            if other is not None:
                other.done.wait(max(0.0, self._give_up_at(first, other) - time.monotonic()))

    def get(self, fact: str, deadline: float | None = None) -> Any:
        """The value of ``fact``, waiting at most until its probe's timeout or ``deadline`` (monotonic)."""
        if fact in self._engine:
            return self._engine[fact]
        self._start_one(fact)
        slot = self._slots[fact]
        while not slot.done.is_set():
            now = time.monotonic()
            limits = [self._give_up_at(fact, slot)]
            if deadline is not None:
                limits.append(deadline)
            limit = min(limits)
            if now >= limit:
                if deadline is not None and limit == deadline:
                    raise FactError(f"{fact}: not gathered before the check's own timeout")
                raise FactError(f"probe {fact!r} timed out after {slot.timeout:g} s")
            slot.done.wait(min(limit - now, 0.5))
        if slot.error is not None:
            raise (FactBusy if slot.busy else FactNotRecorded if slot.not_recorded else FactError)(slot.error)
        return slot.value

    def ready(self, fact: str) -> bool:
        """True when ``fact`` can be read without waiting (gathered, failed, or an engine fact)."""
        if fact in self._engine:
            return True
        slot = self._slots.get(fact)
        return slot is not None and slot.done.is_set()

    def _give_up_at(self, fact: str, slot: _Slot) -> float:
        """When waiting for ``fact`` ends (monotonic): its timeout plus the time it may wait for its inputs."""
        return slot.started + slot.timeout + self._dependency_allowance(fact)

    def _dependency_allowance(self, fact: str) -> float:
        """While a probe still waits for its inputs, their timeouts count on top of its own."""
        spec = self._registry.probes[fact]
        allowance = sum(self._registry.probes[n].timeout for n in spec.needs if n in self._registry.probes)
        # a probe ordered after others waits for them, and they for their own inputs
        allowance += sum(self._registry.probes[n].timeout + self._dependency_allowance(n)
                         for n in spec.after if n in self._slots)
        if spec.claims and not self.replaying:  # it may wait up to its own timeout for another run's claim
            allowance += spec.timeout
        return allowance

    def snapshot(self) -> dict[str, Any]:
        """Everything gathered so far, as a facts document (JSON types)."""
        facts, errors, timings = {}, {}, {}
        for name, slot in sorted(self._slots.items()):
            if not slot.done.is_set():
                errors[name] = f"probe {name!r} still running when the run ended (timeout {slot.timeout:g} s)"
                continue
            if slot.error is not None:
                errors[name] = slot.error
            else:
                facts[name] = slot.value
            timings[name] = round(slot.duration_s or 0.0, 6)
        snap = {"facts": facts, "fact_errors": errors, "fact_timings_s": timings}
        if self.waits:
            snap["fact_waits"] = dict(sorted(self.waits.items()))
        return snap


def save_facts(path: str | Path, node: str, profile: Mapping[str, Any], snapshot: Mapping[str, Any]) -> None:
    doc = {"format": FACTS_FORMAT, "version": FACTS_VERSION, "node": node, "profile": profile, **snapshot}
    Path(path).write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")


def load_facts(path: str | Path) -> dict[str, Any]:
    """Read a facts document (as written by ``--facts-out`` or found in a result document's nodes)."""
    from .inputs import InputError, read_json

    try:
        doc = read_json(path, what="--facts-in", max_bytes=MAX_FACTS_BYTES)
    except InputError as exc:
        raise FactError(f"{path}: not a readable JSON facts file: {exc.reason}") from None
    if isinstance(doc, dict) and doc.get("format") == "dsv3-preflight/result":
        nodes = doc.get("nodes") or []
        if len(nodes) != 1:
            raise FactError(f"{path}: a result document with {len(nodes)} nodes; replay takes one node's facts")
        doc = {"format": FACTS_FORMAT, "version": FACTS_VERSION, **nodes[0]}
    if not isinstance(doc, dict) or doc.get("format") != FACTS_FORMAT or not isinstance(doc.get("facts"), dict):
        raise FactError(f"{path}: not a dsv3-preflight facts document (missing format/facts)")
    return doc
