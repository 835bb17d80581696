"""The typed run API: ``run_preflight(RunOptions(...)) -> document``.

The CLI (`run`, `launch`, `run --all-nodes`) and the pytest plugin run the suite through this one function (a
cluster node's task runs ``runner.run_this_node`` directly); nothing below the commands sees an argparse namespace::

    from dsv3_preflight.preflight import RunOptions, run_preflight

    doc = run_preflight(RunOptions(profile_name="cpu", only=("net.*",)))
    doc["verdict"], doc["exit_code"]          # "GO" | "NO-GO" | "NOTHING SELECTED", 0 | 1 | 5

The document is the versioned result document (``document.build_document``); renderers turn it
into console text, HTML or JUnit. Usage and configuration errors raise (``ConfigError``,
``RegistryError``, ``FactError``, ``UsageError``); a check or a node that cannot run is an ERROR
result in the document, never an exception.
"""
from __future__ import annotations

import datetime as _dt
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .result import Result


class UsageError(Exception):
    """Bad usage or configuration: the CLI prints it as one line and exits 4."""


@dataclass(frozen=True)
class RunOptions:
    """Everything a run needs, typed. Defaults give a plain `dsv3-preflight run` on this node."""

    # -- the profile: built-in name, TOML, values by field name (the CLI's flags), the training command's
    profile_name: str | None = None
    config_path: str | None = None
    profile_values: Mapping[str, Any] = field(default_factory=dict)
    training_values: Mapping[str, tuple[Any, str]] = field(default_factory=dict)
    #: a resolved profile given whole (cluster mode's node side: the driver resolved it); wins over the above
    profile: Any = None
    #: the environment the profile is resolved against (None: this process's)
    environ: Mapping[str, str] | None = None
    # -- which checks
    only: Sequence[str] = ()
    skip: Sequence[str] = ()
    tags: Sequence[str] = ()
    checks_dirs: Sequence[str] = ()
    entry_points: bool = True
    # -- how
    timeout: float | None = None
    strict: bool = False
    facts_in: str | None = None
    facts_out: str | None = None
    logs: Sequence[str] = ()
    node_name: str | None = None
    #: facts this process gathered earlier (the pytest plugin runs one check per item): used, not probed again
    seed_facts: Mapping[str, Any] = field(default_factory=dict)
    # -- cluster mode
    all_nodes: bool = False
    ray_address: str | None = None
    #: None, "gang" (one all_reduce over all nodes) or "pairs" (every pair of nodes)
    probe: str | None = None
    pairs_sample: int | None = None
    #: with probe "pairs": "fast" (round 1 pairs every node, then only the suspects) or "all" (every pair)
    pairs_schedule: str = "fast"
    #: an open Ray session to use and leave open (`launch --all-nodes` keeps it for torchrun)
    ray_session: Any = None
    # -- what the person sees while it runs (stderr); the document is the same either way
    progress: bool = True
    no_color: bool = False
    on_result: Callable[[Result], None] | None = None
    command: Sequence[str] = ()


def resolve(options: RunOptions, environ: Mapping[str, str] | None = None):
    """The profile of a run (without replay): the given one, else resolved from the options' layers."""
    if options.profile is not None:
        return options.profile
    from .profile import resolve_profile

    env = environ if environ is not None else (options.environ if options.environ is not None else os.environ)
    return resolve_profile(cli=dict(options.profile_values), environ=env, config_path=options.config_path,
                           profile_name=options.profile_name, training=dict(options.training_values) or None)


def _replay_profile(options: RunOptions, facts_doc: Mapping[str, Any], notes: list[str]):
    """A replay judges under the recorded profile unless the command line names another, and says which."""
    from .profile import Profile

    recorded = facts_doc.get("profile")
    recorded_env = (facts_doc.get("facts") or {}).get("env") or {}
    overrides = {k: v for k, v in options.profile_values.items() if v is not None}
    if options.profile is not None:
        return options.profile
    if options.profile_name or options.config_path or not isinstance(recorded, Mapping) or "values" not in recorded:
        why = ("the command line names a profile" if options.profile_name or options.config_path
               else "the facts carry no recorded profile")
        notes.append(f"replay: {why}; resolved against the recorded environment")
        return resolve(options, environ=recorded_env)
    profile = Profile.from_dict(recorded)
    for key, value in overrides.items():
        profile = profile.with_values(f"--{key.replace('_', '-')}", **{key: value})
    for key, (value, where) in options.training_values.items():
        profile = profile.with_values(f"training command {where}", **{key: value})
    changed = f"; the command line changes {', '.join(sorted(overrides))}" if overrides else ""
    notes.append(f"replay: judged under the recorded profile {profile.name!r} ({options.facts_in}){changed}; "
                 "pass --profile or --config to judge under another")
    return profile


