"""`dsv3-preflight lint FILE.yaml`: judge a KubeRay RayJob or RayCluster manifest before it is submitted.

Runs the ``kuberay.*`` checks through the same run as `run` (``--kuberay-manifest FILE``, only ``kuberay.*``),
renders with the same renderers and exits with the same codes: 0 no FAIL (and no WARN under --strict), 1 a FAIL,
4 a file that is not a readable RayJob/RayCluster manifest.
"""
from __future__ import annotations

NAME = "lint"
HELP = "judge a KubeRay RayJob/RayCluster manifest (YAML, multi-document) before submitting it"


def add_arguments(parser) -> None:
    parser.add_argument("manifest", metavar="FILE.yaml", help="a RayJob or RayCluster manifest (apiVersion ray.io/v1)")
    out = parser.add_argument_group("output")
    out.add_argument("--json", dest="json_path", metavar="PATH", help="also write the result document here")
    out.add_argument("--html", dest="html_path", metavar="PATH", help="also write the HTML report here")
    out.add_argument("--junit", dest="junit_path", metavar="PATH", help="also write the results as JUnit XML")
    out.add_argument("--quiet", "-q", action="store_true", help="print only findings and the verdict")
    out.add_argument("--no-color", action="store_true", help="no colours in the console output")
    out.add_argument("--strict", action="store_true", help="a WARN counts as a failure (exit 1)")


def run(args) -> int:
    from ..console import make_console, render_document
    from ..kuberay.probes.manifest import read_manifest
    from ..preflight import RunOptions, UsageError, run_preflight
    from .run import write_outputs

    read_manifest(args.manifest)   # not a readable RayJob/RayCluster file: InputError, exit 4, before any check runs
    doc = run_preflight(RunOptions(profile_values={"kuberay_manifest": args.manifest}, only=("kuberay.*",),
                                   strict=args.strict, progress=False, no_color=args.no_color,
                                   command=tuple(getattr(args, "argv", ()) or ())))
    try:
        written = write_outputs(doc, json_path=args.json_path, html_path=args.html_path, no_report=True,
                                reports_dir=".", junit_path=args.junit_path)
    except OSError as exc:
        raise UsageError(f"cannot write the report: {exc}") from None
    console = make_console(args.no_color)
    render_document(doc, console, quiet=args.quiet)
    for path in written:
        console.print(f"wrote {path}", soft_wrap=True, markup=False, highlight=False)
    return int(doc["exit_code"])
