"""The stall watch's pure rules: progress lines per rank, the stall threshold, slow versus stuck, the culprit rules
(rank odd one out, blocked I/O, stuck link, node never joined), and the cause's fix pasting (paste_lint: bash -n
and no placeholder but ${NAME:?...})."""
from __future__ import annotations

import pytest
from paste_lint import paste_problems

from dsv3_preflight.stall import culprit, report, rule
from dsv3_preflight.stall.progress import Progress, classify
from dsv3_preflight.stall.watch import StallOptions, StallWatch

C10D = "/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py"


def frame(name: str, file: str, line: int = 0, native: bool = False) -> dict:
    return {"name": name, "file": file, "line": line, "native": native}


def rank(n: int, frames: list[dict], *, node: str = "n0", node_rank: int = 0, wchan: str = "futex_wait_queue",
         tcp: list[dict] | None = None) -> dict:
    return {"rank": n, "local_rank": n % 2, "node": node, "node_rank": node_rank, "pid": 1000 + n,
            "stacks": {"ok": True, "native": True, "error": None,
                       "threads": [{"tid": 1000 + n, "active": False, "frames": [*frames, frame("<module>", "train.py", 1)]}]},
            "wchan": {str(1000 + n): wchan}, "tcp": tcp or []}


def in_allreduce(n: int, **kw) -> dict:
    return rank(n, [frame("all_reduce", C10D, 2800), frame("wrapper", "/venv/lib/python3.11/site-packages/torch/distributed/c10d_logger.py", 81),
                    frame("step", "train.py", 30)], **kw)


def node(node_rank: int, name: str, ranks: list[dict], alive: bool = True) -> dict:
    return {"node": name, "node_rank": node_rank, "ranks": ranks, "torchrun_alive": alive}


@pytest.mark.parametrize("line,sig,setup,rank_", [
    ("[rank1]: step 3 loss=2.31", "train.loss", False, 1),
    ("{'loss': 2.31, 'learning_rate': 1e-05, 'epoch': 0.1}", "train.loss", False, None),
    ("h:1:2 [0] NCCL INFO comm 0x1 rank 0 nranks 2 cudaDev 0 busId 1000 - Init COMPLETE", "nccl.init_complete", True, None),
])
def test_progress_lines_use_the_doctors_signatures(line, sig, setup, rank_):
    found = classify(line)
    assert (found.sig, found.setup, found.rank) == (sig, setup, rank_)


def test_a_line_without_progress_is_none():
    assert classify("Loading checkpoint shards from /data/model") is None


def test_progress_tracks_the_longest_gap_between_steps_and_the_phase():
    p = Progress(started=0.0)
    p.observe("NCCL INFO Connected all rings", 5.0)
    assert (p.phase, p.quiet_since()) == ("setup", 5.0)
    for t in (10.0, 12.0, 20.0):
        p.observe("[rank0]: loss=1.5", t)
    assert (p.phase, p.steps, p.longest_gap, p.quiet_since()) == ("work", 3, 8.0, 20.0)
    assert p.per_rank == {"rank 0": 20.0}


@pytest.mark.parametrize("stall_after,gap,steps,expected", [(600, 0, 0, 600), (600, 300, 5, 900), (600, 300, 1, 600),
                                                            (10, 1, 5, 10)])
def test_threshold_is_stall_after_or_three_times_the_longest_gap(stall_after, gap, steps, expected):
    assert rule.threshold(stall_after, gap, steps) == expected


def test_a_rank_works_when_its_stack_changes_or_in_setup_when_its_cpu_advances():
    f, g = ("train.py:3 f",), ("train.py:4 g",)
    a = rule.RankSample(1.0, (f, f), 0.0)
    assert rule.working(a, rule.RankSample(2.0, (g, g), 2.0))
    assert rule.working(a, rule.RankSample(2.0, (f, g), 2.0))   # two dumps of one sample differ: it moves
    assert rule.working(a, rule.RankSample(1.0, (g, g), 2.0))   # moving with no CPU: I/O-bound work (a load)
    assert not rule.working(a, rule.RankSample(3.0, (f, f), 2.0))   # spinning in one place: waiting
    assert not rule.working(a, rule.RankSample(3.0, (f, (), f), 2.0))   # a failed dump is no change
    assert rule.working(a, rule.RankSample(3.0, (f, f), 2.0), setup=True)   # set-up: an import in one native call
    assert not rule.working(a, rule.RankSample(1.0, (f, f), 2.0), setup=True)
    assert rule.slow_not_stuck({"r0": [a, rule.RankSample(2.0, (g,), 2.0)], "r1": [a, a]}) == ["r0"]


