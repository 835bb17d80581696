"""Evidence that is more than one line: NCCL_DEBUG=INFO facts per node, and NCCL RAS reports (text and JSON).

``NcclFacts`` collects, per node, what NCCL's INFO lines say it chose and runs on: the NCCL version, the CUDA
driver version, the bootstrap interface, the network (IB, Socket, a plugin) and whether a net plugin was loaded.
Values that differ between nodes are drift (``drift_findings``): NCCL refuses mismatched versions or hangs on
them, and a node without the IB plugin falls back to sockets while its peers wait on InfiniBand.

``CollectiveTrail`` keeps the last collective each rank logged entering under TORCH_DISTRIBUTED_DEBUG=DETAIL
(``CollectiveFingerPrint(SequenceNumber=N, OpType=...)``): ranks left at different sequence numbers are out of step.

``RasText`` follows the sections of ``ncclras`` output (NCCL src/ras/client_support.cc): the DEAD and
INCOMPLETE sections name processes that do not answer, ``#i-j (hash) INCOMPLETE/ERROR/MISMATCH`` blocks name the
ranks, ``Rank N -- GPU g managed by process p on node h``. ``ras_json`` reads the JSON form (``ncclras -f json``):
``missing_ranks`` with ``unresponsive``/``considered_dead`` and ranks with a non-zero ``async_error``.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

FACT_NEEDLES: tuple[bytes, ...] = (b"NCCL version", b"cudaDriverVersion", b"Bootstrap", b"Using network", b"NET/Plugin",
                                   b"Plugin Path", b"Init COMPLETE", b"NET/IB : Using", b"Using internal net", b" nranks ",
                                   b"CollectiveFingerPrint")
RAS_NEEDLES: tuple[bytes, ...] = (b"considered dead", b"Missing communicator data", b"managed by process", b"on node ",
                                  b") MISMATCH", b") ERROR", b") INCOMPLETE", b"launched up to operation",
                                  b"Communicator ranks have different", b"process information not found")

_VERSION = re.compile(r"NCCL version (?P<v>\d+\.\d+\.\d+)(?:[\w.-]*\+cuda(?P<cuda>\d+\.\d+))?(?! compiled)")
_DRIVER = re.compile(r"cudaDriverVersion (?P<v>\d+)")
_BOOTSTRAP = re.compile(r"Bootstrap ?: Using (?:\[\d+\])?(?P<iface>[A-Za-z][\w.-]*):")
_NET = re.compile(r"Using network (?P<net>\S+)")
_PLUGIN_ON = re.compile(r"Loaded net plugin (?P<p>\S+)|Plugin Path ?: (?P<p2>\S*libnccl-net\S*)")
_PLUGIN_OFF = re.compile(r"No plugin found|Could not find: libnccl-net|Using internal net(?:work)? plugin")
_NRANKS = re.compile(r"rank (?P<rank>\d+) nranks (?P<nranks>\d+)(?:.*? busId (?P<bus>[0-9a-fA-F]+))?")


@dataclass
class NcclFacts:
    nodes: dict[str, dict[str, set]] = field(default_factory=dict)
    nranks: int | None = None          # from "Init COMPLETE" lines: the ranks of a communicator that came up
    world: int | None = None           # from any "rank N nranks M" line (Init START too): the ranks it was made for
    devices: dict[str, set[int]] = field(default_factory=dict)   # node → CUDA devices its NCCL lines name
    buses: dict[str, set[str]] = field(default_factory=dict)     # node → PCI bus ids of its ranks' GPUs (Init lines)
    evidence: dict[tuple[str, str, str], dict] = field(default_factory=dict)   # (key, node, value) → first line

    def observe(self, text: str, node: str | None, where: dict, device: int | None = None) -> None:
        if "NCCL INFO" not in text and "NCCL version" not in text:
            return
        m = _NRANKS.search(text)
        if m:
            self.world = max(self.world or 0, int(m.group("nranks")))
            if "Init COMPLETE" in text:
                self.nranks = max(self.nranks or 0, int(m.group("nranks")))
        if node is None:
            return
        if device is not None:
            self.devices.setdefault(node, set()).add(device)
        if m and m.group("bus"):   # one GPU per process (CUDA_VISIBLE_DEVICES) prints [0] everywhere: the bus tells
            self.buses.setdefault(node, set()).add(m.group("bus").lower())
        for key, rx, group in (("nccl_version", _VERSION, "v"), ("cuda_driver", _DRIVER, "v"),
                               ("bootstrap_iface", _BOOTSTRAP, "iface"), ("network", _NET, "net")):
            m = rx.search(text)
            if m:
                self._add(key, node, m.group(group), where)
        m = _PLUGIN_ON.search(text)
        if m:
            self._add("net_plugin", node, (m.group("p") or m.group("p2")).rsplit("/", 1)[-1], where)
        elif _PLUGIN_OFF.search(text):
            self._add("net_plugin", node, "none (internal)", where)

    def _add(self, key: str, node: str, value: str, where: dict) -> None:
        self.nodes.setdefault(node, {}).setdefault(key, set()).add(value)
        self.evidence.setdefault((key, node, value), where)

    def one_node(self) -> bool:
        """True when NCCL's own lines show the whole job on one node: one host, and as many GPUs on it (device
        indices, or PCI bus ids where each process sees one GPU as device 0) as the communicator has ranks: a
        single-node job, where loopback or a container bridge is the right interface."""
        hosts = set(self.nodes) | set(self.devices)
        if len(hosts) != 1 or not self.world:
            return False
        host = next(iter(hosts))
        return max(len(self.devices.get(host, ())), len(self.buses.get(host, ()))) >= self.world

    def to_dict(self) -> dict:
        return {"nodes": {n: {k: sorted(v) for k, v in facts.items()} for n, facts in sorted(self.nodes.items())},
                "nranks": self.nranks, "world": self.world}

    def drift(self) -> list[dict]:
        """One entry per fact whose values differ between nodes: {"key", "values": {value: [nodes]}, "evidence"}."""
        out = []
        for key in ("nccl_version", "cuda_driver", "net_plugin", "network"):
            per_node = {n: f[key] for n, f in self.nodes.items() if key in f}
            if len(per_node) < 2:
                continue
            if key == "net_plugin" and "none (internal)" in {v for vs in per_node.values() for v in vs}:
                # a node that loaded a plugin also logs the lookups that failed before it: keep its plugin only
                per_node = {n: ({v for v in vs if v != "none (internal)"} or vs) for n, vs in per_node.items()}
            values: dict[str, list[str]] = {}
            for n, vs in sorted(per_node.items()):
                for v in sorted(vs):
                    values.setdefault(v, []).append(n)
            if len(values) < 2:
                continue
            ev = [self.evidence[(key, nodes[0], v)] for v, nodes in values.items() if (key, nodes[0], v) in self.evidence]
            out.append({"key": key, "values": values, "evidence": ev})
        return out


# ------------------------------------------------------------------------------------ collective fingerprints
# TORCH_DISTRIBUTED_DEBUG=DETAIL wraps each process group in ProcessGroupWrapper, which logs every collective a rank
# enters (torch/csrc/distributed/c10d/ProcessGroupWrapper.cpp): "[Rank 1] Running collective:
# CollectiveFingerPrint(SequenceNumber=3, OpType=BROADCAST, TensorShape=[1], ...)". Torch 1.x lines carry no
# sequence number and are not compared.
_FINGERPRINT = re.compile(r"\[Rank (?P<rank>\d+)\] Running collective: CollectiveFingerPrint\(SequenceNumber=(?P<seq>\d+), "
                          r"OpType=(?P<op>\w+)(?:, TensorShape=\[(?P<shape>[^\]]*)\])?")


@dataclass
class CollectiveTrail:
    """The last collective each rank logged entering (TORCH_DISTRIBUTED_DEBUG=DETAIL fingerprints), so a log that
    stops with the ranks at different sequence numbers names the ranks that fell behind."""
    last: dict[int, dict] = field(default_factory=dict)

    def observe(self, text: str, fi: int, path: str, line: int, ts, node: str | None) -> None:
        """``fi``, ``path``, ``line``, ``ts``, ``node`` locate the line; they are kept with the rank's entry."""
        if "CollectiveFingerPrint" not in text:
            return
        m = _FINGERPRINT.search(text)
        if m:
            rank = int(m.group("rank"))
            op = m.group("op") + (f" [{m.group('shape')}]" if m.group("shape") is not None else "")
            self.last[rank] = {"rank": rank, "seq": int(m.group("seq")), "op": op, "text": text, "fi": fi,
                               "path": path, "line": line, "ts": ts, "node": node}

    def divergence(self) -> dict | None:
        """{"behind": ranks, "ahead": ranks, "seq_behind", "op_behind", "seq_ahead", "op_ahead"} when the ranks'
        last collectives differ in sequence number; None when they agree or fewer than two ranks logged one."""
        if len(self.last) < 2:
            return None
        seqs = {r: v["seq"] for r, v in self.last.items()}
        lo, hi = min(seqs.values()), max(seqs.values())
        if lo == hi:
            return None
        behind = sorted(r for r, q in seqs.items() if q == lo)
        ahead = sorted(r for r, q in seqs.items() if q == hi)
        return {"behind": behind, "ahead": ahead, "seq_behind": lo, "op_behind": self.last[behind[0]]["op"],
                "seq_ahead": hi, "op_ahead": self.last[ahead[0]]["op"],
                "where": [self.last[r] for r in behind[:3] + ahead[:1]]}


