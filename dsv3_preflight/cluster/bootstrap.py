"""The Ray task body, shipped by value so that a node without dsv3-preflight can say so.

A function defined in an importable module is pickled by reference, and a node lacking the package
would fail to unpickle it with an opaque error. This one is compiled from source in a module that
does not exist anywhere, so cloudpickle ships its code; on the node it tries to import the package
and returns ``{"ok": False, "package_missing": True, ...}`` when it cannot.

Before anything else it says who the node is (``$DSV3_PREFLIGHT_NODE_NAME``, host name, pid) under
``payload["hello_key"]`` in Ray's GCS key-value store: a node that dies before it answers is still
reported under its own name (:func:`dsv3_preflight.cluster.dispatch.hellos` reads them, then deletes them).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

TASK_NAME = "dsv3_preflight_node_task"
#: Ray GCS key-value namespace of the nodes' hellos (deleted at the end of each run)
HELLO_NAMESPACE = "dsv3-preflight"
_SOURCE = '''
def dsv3_preflight_node_task(payload):
    import os, socket, sys
    if payload.get("hello_key"):
        try:
            import json
            from ray.experimental import internal_kv
            internal_kv._internal_kv_put(payload["hello_key"], json.dumps({
                "node_name": os.environ.get("DSV3_PREFLIGHT_NODE_NAME") or socket.gethostname(),
                "hostname": socket.gethostname(), "pid": os.getpid()}), overwrite=True, namespace=HELLO_NAMESPACE)
        except Exception:
            pass
    try:
        from dsv3_preflight.cluster.node_side import run_node
    except BaseException as exc:
        return {
            "ok": False,
            "package_missing": True,
            "error": type(exc).__name__ + ": " + str(exc),
            "node_name": os.environ.get("DSV3_PREFLIGHT_NODE_NAME") or socket.gethostname(),
            "hostname": socket.gethostname(),
            "python": sys.executable,
            "pid": os.getpid(),
        }
    return run_node(payload)
'''


def make_task() -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A fresh function object whose module is not importable, so it is pickled by value."""
    namespace: dict[str, Any] = {"__name__": "dsv3_preflight_bootstrap_unimportable", "HELLO_NAMESPACE": HELLO_NAMESPACE}
    exec(compile(_SOURCE, "<dsv3-preflight node task>", "exec"), namespace)  # noqa: S102 - our own constant source
    return namespace[TASK_NAME]