def test_watch_suspects_after_stall_after_then_defers_when_a_rank_works():
    now = [0.0]
    watch = StallWatch(StallOptions(stall_after=10, sample_gap=0), clock=lambda: now[0])
    now[0] = 9.0
    assert not watch.due()
    now[0] = 10.0
    assert watch.due()
    samples = iter([{0: {0: (1.0, (("a",),), 0.0)}}, {0: {0: (2.0, (("b",),), 2.0)}}])
    assert watch.judge(lambda: next(samples), lambda: [], sleep=lambda s: None) is None
    assert not watch.due() and watch.slow[0]["working"] == ["node 0 rank 0"]
    now[0] = 20.0
    assert watch.due()
    watch.observe("[rank1]: step 1 loss=0.5")
    now[0] = 40.0
    # the ranks sampled as captured: both in the all_reduce, their stacks unchanged
    section = watch.judge(lambda: _stuck_sample(0.0), lambda: [node(0, "n0", [in_allreduce(0), in_allreduce(1)])],
                          sleep=lambda s: None)
    assert section["quiet_by_rank_s"] == {"rank 1": 20.0} and section["phase"] == "work"
    assert [c["id"] for c in section["causes"]] == ["stall.unresolved"] and not watch.due()   # reported once



def _stuck_sample(at: float) -> dict:
    return {0: {0: (1.0, (("wait",), ("wait",)), at), 1: (1.0, (("wait",),), at)}}


def test_a_progress_line_that_reaches_the_watch_while_it_samples_is_no_stall():
    # the driver reads the nodes' output between its looks: a step printed just before the suspicion reaches the
    # watch only through refresh, after the two samples; the run moved, whatever the samples show
    now = [10.0]
    watch = StallWatch(StallOptions(stall_after=10, sample_gap=0), clock=lambda: now[0])
    captured = []
    section = watch.judge(lambda: _stuck_sample(0.0), lambda: captured.append(1) or [], sleep=lambda s: None,
                          refresh=lambda: watch.observe("[node 1 n1] [rank1]: step 2 loss=0.5"))
    assert section is None and captured == [] and watch.reported is None
    assert watch.slow[-1]["progress"].endswith("step 2 loss=0.5") and not watch.due()
    assert "then a progress line came while the ranks were sampled: slow, not stuck" in report.slow_line(watch.slow[-1])


def test_a_progress_line_that_comes_during_the_capture_withdraws_the_stall():
    now = [10.0]
    watch = StallWatch(StallOptions(stall_after=10, sample_gap=0), clock=lambda: now[0])
    refreshes = iter([lambda: None, lambda: watch.observe("[rank0]: step 1 loss=0.9")])
    section = watch.judge(lambda: _stuck_sample(0.0), lambda: [node(0, "n0", [in_allreduce(0), in_allreduce(1)])],
                          sleep=lambda s: None, refresh=lambda: next(refreshes)())
    assert section is None and watch.reported is None


def test_without_progress_the_same_stuck_samples_are_a_stall():
    now = [10.0]
    watch = StallWatch(StallOptions(stall_after=10, sample_gap=0), clock=lambda: now[0])
    section = watch.judge(lambda: _stuck_sample(0.0), lambda: [node(0, "n0", [in_allreduce(0), in_allreduce(1)])],
                          sleep=lambda s: None, refresh=lambda: watch.observe("NCCL WARN nothing of progress"))
    assert section is not None and watch.reported is section


def test_ranks_that_end_between_the_two_samples_are_a_run_that_moved():
    # a run finishing: its ranks exit (interpreter shutdown has no Python stack) before their last lines arrive
    now = [10.0]
    watch = StallWatch(StallOptions(stall_after=10, sample_gap=0), clock=lambda: now[0])
    samples = iter([_stuck_sample(0.0), {0: {0: (1.0, (("wait",),), 2.0)}}])
    assert watch.judge(lambda: next(samples), lambda: [], sleep=lambda s: None) is None
    assert watch.slow[-1]["working"] == ["node 0 rank 1 (started or ended between the samples)"]
    one, two = rule.RankSample(1.0, (), 0.0), rule.RankSample(1.0, (), 2.0)
    assert rule.came_or_went({"a": [one], "b": [two]}, taken=2) == ["a", "b"]
    assert rule.came_or_went({"a": [one, two]}, taken=2) == []


