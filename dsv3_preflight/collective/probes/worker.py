"""One rank of the collective probe, run as a child process: ``python -m dsv3_preflight.collective.probes.worker``.

The parent (:func:`dsv3_preflight.collective.probe_node`) owns this process: it passes the rank and
rendezvous on the command line, reads the JSON lines this process appends to ``--status`` (one per
phase reached, then an ``error`` or a ``result``), and kills it by PID when the deadline passes.
stdout/stderr (NCCL_DEBUG output included) go to a log file the parent keeps.

Phases, in order: started → imported → store_connected → all_joined → pg_up → first_collective →
steady_state → [sweep_done] → done. The sum check: rank r contributes r+1 in every element, so every
element of the result is exactly world·(world+1)/2.
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time
from collections.abc import Callable
from typing import Any

KEY_PREFIX = "dsv3pf"
STEADY_ITERS = 5
SUM_ELEMENTS = 1024


class _Status:
    def __init__(self, path: str, t0: float) -> None:
        self.path, self.t0 = path, t0
        self.phase = None

    def write(self, event: dict) -> None:
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(event) + "\n")
            fh.flush()
            os.fsync(fh.fileno())

    def reached(self, phase: str, **extra) -> None:
        self.phase = phase
        self.write({"event": "phase", "phase": phase, "t": round(time.time() - self.t0, 6), "wall": time.time(), **extra})


def _remaining(deadline: float, floor: float = 0.5) -> float:
    return max(deadline - time.time(), floor)


def _pci_bus_id(torch, device) -> str | None:
    try:
        props = torch.cuda.get_device_properties(device)
        domain = getattr(props, "pci_domain_id", 0)
        return f"{domain:08X}:{props.pci_bus_id:02X}:{props.pci_device_id:02X}.0"
    except Exception:  # noqa: BLE001 - an older torch without the fields
        return None


def _wait_all_joined(store, world: int, rank: int, deadline: float, status: _Status) -> list[int]:
    """Wait until every rank has registered in the store; return the ranks that never did (empty on success)."""
    count_key = f"{KEY_PREFIX}/joined_count"
    while True:
        n = store.add(count_key, 0)
        if n >= world:
            return []
        if time.time() >= deadline:
            break
        time.sleep(0.05)
    missing = [r for r in range(world) if not store.check([f"{KEY_PREFIX}/joined/{r}"])]
    return missing


def _sweep(torch, dist, device, world: int, sizes: list[int], iters: int, warmup: int,
           until: Callable[[], float] | None = None, status: _Status | None = None) -> list[dict]:
    """nccl-tests' all_reduce_perf, in torch: time per op averaged over iterations then over ranks
    (``time_us``, ``algbw_gbps``, ``busbw_gbps``), and the same from each rank's median iteration
    (``time_p50_us``, ``busbw_p50_gbps``: robust to a preempted iteration on a busy host).

    ``until`` (epoch seconds, read before each op) bounds the sweep by time: after every op the ranks agree
    (a one-element MIN all_reduce, not timed) whether the next op still fits before it, and stop together
    when it does not. A row then holds the iterations done (``time_limited``), or, when not one timed
    iteration fitted, the warm-up ops (``from_warmup``). Each op done is also written to ``status`` as a
    ``sweep_progress`` event, so the bytes moved before a rank is stopped in the middle of an op are kept."""
    rows = []
    for nbytes in sizes:
        count = max(nbytes // 4, 1)
        size = count * 4
        buf = torch.ones(count, dtype=torch.float32, device=device)
        flag = torch.ones(1, dtype=torch.float32, device=device)
        done = {"ops": 0, "seconds": 0.0}
        limited = False
        if status is not None and until is not None:
            status.write({"event": "sweep_progress", "size_bytes": size, "ops": 0, "seconds": 0.0, "wall": time.time()})

        def op(buf: Any = buf, done: dict[str, Any] = done, size: int = size) -> float:
            start = time.perf_counter()
            dist.all_reduce(buf)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            took = time.perf_counter() - start
            done["ops"] += 1
            done["seconds"] += took
            if status is not None and until is not None:
                status.write({"event": "sweep_progress", "size_bytes": size, "ops": done["ops"],
                              "seconds": round(done["seconds"], 6), "wall": time.time()})
            return took

        def fits(last: float, flag: Any = flag) -> bool:
            """Do all ranks have time for one more op like the last one? (the same answer on every rank)"""
            if until is None:
                return True
            flag.fill_(1.0 if time.time() + 1.5 * last < until() else 0.0)
            dist.all_reduce(flag, op=dist.ReduceOp.MIN)
            return bool(flag.item() > 0.5)

        warm = []
        for _ in range(warmup):
            warm.append(op())
            if not fits(warm[-1]):
                limited = True
                break
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        dist.barrier()
        times = []
        if not limited:
            for _ in range(max(iters, 1)):
                times.append(op())
                if len(times) < max(iters, 1) and not fits(times[-1]):
                    limited = True
                    break
        from_warmup = not times
        times = sorted(times or warm)
        if not times:
            continue
        t = torch.tensor([sum(times) / len(times), times[len(times) // 2], times[0]], dtype=torch.float64, device=device)
        dist.all_reduce(t)
        avg, p50, best = (float(v) / world for v in t.tolist())
        factor = 2 * (world - 1) / world
        algbw = size / avg / 1e9
        row = {"size_bytes": size, "count": count, "iters": len(times), "time_us": round(avg * 1e6, 3),
               "algbw_gbps": round(algbw, 6), "busbw_gbps": round(algbw * factor, 6),
               "time_p50_us": round(p50 * 1e6, 3), "busbw_p50_gbps": round(size / p50 / 1e9 * factor, 6),
               "time_min_us": round(best * 1e6, 3), "busbw_best_gbps": round(size / best / 1e9 * factor, 6)}
        if limited:
            row.update(time_limited=True, from_warmup=from_warmup, iters_asked=max(iters, 1))
        rows.append(row)
        if limited:
            break   # no time left for the larger sizes
    return rows


MESH_CONNECT_S = 3.0


def _ephemeral_range(path: str = "/proc/sys/net/ipv4/ip_local_port_range") -> list[int] | None:
    try:
        with open(path, encoding="ascii") as fh:
            lo, hi = (int(v) for v in fh.read().split()[:2])
        return [lo, hi]
    except (OSError, ValueError):
        return None


def _ifname_of(address: str) -> str | None:
    try:
        import psutil

        return next((name for name, entries in psutil.net_if_addrs().items()
                     if any(e.address.split("%")[0] == address for e in entries)), None)
    except Exception:  # noqa: BLE001 - the interface name only words the fix
        return None


def _mesh_listen(master_addr: str, master_port: int, rank: int, host: str):
    """A TCP listener on an ephemeral port of the address this node uses toward the store (where Gloo and NCCL
    listen for their peers), accepting and closing; returns (socket, its record for the store)."""
    import threading

    probe = socket.socket(socket.AF_INET6 if ":" in master_addr else socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect((master_addr, master_port))
        local = probe.getsockname()[0]
    finally:
        probe.close()
    srv = socket.socket(socket.AF_INET6 if ":" in local else socket.AF_INET, socket.SOCK_STREAM)
    srv.bind((local, 0))
    srv.listen(64)

    def accept() -> None:
        while True:
            try:
                conn, _ = srv.accept()
                conn.close()
            except OSError:
                return

    threading.Thread(target=accept, name="mesh-listener", daemon=True).start()
    return srv, {"rank": rank, "host": host, "addr": local, "port": srv.getsockname()[1],
                 "ifname": _ifname_of(local), "ephemeral_range": _ephemeral_range()}


def _mesh_connect(peers: list[dict], timeout: float) -> list[dict]:
    """A TCP connect to each peer's listener at once (threads), each under ``timeout``: ok, refused or timeout."""
    import threading

    out: list[dict] = [dict() for _ in peers]

    def one(i: int, peer: dict) -> None:
        from dsv3_preflight.net.probes.tcp import connect

        out[i] = {"to_rank": peer["rank"], "addr": peer["addr"], **connect(peer["addr"], int(peer["port"]), timeout)}

    threads = [threading.Thread(target=one, args=(i, p), daemon=True) for i, p in enumerate(peers)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout + 1.0)
    return [o for o in out if o]


