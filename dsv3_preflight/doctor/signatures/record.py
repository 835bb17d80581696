"""A signature: one log message → failure class, root cause, fix and the preflight check that catches it.

A signature is a keyword record: ``S(id=..., cls=..., kind=..., needles=..., pattern=..., title=..., ...)`` in the
module of its cause family (``benign.py``, ``cuda_fabric.py``, ... ``progress.py``); ``order.py`` states the order in
which the families are tried. Its ``example`` is a real line (copied from a public log, or built from the library's
own format string; ``source`` names it). The tests prove every example is recognised by its own signature and no
earlier one, and that every fix passes ``bash -n``.

Signatures were written from the development part of ``tests/data/doctor/corpus`` and from the libraries'
source text (NCCL, torch, DeepSpeed, PEFT, transformers, safetensors, glibc/kernel messages), never from the
held-out part (``benchmarks/bench_doctor_accuracy.py`` measures them there).

Fields:

- ``cls``: the failure class (``CLASSES``), or None for a pure consequence that names no cause (a process
  exit code, ``ChildFailedError``): a log with only those is a failure whose cause is not recognised.
- ``kind``: ``cause`` (a root cause), ``suspect`` (a cause only when the log also shows a failure, e.g. NCCL on
  ``lo``), ``symptom`` (what ranks print once something else failed: watchdog timeouts, broken pipes),
  ``progress`` (a sign the run was working), ``benign`` (a line that looks alarming and is not: NCCL failing to
  open libibverbs on a machine without InfiniBand), ``context`` (lines that attribute later lines).
- ``tier``: causal depth. The headline root cause is the finding with the lowest tier, and within a tier the
  first in time: 0 the environment (CUDA/driver/fabric, versions), 1 a specific cause, 2 a weak cause (a
  SIGKILL, a suspect), 3 a symptom with a class (collective timeouts), 4 a symptom without one.
- ``needles``: literal byte strings, at least one of which must occur in a line for ``pattern`` to be tried
  (the reader scans big files for needles only).
- ``pattern``: a Python regex searched in the cleaned line. Named groups fill ``{name}`` in ``title``,
  ``root_cause`` and ``fix`` (in ``fix`` the value is shell-quoted). ``[[ ... ]]`` is kept only when every
  ``{name}`` in it was filled; ``[[ ... || else ]]`` gives ``else`` otherwise (a fix that names the port the log
  gave, or asks for it).
- ``fix``: lines to paste into bash (``bash -n`` clean): commands, ``${NAME:?what to put}`` placeholders for
  what only the user knows, prose only in ``#`` comments.
- ``check``: the ``dsv3-preflight`` check that catches this before launch.
- ``consequence_of``: ids of signatures that, when also present, explain this one.
- ``requires``: a context key that must have been seen in the few lines before (a JSON error is a config error
  only inside DeepSpeed's or accelerate's config loading).
- ``transient``: the library retries after printing it (NCCL's "Call to connect returned ..., retrying", torch's
  client-socket warnings): it is a cause only when no progress follows it in the same file.
- ``stall``: for a suspect that explains a run which stops without any error: when a log has no error line and
  no sign of progress, a suspect with ``stall`` is named as the suspected cause of the hang (exit 1) instead of
  "no progress" (exit 5). ``"any"``: always (the rendezvous server waiting for workers); ``"multi_node"``: unless
  NCCL's own lines show a one-node job (loopback or a container bridge is right on one node).
- ``multi_node_only``: a cause that holds only between nodes (a peer on a container bridge): left out where
  NCCL's own lines show a one-node job, like a ``stall="multi_node"`` suspect.
- ``teardown``: a symptom without a class that processes also print while they exit (NCCL's proxy closing, torch's
  heartbeat or store client finding the master gone, CUDA's "driver shutting down"). After a sign that the run
  finished (``ends_run``) it is teardown noise: listed as a warning, not an error, so a finished run stays healthy.
- ``ends_run``: a progress signature that says the run (or this process) finished: ``train_runtime``, "exits
  successfully", nccl-tests' average bus bandwidth.
- ``succeeded``: a run's end (``ends_run``) that says the work succeeded, not only that a process ended: torchrun's
  agent saw every local worker exit 0, the training loop returned (``train_runtime``), wandb saw exit code 0. A
  process that says so survived the errors it printed before (a batch-size finder's caught OOM, a torchrun restart):
  when every error line of every file comes before such a line in its own file, the run is healthy and those lines
  are listed as survived (triage: ``_survived``). nccl-tests' last line is no such sign: a run with wrong results
  prints it too, and torch's exit warning is printed by a rank that crashed as well.
- ``lost_after_start``: a cause about reaching the rendezvous store that, once the run has started (a sign of the
  work in some file, and in the line's own file not after it), only says the store went away: it becomes the derived
  symptom ``store.lost_after_start`` (no class), and the failure of the store's host is looked for elsewhere.
- ``workers_done``: a teardown symptom printed only once this node's workers had all succeeded (torchrun waits at
  its exit barrier only then), or the agent's own message that they did: every teardown symptom of that file is
  noise, wherever it stands in the file (the store's own error lines, the workers' exit-time lines, come before the
  agent's message).
- ``actor``: who must act (``classes.CLASS_ACTOR``, ``classes.ACTOR_OF``); ``""`` (the default): the tables'; None:
  the log does not say.
- ``enrich``: more values for the texts, computed from the pattern's groups (an Xid's meaning from NVIDIA's
  catalogue); the names it fills are ``derived.DERIVED_NAMES``.
- ``decode``: how the collective probe's decoder (:mod:`dsv3_preflight.collective.decode`) reads the same message
  (:class:`Decode`): the message is added once, in its signature's record.
- ``hang_suspect``: a suspect without ``stall`` that still explains a hang the user reports (``doctor --hung``):
  a log that merely stops is not blamed on it (healthy runs print it too), a run the user says hung is. Harmless
  suspects (an IPv6 lookup) have neither and are never a hang's cause.

Table order matters: on one line the first matching signature wins, so specific entries precede general ones
(within a family, in its module; between families, in ``order.py``). Validation (:func:`Signature.__post_init__`)
refuses a record whose fields contradict each other, one small rule each (``_RULES``).
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from re import Match, Pattern

from .classes import ACTOR_OF, ACTORS, CLASS_ACTOR, CLASSES, EXTRA_CLASSES

KINDS = ("cause", "suspect", "symptom", "progress", "benign", "context")


@dataclass(frozen=True, kw_only=True)
class Decode:
    """How the collective probe's decoder reads a library message (:func:`dsv3_preflight.collective.decode.decode`).

    It searches an exception message and a log tail as one text, case-insensitively: ``pattern`` is its own regex for
    the message (kept as the decoder has always matched it, beside the doctor's line pattern of the same record).
    ``cause`` and ``remediation`` are built from the match; ``remediation`` pastes into bash and may name
    :data:`.shared.IFACE` (the decoder fills in this node's interface). ``kind`` is the decoder's finding kind (its
    order is ``collective.decode.ORDER``), ``cause_id`` the root-cause key shared with the checks
    (``result.Finding.cause``).
    """
    kind: str
    pattern: str
    cause: Callable[[Match[str]], str]
    remediation: Callable[[Match[str]], str]
    actor: str
    cause_id: str
    regex: Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.actor not in ACTORS:
            raise ValueError(f"decode {self.kind}: actor is one of {ACTORS}")
        object.__setattr__(self, "regex", re.compile(self.pattern, re.IGNORECASE))


@dataclass(frozen=True, kw_only=True)
class Signature:
    """One log message the doctor knows: the fields are described in this module's docstring."""
    id: str
    cls: str | None
    kind: str
    needles: tuple[bytes, ...]
    pattern: str
    title: str
    root_cause: str = ""
    fix: str = ""
    check: str | None = None
    tier: int | None = None
    example: str = ""
    source: str = ""
    consequence_of: tuple[str, ...] = ()
    requires: str | None = None
    transient: bool = False
    stall: str | None = None
    multi_node_only: bool = False
    hang_suspect: bool = False
    teardown: bool = False
    stop: str = ""       # printed because someone stopped the run: "signal" (a process got Ctrl-C or a kill),
                         # "relay" (the launcher passing a stop on: it does so after a rank's own failure too)
    ends_run: bool = False
    succeeded: bool = False   # see the module docstring
    workers_done: bool = False   # see the module docstring
    lost_after_start: bool = False   # see the module docstring
    setup: bool = False   # a progress sign of set-up (NCCL connected), not of the work: see triage's zero-bar rule
    actor: str | None = ""   # who must act (CLASS_ACTOR, ACTOR_OF); "": the table's; None: the log does not say
    #: more values for the texts, computed from the pattern's groups (an Xid's meaning from NVIDIA's catalogue); the
    #: names it fills are DERIVED_NAMES
    enrich: Callable[[dict[str, str]], dict[str, str]] | None = field(default=None, compare=False, repr=False)
    #: how the collective probe's decoder reads the same message (none: the decoder does not look for it)
    decode: tuple[Decode, ...] = field(default=(), compare=False, repr=False)
    regex: Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for rule in _RULES:
            problem = rule(self)
            if problem:
                raise ValueError(f"signature {self.id}: {problem}")
        object.__setattr__(self, "regex", re.compile(self.pattern))
        if self.actor == "":
            object.__setattr__(self, "actor", _default_actor(self))
        if self.actor not in (None, *ACTORS):
            raise ValueError(f"signature {self.id}: actor is one of {ACTORS} or None")
        if self.tier is None:
            object.__setattr__(self, "tier", _default_tier(self))


S = Signature


# ------------------------------------------------------------------ validation: one rule each, in this order
def _kind_and_class(s: Signature) -> str | None:
    if s.kind not in KINDS:
        return f"unknown kind {s.kind!r}"
    if s.cls is not None and s.cls not in CLASSES and s.cls not in EXTRA_CLASSES:
        return f"unknown class {s.cls!r}"
    if s.kind in ("cause", "suspect") and s.cls is None:
        return f"a {s.kind} needs a class"
    return None


def _needles(s: Signature) -> str | None:
    return None if s.needles else "needs at least one needle"


def _stall(s: Signature) -> str | None:
    if s.stall not in (None, "any", "multi_node") or (s.stall and s.kind != "suspect"):
        return "stall is 'any' or 'multi_node', on a suspect only"
    if s.hang_suspect and (s.kind != "suspect" or s.stall):
        return "hang_suspect is for a suspect without stall"
    return None


def _stop(s: Signature) -> str | None:
    if (s.teardown or s.stop) and (s.kind != "symptom" or s.cls is not None):
        return "teardown and stop are for a symptom without a class"
    if s.stop not in ("", "signal", "relay"):
        return "stop is '', 'signal' or 'relay'"
    return None


def _run_end(s: Signature) -> str | None:
    if s.lost_after_start and s.kind != "cause":
        return "lost_after_start is for a cause"
    if s.workers_done and not (s.teardown or s.ends_run):
        return "workers_done is for a teardown symptom or a run's end"
    return None


def _progress(s: Signature) -> str | None:
    if (s.ends_run or s.setup) and s.kind != "progress":
        return "ends_run and setup are for a progress signature"
    if s.succeeded and not s.ends_run:
        return "succeeded is for a run's end (ends_run)"
    return None


_RULES: tuple[Callable[[Signature], str | None], ...] = (_kind_and_class, _needles, _stall, _stop, _run_end,
                                                                 _progress)


def _default_actor(s: Signature) -> str | None:
    """Who acts when the record does not say: a cause's, a suspect's or a classed symptom's from the tables."""
    named = s.kind in ("cause", "suspect") or (s.kind == "symptom" and s.cls is not None)
    return ACTOR_OF.get(s.id, CLASS_ACTOR.get(s.cls or "")) if named else None


def _default_tier(s: Signature) -> int:
    """The causal depth by kind: a cause 1, a suspect 2, a symptom 3 with a class and 4 without, others 9."""
    return {"cause": 1, "suspect": 2, "symptom": 3 if s.cls else 4}.get(s.kind, 9)