def test_every_rank_gone_after_its_steps_is_a_run_ending_not_a_node_that_never_joined():
    # a fresh-clone run under load: after the last step both ranks took longer than --stall-after to tear torch and
    # Gloo down and exit while torchrun lived on; both samples found no rank, and the watch stopped the healthy run
    # naming its own (only) node as one that "never joined"
    now = [0.0]
    watch = StallWatch(StallOptions(stall_after=5, sample_gap=0), clock=lambda: now[0])
    for step in range(3):
        now[0] += 1.0
        watch.observe(f"[rank1]: step {step} loss=0.5")
    now[0] += 6.0
    assert watch.due()
    captured = []
    assert watch.judge(lambda: {0: {}}, lambda: captured.append(1) or [node(0, "n0", [])], sleep=lambda s: None,
                       expected_nodes=[0]) is None
    assert captured == [] and watch.reported is None and watch.slow[-1]["ended"] is True and not watch.due()
    assert "every rank has exited after its steps: the run is ending" in report.slow_line(watch.slow[-1])
    # still no rank when due again: judged (agents left waiting for a node after a restart are a stall)
    now[0] += 6.0
    assert watch.due()
    section = watch.judge(lambda: {0: {}}, lambda: [node(0, "n0", [])], sleep=lambda s: None, expected_nodes=[0])
    assert section is not None and [c["id"] for c in section["causes"]] == ["stall.node_never_joined"]
    # before any step a node without ranks is judged as before: it never joined
    fresh = StallWatch(StallOptions(stall_after=5, sample_gap=0), clock=lambda: 10.0)
    section = fresh.judge(lambda: {0: {}}, lambda: [node(0, "n0", [])], sleep=lambda s: None, expected_nodes=[0])
    assert section is not None and [c["id"] for c in section["causes"]] == ["stall.node_never_joined"]


def test_rank_sleeping_outside_the_collective_is_the_suspect_with_its_line():
    ranks = [in_allreduce(0), in_allreduce(1, node="n1", node_rank=1),
             rank(2, [frame("sleep", "time", 0, True), frame("step", "train.py", 27)], node="n1", node_rank=1,
                  wchan="hrtimer_nanosleep")]
    facts = {"n1": {"nic_route": {"ifname": "eth1", "src": "10.0.0.2", "target": "10.0.0.1"},
                    "nvml": {"gpus": [{"pci_bus_id": "0000:18:00.0"}, {"pci_bus_id": "0000:2a:00.0"}]}}}   # rank 2: local rank 0
    out = culprit.name_culprit([node(0, "n0", ranks[:1]), node(1, "n1", ranks[1:])], expected_nodes=[0, 1], facts=facts)
    (cause,) = out["causes"]
    assert (cause["id"], cause["rank"], cause["node"], cause["where"]) == ("stall.rank_in_python", 2, "n1", "train.py:27")
    assert cause["node_facts"] == {"gpu_bus_id": "0000:18:00.0", "nic": "eth1", "src": "10.0.0.2", "route_to": "10.0.0.1"}
    assert [g["ranks"] for g in out["groups"]] == [[0, 1], [2]]


def test_rank_reading_a_fifo_is_blocked_in_io():
    stuck = rank(1, [frame("read_batch", "train.py", 19)], wchan="pipe_read")
    out = culprit.name_culprit([node(0, "n0", [in_allreduce(0), stuck, in_allreduce(2)])])
    assert [(c["id"], c["rank"], c["where"]) for c in out["causes"]] == [("stall.rank_blocked_io", 1, "train.py:19")]


def test_all_in_one_collective_with_a_full_send_queue_names_the_link():
    q = {"local": "10.0.0.1:4000", "peer": "10.0.0.2:5000", "state": "ESTABLISHED", "send_q": 65536, "recv_q": 0,
         "send_q_later": 65536}
    out = culprit.name_culprit([node(0, "n0", [in_allreduce(0, tcp=[q])]), node(1, "n1", [in_allreduce(1, node="n1", node_rank=1)])],
                               ip_nodes={"10.0.0.2": "n1"})
    (cause,) = out["causes"]
    assert (cause["id"], cause["link"]) == ("stall.link_stuck", {"from": "n0", "to": "n1", "peer": "10.0.0.2"})
    assert cause["actor"] == "network"