def _start_watchdog(at: Callable[[], float], status: _Status, owned_dir: str | None = None,
                    parent: int | None = None) -> None:
    """Past ``at()`` (a call that ignores its timeout, like Gloo's full-mesh connect): report the phase and exit.
    ``at`` is read on every tick: the start-up allowance moves the deadline once torch is imported.

    Also when the parent that owns this rank dies without ending it (SIGKILLed: a Ray task cancelled by force,
    an OOM kill): then nobody will read this rank's files, so it removes ``owned_dir`` (the temp dir the parent
    made for the run) and exits, leaving nothing behind."""
    import shutil
    import threading

    parent = parent or os.getppid()   # the pid the parent passed: it may be dead already when this runs

    def fire() -> None:
        while time.time() < at():
            if os.getppid() != parent:
                if owned_dir:
                    shutil.rmtree(owned_dir, ignore_errors=True)
                os._exit(4)
            time.sleep(min(0.2, max(at() - time.time(), 0.0)))
        try:
            status.write({"event": "error", "phase": status.phase, "exc_type": "DeadlineExceeded",
                          "message": f"no progress past phase {status.phase!r} before the deadline (watchdog)",
                          "t": round(time.time() - status.t0, 6)})
            print(f"[dsv3-preflight worker] deadline passed in phase {status.phase!r}; exiting", file=sys.stderr, flush=True)
        finally:
            os._exit(3)

    threading.Thread(target=fire, name="deadline-watchdog", daemon=True).start()


