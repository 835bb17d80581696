"""`dsv3-preflight report`: re-render one result document as HTML, or merge several into one report."""
from __future__ import annotations

NAME = "report"
HELP = "render result documents (JSON) as one self-contained HTML report; several are merged"


def add_arguments(parser) -> None:
    parser.add_argument("documents", nargs="+", metavar="RESULTS.json",
                        help="result documents written by `run --json`, `run` (./preflight-reports/) or pytest")
    parser.add_argument("-o", "--output", required=True, metavar="OUT.html", help="where to write the HTML report")
    parser.add_argument("--json", dest="json_path", metavar="PATH",
                        help="also write the (merged) result document here")


def run(args) -> int:
    from ..cli import UsageError
    from ..document import DocumentError, read_document, write_document
    from ..reports import write_html
    from ..reports.merge import merge_documents

    docs = []
    for path in args.documents:
        doc = read_document(path)  # DocumentError: exit 4 with the file named
        problem = _problem(doc)
        if problem:
            raise DocumentError(f"{path}: not a valid result document: {problem}")
        docs.append((path, doc))
    for flag, target in (("-o", args.output), ("--json", args.json_path)):
        if target and any(_same_file(p, target) for p, _ in docs):
            raise UsageError(f"{flag} {target} would overwrite an input document")
    merged = merge_documents(docs, command=list(args.argv))
    try:
        if args.json_path:
            print(f"wrote {write_document(merged, args.json_path)}")
        out = write_html(merged, args.output)
    except OSError as exc:  # a directory, a read-only place: the user's to fix, not a bug
        raise UsageError(f"cannot write the report: {exc.strerror or exc}: {exc.filename or args.output}") from None
    counts = merged["counts"]
    parts = ", ".join(f"{counts[s]} {s}" for s in ("fail", "error", "warn", "pass", "skip") if counts.get(s))
    what = f"merged {len(docs)} documents" if len(docs) > 1 else "rendered 1 document"
    print(f"{merged['verdict']}: {parts or 'nothing ran'} ({what})")
    print(f"wrote {out}")
    return 0


def _same_file(a: str, b: str) -> bool:
    """Whether two spellings name one file (./x.json, a symlink, a relative and an absolute path)."""
    import os

    try:
        return os.path.samefile(a, b)
    except OSError:  # b does not exist yet
        return os.path.realpath(a) == os.path.realpath(b)


def _problem(doc) -> str | None:
    """The first way doc breaks the result schema, or None (full JSON Schema when jsonschema is installed)."""
    try:
        import jsonschema
    except ImportError:  # a runtime install without the test extras: check what the renderer relies on
        for key in ("results", "nodes", "counts", "verdict", "profile"):
            if key not in doc:
                return f"{key!r} is missing"
        if not isinstance(doc["results"], list) or not all(
                isinstance(r, dict) and {"name", "node", "status", "summary"} <= r.keys()
                and r["status"] in ("pass", "warn", "fail", "skip", "error") for r in doc["results"]):
            return "'results' is not a list of results with name, node, status and summary"
        if not isinstance(doc["nodes"], list) or not all(isinstance(n, dict) and "node" in n for n in doc["nodes"]):
            return "'nodes' is not a list of nodes"
        return None
    from ..document import load_schema

    errors = sorted(jsonschema.Draft202012Validator(load_schema()).iter_errors(doc), key=lambda e: list(e.absolute_path))
    if not errors:
        return None
    where = "/".join(str(p) for p in errors[0].absolute_path) or "top level"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"at {where}: {errors[0].message}{more}"