def test_a_draining_send_queue_is_no_link():
    q = {"local": "a:1", "peer": "10.0.0.2:5000", "state": "ESTABLISHED", "send_q": 65536, "recv_q": 0, "send_q_later": 100}
    out = culprit.name_culprit([node(0, "n0", [in_allreduce(0, tcp=[q]), in_allreduce(1)])])
    assert [c["id"] for c in out["causes"]] == ["stall.unresolved"]


def test_a_node_rank_with_no_rank_never_joined():
    waiting = [rank(0, [frame("_store_based_barrier", C10D, 500), frame("init_process_group", C10D, 1500),
                        frame("main", "train.py", 8)])]
    out = culprit.name_culprit([node(0, "n0", waiting), node(1, "n1", [], alive=True), node(2, "n2", [], alive=False)],
                               expected_nodes=[0, 1, 2])
    (cause,) = out["causes"]
    assert (cause["id"], cause["node_ranks"], cause["nodes"]) == ("stall.node_never_joined", [1, 2], ["n1", "n2"])
    assert "in set-up" in cause["summary"]


def test_every_fix_pastes():
    q = {"local": "a:1", "peer": "10.0.0.2:5000", "state": "ESTABLISHED", "send_q": 9, "recv_q": 0, "send_q_later": 9}
    cases = [
        [node(0, "n0", [in_allreduce(0), rank(1, [frame("f", "train.py", 3)], wchan="pipe_read")])],
        [node(0, "n0", [in_allreduce(0), rank(1, [frame("f", "train.py", 3)])])],
        [node(0, "n0", [in_allreduce(0), in_allreduce(1), rank(2, [frame("barrier", C10D, 1), frame("f", "t.py", 2)])])],
        [node(0, "n0", [in_allreduce(0, tcp=[q]), in_allreduce(1)])],
        [node(0, "n0", [in_allreduce(0)]), node(1, "n'1", [])],
        [node(0, "n0", [in_allreduce(0), in_allreduce(1)])],
    ]
    for nodes in cases:
        for cause in culprit.name_culprit(nodes, expected_nodes=[0, 1])["causes"]:
            assert cause["fix"], cause["id"]
            assert paste_problems(cause["fix"]) == [], cause["fix"]   # bash -n, no <placeholder>, no "..."


def test_the_rendezvous_store_says_which_node_never_joined_when_no_node_has_ranks():
    store = {"available": True, "store": "10.0.0.1:29500", "run_id": "none", "joined": [0, 2], "missing": [1]}
    out = culprit.name_culprit([node(0, "n0", []), node(1, "n1", []), node(2, "n2", [])], expected_nodes=[0, 1, 2],
                               store=store)
    (cause,) = out["causes"]
    assert (cause["id"], cause["node_ranks"], cause["nodes"]) == ("stall.node_never_joined", [1], ["n1"])
    assert "holds the agents' keys (none/torchelastic/role_info/N) of node ranks 0, 2, not of 1" in cause["evidence"][-1]


def test_an_agent_waiting_in_the_rendezvous_joined_and_one_elsewhere_did_not():
    static = "/venv/lib/python3.11/site-packages/torch/distributed/elastic/rendezvous/static_tcp_rendezvous.py"
    waiting = {"stacks": {"threads": [{"tid": 1, "active": False, "frames": [
        frame("StaticTCPRendezvous.next_rendezvous", static, 67), frame("<module>", "torch/distributed/run.py", 1032)]}]}}
    elsewhere = {"stacks": {"threads": [{"tid": 2, "active": False, "frames": [frame("<module>", "/usr/bin/torchrun", 4)]}]}}
    out = culprit.name_culprit([{**node(0, "n0", []), "agent": waiting}, {**node(1, "n1", []), "agent": elsewhere}],
                               expected_nodes=[0, 1], store={"available": True, "store": "h:1", "run_id": "none",
                                                             "joined": [], "missing": [0, 1]})
    (cause,) = out["causes"]
    assert (cause["id"], cause["node_ranks"]) == ("stall.node_never_joined", [1])
    assert "node 1 n1: torchrun runs, no rank process; it is at <module> (/usr/bin/torchrun:4)" in cause["evidence"]
    assert ("node 0 n0: torchrun's agent waits for the other nodes in the rendezvous: "
            "StaticTCPRendezvous.next_rendezvous (static_tcp_rendezvous.py:67)") in cause["evidence"]