# ------------------------------------------------------------------------------------------------ RAS text
_SECTION = re.compile(r"#\d+-\d+ \((?P<hash>[0-9a-f]+)\) (?P<kind>INCOMPLETE|ERROR|MISMATCH)\b")
_DEAD = re.compile(r"(?P<n>\d+) job process(?:es are| is) considered dead")
_MISSING = re.compile(r"Missing communicator data from (?P<n>\d+) (?P<what>job process|rank)")
_PROCESS = re.compile(r"Process (?P<pid>\d+) on node (?P<node>\S+) managing GPUs? (?P<gpu>\S+)")
_RANK = re.compile(r"Rank (?P<rank>\d+)(?: reported (?P<err>.+?)| has status (?P<status>\S+))? -- "
                   r"(?:GPU (?P<gpu>\S+) managed by process (?P<pid>\d+) on node (?P<node>\S+)|\[process information not found\])")
_DIFFERENT = re.compile(r"Communicator ranks have different (?P<what>.+)")
_LAUNCHED = re.compile(r"(?P<n>\d+) ranks have launched up to operation (?P<op>\d+)")
_PREFIX = re.compile(r"^(?:\S+:\d+:\d+ \[\d+\] |\[[^\]]*\]:?|\d+: )*\s*")


@dataclass
class RasText:
    """State machine over the needle lines of one file holding ``ncclras`` text output."""
    section: str | None = None
    detail: list[str] = field(default_factory=list)
    dead: list[dict] = field(default_factory=list)
    missing: list[dict] = field(default_factory=list)
    mismatch: list[dict] = field(default_factory=list)
    errors: list[dict] = field(default_factory=list)
    mismatch_detail: list[str] = field(default_factory=list)

    def observe(self, text: str, where: dict) -> bool:
        """True when the line was RAS output."""
        t = _PREFIX.sub("", text)
        m = _SECTION.search(t)
        if m:
            self.section = m.group("kind")
            return True
        if _DEAD.search(t):
            self.section = "DEAD"
            return True
        m = _MISSING.search(t)
        if m:
            self.section = "INCOMPLETE" if m.group("what") == "job process" else self.section or "INCOMPLETE"
            return True
        m = _DIFFERENT.search(t) or _LAUNCHED.search(t)
        if m:
            self.mismatch_detail.append(t.strip())
            return True
        m = _PROCESS.search(t)
        if m and self.section in ("DEAD", "INCOMPLETE"):
            entry = {"pid": int(m.group("pid")), "node": m.group("node"), "gpu": m.group("gpu"), "rank": None, **where}
            (self.dead if self.section == "DEAD" else self.missing).append(entry)
            return True
        m = _RANK.search(t)
        if m and self.section:
            entry = {"rank": int(m.group("rank")), "node": m.group("node"), "pid": int(m.group("pid")) if m.group("pid") else None,
                     "gpu": m.group("gpu"), "error": m.group("err"), "status": m.group("status"), **where}
            {"INCOMPLETE": self.missing, "DEAD": self.dead, "MISMATCH": self.mismatch, "ERROR": self.errors}[self.section].append(entry)
            return True
        return False