def main(argv: list[str] | None = None) -> int:
    t0 = time.time()
    parser = argparse.ArgumentParser(prog="dsv3_preflight.collective.probes.worker")
    parser.add_argument("--rank", type=int, required=True)
    parser.add_argument("--local-rank", type=int, required=True)
    parser.add_argument("--world-size", type=int, required=True)
    parser.add_argument("--master-addr", required=True)
    parser.add_argument("--master-port", type=int, required=True)
    parser.add_argument("--backend", choices=("gloo", "nccl"), default="gloo")
    parser.add_argument("--deadline", type=float, required=True, help="epoch seconds by which to give up")
    parser.add_argument("--status", required=True)
    parser.add_argument("--watchdog-s", type=float, default=0.5, help="seconds past --deadline before the watchdog exits")
    parser.add_argument("--startup-s", type=float, default=0.0,
                        help="start-up allowance: the seconds from --spawned until torch is imported, up to this, "
                             "move --deadline on")
    parser.add_argument("--spawned", type=float, default=None, help="epoch seconds at which the parent started the rank")
    parser.add_argument("--parent-pid", type=int, default=None, help="the process that owns this rank")
    parser.add_argument("--owned-dir", default=None,
                        help="the parent's temp dir for this run: removed by this rank if the parent dies first")
    parser.add_argument("--host-store", action="store_true", help="this rank hosts the TCPStore (rank 0)")
    parser.add_argument("--sweep-sizes", default="",
                        help="comma-separated message sizes in bytes (empty: no sweep); rank 0's choice holds for all")
    parser.add_argument("--sweep-iters", type=int, default=20)
    parser.add_argument("--sweep-warmup", type=int, default=5)
    parser.add_argument("--sweep-reserve-s", type=float, default=None,
                        help="bound the sweep by time: it ends this many seconds before --deadline (the ranks agree "
                             "after each op whether the next one fits), keeping the iterations done")
    parser.add_argument("--steady-iters", type=int, default=STEADY_ITERS,
                        help="small-message all_reduces timed after the first (their p50 is the latency)")
    parser.add_argument("--device-index", type=int, default=None, help="CUDA device (default: local rank)")
    args = parser.parse_args(argv)
    status = _Status(args.status, t0)
    host = socket.gethostname()
    status.reached("started", pid=os.getpid(), ppid=os.getppid(), host=host)
    if args.spawned is None:  # no start-up allowance without the spawn time to count it from
        args.startup_s = 0.0
    # until torch is imported the latest deadline holds (the whole allowance); _run then takes back what start-up
    # did not use. args.deadline is the one deadline: the watchdog reads it on every tick
    args.deadline += args.startup_s
    _start_watchdog(lambda: args.deadline + args.watchdog_s, status, args.owned_dir, args.parent_pid)
    try:
        return _run(args, status, host)
    except BaseException as exc:  # noqa: BLE001 - every failure is reported to the parent as data
        status.write({"event": "error", "phase": status.phase, "exc_type": type(exc).__name__,
                      "message": str(exc)[:4000], "t": round(time.time() - t0, 6)})
        print(f"[dsv3-preflight worker rank {args.rank}] {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        return 1


def _mesh_check(store, world: int, rank: int, mine: dict, deadline: float, status: _Status) -> None:
    """Connect to the other nodes' listeners, publish what happened, and gather what the others saw (bounded): the
    ``mesh`` event holds every node's listener and every connect result this rank learned."""
    peers = []
    for r in range(world):
        if r != rank and store.check([f"{KEY_PREFIX}/mesh/{r}"]):
            peer = json.loads(store.get(f"{KEY_PREFIX}/mesh/{r}"))
            if peer.get("addr") and peer.get("addr") != mine.get("addr"):
                peers.append(peer)
    timeout = max(min(MESH_CONNECT_S, (deadline - time.time()) / 4), 0.2)
    reach = _mesh_connect(peers, timeout) if mine.get("addr") else []
    for row in reach:
        row["from_rank"] = rank
    store.set(f"{KEY_PREFIX}/mesh_reach/{rank}", json.dumps(reach))
    listeners, seen = {str(rank): mine}, {str(rank): reach}
    wait_until = time.time() + timeout + 1.0
    others = [p["rank"] for p in peers]
    while True:
        for r in others:
            if str(r) not in seen and store.check([f"{KEY_PREFIX}/mesh_reach/{r}"]):
                seen[str(r)] = json.loads(store.get(f"{KEY_PREFIX}/mesh_reach/{r}"))
        if len(seen) > len(others) or time.time() >= wait_until:
            break
        time.sleep(0.05)
    for p in peers:
        listeners[str(p["rank"])] = p
    status.write({"event": "mesh", "listeners": listeners, "reach": [row for rows in seen.values() for row in rows],
                  "t": round(time.time() - status.t0, 6)})


def _run(args, status: _Status, host: str) -> int:
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    rank, world = args.rank, args.world_size
    if args.backend == "nccl":
        index = args.local_rank if args.device_index is None else args.device_index
        torch.cuda.set_device(index)
        device = torch.device("cuda", index)
        pci = _pci_bus_id(torch, device)
    else:
        device, pci = torch.device("cpu"), None
    credit = 0.0
    if args.startup_s > 0:  # the start-up so far is not the network's time; the rest of the allowance is given back
        credit = min(max(time.time() - args.spawned, 0.0), args.startup_s)
        args.deadline -= args.startup_s - credit
    status.reached("imported", torch=torch.__version__, device=str(device), pci_bus_id=pci,
                   startup_credit_s=round(credit, 3))

    store = dist.TCPStore(args.master_addr, args.master_port, world, args.host_store,
                          timeout=timedelta(seconds=_remaining(args.deadline)), wait_for_workers=False)
    if args.host_store:  # rank 0 decides for everyone whether the sweep runs, and with which sizes
        store.set(f"{KEY_PREFIX}/sweep_sizes", args.sweep_sizes or "-")
    me = {"rank": rank, "host": host, "pid": os.getpid(), "pci_bus_id": pci, "device": str(device)}
    # across nodes, each node's first rank listens on an ephemeral port (where Gloo and NCCL listen for their peers)
    # and, once all joined, connects to the other nodes' listeners: who refuses whom, before the process group hangs
    mesh, mesh_listener = None, None
    if world > int(os.environ.get("LOCAL_WORLD_SIZE") or 1) and args.local_rank == 0:
        try:
            mesh_listener, mesh = _mesh_listen(args.master_addr, args.master_port, rank, host)
        except OSError as exc:
            mesh = {"rank": rank, "host": host, "error": str(exc)}
        store.set(f"{KEY_PREFIX}/mesh/{rank}", json.dumps(mesh))
    store.set(f"{KEY_PREFIX}/joined/{rank}", json.dumps(me))
    store.add(f"{KEY_PREFIX}/joined_count", 1)
    status.reached("store_connected")

    missing = _wait_all_joined(store, world, rank, args.deadline, status)
    if missing:
        status.write({"event": "rendezvous_missing", "missing": missing})
        raise TimeoutError(f"rendezvous: ranks {missing} never joined the store at {args.master_addr}:{args.master_port} "
                           f"(world {world}) before the deadline")
    rank_map = {}
    if rank == 0:
        for r in range(world):
            rank_map[str(r)] = json.loads(store.get(f"{KEY_PREFIX}/joined/{r}"))
    status.reached("all_joined", rank_map=rank_map)
    if mesh is not None:
        _mesh_check(store, world, rank, mesh, args.deadline, status)

    pg_store = dist.PrefixStore(f"{KEY_PREFIX}/pg", store)
    dist.init_process_group(args.backend, store=pg_store, rank=rank, world_size=world,
                            timeout=timedelta(seconds=_remaining(args.deadline, 1.0)),
                            **({"device_id": device} if args.backend == "nccl" else {}))
    status.reached("pg_up")
    if mesh_listener is not None:   # every rank is past its mesh check: the process group needed them all
        mesh_listener.close()

    expected = world * (world + 1) / 2
    t = time.perf_counter()
    x = torch.full((SUM_ELEMENTS,), float(rank + 1), dtype=torch.float32, device=device)
    dist.all_reduce(x)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    first_s = time.perf_counter() - t
    got = x.cpu()
    sum_ok = bool(torch.all(got == expected).item())
    status.reached("first_collective", first_collective_s=round(first_s, 6), expected_sum=expected,
                   got_sum=float(got[0].item()), got_min=float(got.min().item()), got_max=float(got.max().item()),
                   sum_ok=sum_ok)

    times = []
    for _ in range(max(args.steady_iters, 1)):
        x.fill_(float(rank + 1))
        t = time.perf_counter()
        dist.all_reduce(x)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        times.append(time.perf_counter() - t)
        sum_ok = sum_ok and bool(torch.all(x == expected).item())
    times.sort()
    status.reached("steady_state", steady_s=round(times[len(times) // 2], 6), steady_min_s=round(times[0], 6),
                   steady_max_s=round(times[-1], 6), steady_iters=len(times), steady_bytes=SUM_ELEMENTS * 4, sum_ok=sum_ok)

    agreed = store.get(f"{KEY_PREFIX}/sweep_sizes").decode()
    if agreed != "-":
        sizes = [int(s) for s in agreed.split(",") if s.strip()]
        until = None if args.sweep_reserve_s is None else (lambda: args.deadline - args.sweep_reserve_s)
        rows = _sweep(torch, dist, device, world, sizes, args.sweep_iters, args.sweep_warmup, until, status)
        status.reached("sweep_done", sweep=rows)

    dist.barrier()
    dist.destroy_process_group()
    status.reached("done", sum_ok=sum_ok)
    return 0 if sum_ok else 2


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # the status file is written and synced: skip the interpreter's teardown of torch and Gloo's threads (seconds on
    # a busy host, which the parent would wait for before it can report)
    os._exit(code)
