"""`dsv3-preflight launch`: run the preflight, then exec torchrun only when every check is green."""
from __future__ import annotations

import os
import shlex
import sys

NAME = "launch"
HELP = "run the preflight, then start torchrun only when no check is FAIL/ERROR (-- SCRIPT ARGS...)"


def add_arguments(parser) -> None:
    from .run import add_run_options

    add_run_options(parser)
    group = parser.add_argument_group("launch")
    group.add_argument("--dry-run", action="store_true",
                       help="run the preflight, then print the exact command and the environment it adds (shell-quoted) instead of starting it")
    group.add_argument("--launch-log", default=None, metavar="PATH",
                       help="the launch log (default REPORTS_DIR/launch-<time>-<node>.log; none with --no-report)")
    group.add_argument("--stop-grace", type=float, default=10.0, metavar="S",
                       help="seconds torchrun gets to stop after an interrupt (with --all-nodes: the other nodes, after one "
                            "node's torchrun fails), then SIGKILL")
    from ..stall import ON_STALL
    from ..stall.rule import DEFAULT_STALL_AFTER

    group.add_argument("--stall-after", type=float, default=DEFAULT_STALL_AFTER, metavar="SECONDS",
                       help="the stall watch: no progress in the run's output for this long (at least 3x the longest "
                            "gap between steps) is a suspected stall; 0 turns the watch off (docs/stall-watch.md)")
    group.add_argument("--on-stall", choices=ON_STALL, default="report",
                       help="on a stall: report (name the culprit, keep the job) or stop (then end torchrun on every node)")
    parser.add_argument("training", nargs="*", metavar="-- SCRIPT ARGS",
                        help="the training script and its arguments, after `--`")


def run(args) -> int:
    from ..cli import UsageError

    if not args.training:
        raise UsageError("name the training script after `--`: dsv3-preflight launch [options] -- src/train.py ARGS...")
    if args.facts_in and not args.dry_run:
        raise UsageError("--facts-in replays another run's facts: a launch needs this node's own preflight (use it with --dry-run)")
    training_lines, training_values = _read_training_command(args)
    if not args.all_nodes:
        if not args.dry_run:
            _script_exists(args, training_values)
        return _launch(args, None, training_lines, training_values)
    # One Ray connection for the preflight and the launch: the same nodes, ids and ranks (run_all_nodes
    # reuses an open connection and leaves it open). A connection error is the preflight's red row.
    from ..cluster import ClusterError, connect, disconnect
    from ..cluster.driver import connect_timeout
    from ..preflight import resolve
    from .run import options_from_args

    run_timeout = args.timeout if args.timeout is not None else resolve(options_from_args(args)).run_timeout
    session: object
    try:
        session = connect(args.ray_address, timeout=connect_timeout(run_timeout))
    except ClusterError as exc:
        # the preflight reports this error as its cluster.connect row; it must not connect a second time
        # (twice the wait, and a ray.init still running in the background may leave a half-open connection)
        session = exc
    try:
        return _launch(args, session, training_lines, training_values)
    finally:
        if not isinstance(session, ClusterError):
            disconnect(session)


def _script_exists(args, training_values: dict) -> None:
    """Refuse, before the preflight, a training script that is not there. torchrun is the profile's (the command
    line, the environment, --config, or the training command's values: the one launch will run), whose own
    -m/--no-python make the training word a module or an executable."""
    from ..cli import UsageError
    from ..launch.command import training_script
    from ..preflight import resolve
    from .run import options_from_args

    words = resolve(options_from_args(args, training_values=training_values)).torchrun
    try:
        torchrun = shlex.split(words) if words else None
    except ValueError:   # unbalanced quotes: env.torchrun_python reports it, and no torchrun starts
        return
    script = training_script(args.training, torchrun)
    if script and not os.path.exists(script):
        raise UsageError(f"the training script {script} does not exist (in {os.getcwd()}): nothing run")


def _read_training_command(args) -> tuple[list[str], dict]:
    """Take the profile values the training command carries (--deepspeed, --output_dir, --lora_target...):
    the preflight judges what will run. Returns the lines said on stderr and kept in the launch log, and the
    values as profile layers (field -> (value, where))."""
    from ..launch.trainer_args import contradictions, trainer_values
    from ..preflight import resolve
    from .run import options_from_args

    found = trainer_values(args.training)
    lines = []
    if found.values:
        lines.append("from the training command: " + ", ".join(
            f"{name}={value} ({found.origins[name]})" for name, value in found.values.items()))
    lines += [f"note: {n}" for n in found.notes]
    if found.values:
        base = resolve(options_from_args(args))
        lines += [f"warning: {w}" for w in contradictions(found, base)]
    values = {name: (value, found.origins[name]) for name, value in found.values.items()}
    for line in lines:
        print(line, file=sys.stderr)  # one line each, never wrapped
    return lines, values