def ras_json(data: object) -> dict | None:
    """Dead/unresponsive/erroring ranks from ``ncclras`` JSON output, or None when ``data`` is not that."""
    if not isinstance(data, dict) or "communicators" not in data or not isinstance(data["communicators"], list):
        return None
    out: dict = {"dead": [], "missing": [], "errors": [], "mismatch": [], "nccl_version": data.get("nccl_version")}
    for comm in data["communicators"]:
        if not isinstance(comm, dict):
            continue
        for r in comm.get("missing_ranks") or []:
            if not isinstance(r, dict):
                continue
            st = r.get("status") or {}
            entry = {"rank": r.get("rank"), "node": r.get("host"), "pid": r.get("pid"), "gpu": r.get("cuda_dev"),
                     "comm": comm.get("hash")}
            (out["dead"] if st.get("considered_dead") else out["missing"]).append(entry)
        ranks = [r for r in comm.get("ranks") or [] if isinstance(r, dict)]
        for r in ranks:
            st = r.get("status") or {}
            if st.get("async_error") or st.get("init_state"):
                out["errors"].append({"rank": r.get("rank"), "node": r.get("host"), "pid": r.get("pid"),
                                      "gpu": r.get("cuda_dev"), "error": f"async_error {st.get('async_error')}, "
                                                                        f"init_state {st.get('init_state')}"})
        counts = {}
        for r in ranks:
            cc = r.get("collective_counts")
            if isinstance(cc, dict):
                counts[r.get("rank")] = tuple(sorted(cc.items()))
        if len(set(counts.values())) > 1:
            tally: dict = {}
            for rank, c in counts.items():
                tally.setdefault(c, []).append(rank)
            majority = max(tally.values(), key=len)
            for rank_list in tally.values():
                if rank_list is not majority:
                    for rank in rank_list:
                        host = next((r.get("host") for r in ranks if r.get("rank") == rank), None)
                        out["mismatch"].append({"rank": rank, "node": host, "pid": None, "gpu": None})
    return out