def run_preflight(options: RunOptions) -> dict[str, Any]:
    """Run the preflight as ``options`` say and return the result document (nothing is printed to stdout)."""
    from .document import build_document
    from .facts import load_facts, save_facts
    from .registry import load_registry
    from .secrets import mask

    if options.facts_in and options.all_nodes:
        raise UsageError("--facts-in replays one node; it cannot be combined with --all-nodes")
    if options.timeout is not None and not (isinstance(options.timeout, (int, float)) and 0 < options.timeout < float("inf")):
        raise UsageError(f"timeout {options.timeout!r}: expected a finite number of seconds > 0")
    if options.probe not in (None, "gang", "pairs"):
        raise UsageError(f"--probe {options.probe!r}: expected gang or pairs")
    if options.pairs_schedule not in ("fast", "all"):
        raise UsageError(f"--pairs {options.pairs_schedule!r}: expected fast or all")
    started = _dt.datetime.now(_dt.timezone.utc)
    notes: list[str] = []
    facts_doc = load_facts(options.facts_in) if options.facts_in else None
    profile = _replay_profile(options, facts_doc, notes) if facts_doc else resolve(options)
    registry = load_registry(options.checks_dirs, entry_points=options.entry_points)
    selection = registry.select(_split(options.only), _split(options.skip), _split(options.tags))
    timeout = options.timeout if options.timeout is not None else profile.run_timeout
    extra: dict[str, Any] = {}
    results: list[Result] = []
    nodes: list[dict[str, Any]] = []
    mode = "cluster" if options.all_nodes else ("replay" if facts_doc else "node")
    if not selection.selected:
        extra["nothing_selected"] = selection.why_empty()
    elif options.all_nodes:
        from .cluster import run_all_nodes

        outcome = run_all_nodes(registry, selection.selected, profile, timeout=timeout, address=options.ray_address,
                                probe=options.probe, pairs_sample=options.pairs_sample,
                                pairs_schedule=options.pairs_schedule,
                                checks_dirs=list(options.checks_dirs), progress=options.progress,
                                no_color=options.no_color, session=options.ray_session)
        results, nodes, extra = outcome.results, outcome.nodes, {**extra, **outcome.extra}
    else:
        from .console import progress
        from .runner import run_this_node

        with progress(len(selection.selected), enabled=options.progress, no_color=options.no_color) as advance:
            def on_result(result: Result) -> None:
                advance(result)
                if options.on_result:
                    options.on_result(result)

            seeded = facts_doc or ({"facts": dict(options.seed_facts)} if options.seed_facts else None)
            outcome = run_this_node(registry, selection.selected, profile, node=options.node_name, facts_doc=seeded,
                                    replay_source=options.facts_in, timeout=timeout, on_result=on_result)
        results, nodes = outcome.results, [outcome.entry]
        if options.facts_out:
            save_facts(options.facts_out, outcome.node, profile.to_dict(),
                       mask({k: outcome.entry[k] for k in ("facts", "fact_errors", "fact_timings_s")}))
    if options.logs:
        from .doctor import triage

        diagnosis = triage(list(options.logs))
        if diagnosis["unreadable"] and not diagnosis["files"]:
            raise UsageError("--logs: " + "; ".join(f"{u['path']}: {u['error']}" for u in diagnosis["unreadable"]))
        extra["doctor"] = diagnosis
    if notes:
        extra["notes"] = notes
    ran = {r.name for r in results}  # a check --probe asked for (dist.pairs, dist.allreduce_cluster) is not deselected
    return build_document(mode=mode, profile=profile.to_dict(), nodes=nodes, results=results,
                          deselected={name: why for name, why in selection.deselected.items() if name not in ran},
                          command=list(options.command), strict=options.strict,
                          started=started, extra=extra)


def _split(values: Sequence[str]) -> list[str]:
    return [v.strip() for item in values for v in str(item).split(",") if v.strip()]
