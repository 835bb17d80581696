"""Two runs at once on one node (two people, or a run and a cron job): each gets its own correct verdict and its
own report files; where they cannot share the rendezvous port, the second waits for it and says whose it was,
naming the first run's PID, instead of blaming "a leftover process"."""
from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
import threading

import pytest
from conftest import python_cli
from harness_env import env_without
from ports import free_port

from dsv3_preflight import portclaim
from dsv3_preflight.facts import FactBusy, FactStore
from dsv3_preflight.profile import resolve_profile
from dsv3_preflight.registry import Registry, probe


@pytest.mark.slow
def test_five_rounds_of_two_concurrent_runs_are_all_green_with_their_own_files(tmp_path):
    env = env_without(("MASTER_", "NCCL_", "GLOO_", "DSV3_PREFLIGHT"), ())
    env["MASTER_PORT"] = str(free_port())  # both runs share it, as two runs of one job on one node do
    reports = tmp_path / "reports"
    seen_files: set[str] = set()
    for round_no in range(5):
        procs = [subprocess.Popen(python_cli("run", "--profile", "cpu", "--no-color", "-q", "--reports-dir", str(reports)),
                                  env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for _ in range(2)]
        outs = [p.communicate(timeout=180) for p in procs]
        for proc, (out, err) in zip(procs, outs):
            assert proc.returncode == 0, f"round {round_no}, pid {proc.pid}: {out[-3000:]}{err[-2000:]}"
            written = re.findall(r"^wrote (\S+)$", out, re.M)
            assert len(written) == 2 and not seen_files & set(written), (round_no, written)
            seen_files |= set(written)
            doc = json.loads(open(next(w for w in written if w.endswith(".json"))).read())
            assert doc["verdict"] == "GO", doc["counts"]
            other = next(p for p in procs if p is not proc).pid
            for fact, said in (doc["nodes"][0].get("fact_waits") or {}).items():
                assert f"another dsv3-preflight run, pid {other} " in said, (fact, said)
    assert len(seen_files) == 20 and len(list(reports.iterdir())) == 20


HOLD = textwrap.dedent("""
    import sys, time
    from dsv3_preflight import portclaim
    held = portclaim.claim(int(sys.argv[1]), wait_s=0)
    print("held", flush=True)
    sys.stdin.read()
""")


def test_a_port_held_by_another_run_past_the_probes_timeout_is_said_with_its_pid_never_judged(clean_env):
    port = free_port()
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(port)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        touched = []

        @probe("bind_test", needs=["profile"], timeout=0.5, claims=["master_port"])
        def bind_test(profile):
            touched.append(profile.master_port)
            return {}

        registry = Registry()
        registry.add_probe(bind_test, "test")
        profile = resolve_profile(profile_name="cpu", cli={"master_port": port}, environ={})
        store = FactStore(registry, {"profile": profile})
        with pytest.raises(FactBusy) as info:
            store.get("bind_test")
        assert f"port {port} is in use by another dsv3-preflight run, pid {holder.pid}" in str(info.value)
        assert touched == []  # the probe never ran: it did not see (or fight over) the other run's listener
    finally:
        holder.stdin.close()
        holder.wait(10)
    assert portclaim.holder(port) is None  # the kernel freed the claim with its holder


def test_a_claim_held_by_a_socket_of_this_process_is_never_named_as_another_run():
    """When the claim's address is still held by a socket this process made (outside its own bookkeeping, as a
    child's inherited copy would be), the claim waits for it like any holder but names nobody."""
    from dsv3_preflight import portclaim

    port = free_port()
    copy = portclaim.try_claim(port)   # bound by this process, unknown to claim()'s shared claims
    assert copy is not None
    releaser = threading.Timer(0.3, copy.close)
    releaser.start()
    try:
        got = portclaim.claim(port, wait_s=5)
    finally:
        releaser.join()
    try:
        assert got.waited_s >= 0.2 and got.waited_for is None, (got.waited_s, got.waited_for)
    finally:
        got.release()