def load_json_document(head: bytes, limit: int) -> object | None:
    """The JSON document in ``head`` (the first ``limit + 1`` bytes of an input) when the whole input is one JSON
    object (a RAS JSON dump), else None."""
    if len(head) > limit or head.lstrip()[:1] != b"{":
        return None
    try:
        return json.loads(head.decode("utf-8", "replace"))
    except ValueError:
        return None


@dataclass
class ElasticError:
    """A rank's error file as torchrun's ``@record`` writes it (``TORCHELASTIC_ERROR_FILE``, ``error.json``)."""
    text: str                  # the lines the rank would have printed: its traceback, else the message
    timestamp: int | None      # seconds since the epoch, when the file gives one


def elastic_error(doc: object) -> ElasticError | None:
    """The error file of a rank under ``torch.distributed.elastic.multiprocessing.errors.record``, decoded.

    Two shapes, read as torchrun's own ``ProcessFailure._get_error_data`` reads them: ``{"message": {"message":
    "RuntimeError: ...", "extraInfo": {"py_callstack": "Traceback ...", "timestamp": "1764..."}}}`` (Python's
    ``ErrorHandler.record_exception``; torchrun may add ``"errorCode"``) and ``{"message": "...", "timestamp": N}``.
    The file is one JSON line whose escaped ``\\n`` hide the traceback's lines from a line reader; decoded, they are
    the lines the rank would have printed. Anything else (a RAS dump, another tool's JSON) is None."""
    if not isinstance(doc, dict) or set(doc) - {"message", "timestamp", "errorCode"}:
        return None
    msg = doc.get("message")
    if isinstance(msg, str):
        text, stamp = msg, doc.get("timestamp")
    elif isinstance(msg, dict) and isinstance(msg.get("message"), str) and isinstance(msg.get("extraInfo", {}), dict):
        extra = msg.get("extraInfo") or {}
        stack = extra.get("py_callstack")
        text = msg["message"]
        if isinstance(stack, str) and stack.strip():
            # traceback.format_exc() ends with the exception's own line(s), its type qualified by its module
            # ("torch.OutOfMemoryError: ..." for the message's "OutOfMemoryError: ..."); the message is kept only
            # when the traceback does not hold it
            detail = text.partition(": ")[2] or text
            text = stack if detail.strip() in stack else f"{stack.rstrip()}\n{text}"
        stamp = extra.get("timestamp")
    else:
        return None
    try:
        seconds = int(stamp) if stamp is not None else None
    except (TypeError, ValueError):
        seconds = None
    return ElasticError(text if text.endswith("\n") else text + "\n", seconds or None)