def _launch(args, session, training_lines: list[str], training_values: dict) -> int:
    from ..console import make_console, render_document
    from ..launch.command import build_command, default_torchrun, derive_env, shell_text
    from ..launch.gate import is_go, launch_log_path, launch_log_text, red_line, torchrun_log_dir, write_launch_log
    from ..preflight import UsageError, run_preflight
    from .run import options_from_args, write_outputs

    options = options_from_args(args, training_values=training_values, ray_session=session)
    from ..plugin_guard import stdout_to_stderr

    with stdout_to_stderr():  # stdout carries only the command to paste, whatever a plugin or a library prints
        doc = run_preflight(options)
    code = int(doc["exit_code"])
    try:
        written = write_outputs(doc, json_path=args.json_path, html_path=args.html_path, no_report=args.no_report,
                                reports_dir=args.reports_dir, junit_path=args.junit_path)
    except OSError as exc:
        raise UsageError(f"cannot write the report: {exc}") from None
    err = make_console(args.no_color, stderr=True)
    render_document(doc, err, quiet=args.quiet)
    for path in written:
        err.print(f"wrote {path}", soft_wrap=True, markup=False, highlight=False)  # a path is never wrapped
    node = doc["nodes"][0]["node"] if len(doc["nodes"]) == 1 and not args.all_nodes else "cluster"
    log = args.launch_log or (None if args.no_report else launch_log_path(args.reports_dir, node))

    if not is_go(doc, code):
        print(red_line(doc, code, written), file=sys.stderr, flush=True)
        if log:
            write_launch_log(log, launch_log_text(doc, code, written, None, "NO-GO: torchrun not started", training_lines))
        return code or 1

    # torchrun gets the profile the preflight judged (a replay: the recorded one), not a second resolution
    from ..profile import Profile

    environ = dict(doc["nodes"][0]["facts"].get("env") or {}) if args.facts_in else dict(os.environ)
    profile = Profile.from_dict(doc["profile"])
    torchrun = shlex.split(profile.torchrun) if profile.torchrun else None   # the command env.torchrun_python judged
    if args.all_nodes:
        from ..launch.ray_launch import dry_run_text, launch_all_nodes

        if args.dry_run:
            text = dry_run_text(doc, profile, args.training, torchrun)
            if log:
                write_launch_log(log, launch_log_text(doc, code, written, None, "dry run: not started", training_lines) + text)
            sys.stdout.write(text)
            return 0
        header = launch_log_text(doc, code, written, None, "GO: starting torchrun on every node through Ray", training_lines)
        if log:
            write_launch_log(log, header)
            err.print(f"launch log {log}")
        from ..stall import StallOptions
        from ..stall.publish import publisher

        return launch_all_nodes(doc, training=args.training, reports_dir=args.reports_dir, stop_grace=args.stop_grace,
                                profile=profile, torchrun=torchrun, launch_log=log, log_text=header,
                                stall=StallOptions(args.stall_after, args.on_stall),
                                publish=publisher(launch_log=log, written=written, reports_dir=args.reports_dir))

    derived, notes = derive_env(profile, doc["nodes"][0].get("facts") or {})
    command = build_command(profile, args.training, environ=environ, derived=derived,
                            torchrun=torchrun or default_torchrun(sys.executable), notes=notes,
                            log_dir=str(torchrun_log_dir(log)) if log else None)
    for warning in command.warnings:
        print(f"warning: {warning}", file=sys.stderr)  # one line each, never wrapped
    if args.dry_run:
        if log:
            write_launch_log(log, launch_log_text(doc, code, written, command, "dry run: not started", training_lines))
        sys.stdout.write(shell_text(command))
        return 0
    if log:
        write_launch_log(log, launch_log_text(doc, code, written, command,
                                              f"GO: start {command.argv[0]} (the launcher, pid {os.getpid()}, stays "
                                              "its parent)", training_lines))
        err.print(f"launch log {log}")
    sys.stdout.flush()
    sys.stderr.flush()
    from .. import signals
    from ..launch.local import run_torchrun
    signals.release()  # end what the preflight left running; torchrun gets neither our cookie nor handlers
    env = {k: v for k, v in command.env.items() if k != signals.COOKIE_VAR}
    watch, added = _stall_watch(args, doc, log, written, env, profile)
    try:
        # the launcher stays torchrun's parent: a SIGINT/SIGTERM is forwarded to torchrun's process group and the
        # launch exits 2 once torchrun stopped (as every command does when interrupted); else torchrun's own code
        return run_torchrun(command.argv, {**env, **added}, stop_grace=args.stop_grace, watch=watch)
    except OSError as exc:
        from ..cli import UsageError

        raise UsageError(f"cannot start torchrun {command.argv[0]!r}: {exc.strerror or exc}") from None


def _stall_watch(args, doc: dict, log, written: list, env: dict, profile):
    """Plain launch's stall watch (docs/stall-watch.md) and the variables it adds to torchrun's environment; the
    launch log says how it watches."""
    from ..launch.gate import write_launch_log
    from ..stall import StallOptions
    from ..stall.local import for_launch

    watch, added = for_launch(StallOptions(args.stall_after, args.on_stall), doc=doc, launch_log=log, written=written,
                              reports_dir=args.reports_dir, env=env, stop_grace=args.stop_grace, node_rank=profile.node_rank,
                              master=(profile.master_addr, int(profile.master_port), int(profile.nnodes)))
    if log and watch is not None:
        write_launch_log(log, f"# stall watch: --stall-after {args.stall_after:g} --on-stall={args.on_stall}"
                         + "".join(f"; {k}={v}" for k, v in added.items()) + "\n")
    return watch, added
