"""Rank → GPU mapping: the pure logic (exhaustive and property-based) and the two checks built on it."""
from __future__ import annotations

import json

import pytest
from gpu_lab import DATA, cpu_profile, profile
from hypothesis import given, settings
from hypothesis import strategies as st

from dsv3_preflight.checks.gpu_rank_mapping import rank_mapping, rank_mapping_cluster
from dsv3_preflight.gpu.rankmap import (
    cluster_problems,
    enumeration_order,
    find_duplicates,
    mapping_table,
    nccl_bus_id,
    normalize_bus_id,
    parse_visible_devices,
    plan,
    resolve_visible,
)
from dsv3_preflight.result import Status

A100_BUS = ["07", "0F", "47", "4E", "87", "90", "B7", "BD"]


def gpus(buses=A100_BUS, name="NVIDIA A100-SXM4-80GB"):
    return [{"index": i, "name": name, "uuid": f"GPU-{i:08x}-aaaa-bbbb-cccc-{i:012x}", "pci_bus_id": f"00000000:{b}:00.0",
             "memory_total_bytes": 85899345920} for i, b in enumerate(buses)]


def nvml(gpu_list=None):
    return {"available": True, "driver_version": "535.129.03", "gpus": gpus() if gpu_list is None else gpu_list}


# -- NCCL's bus id and message -------------------------------------------------------------------

@pytest.mark.parametrize("bus, printed", [
    ("00000000:53:00.0", "53000"), ("0000:53:00.0", "53000"), ("00000000:91:00.0", "91000"),
    ("00000000:07:00.0", "7000"), ("00000000:DB:00.0", "db000"), ("00000001:00:00.0", "100000"),
])
def test_nccl_bus_id_prints_like_ncclbusidtoint64(bus, printed):
    assert nccl_bus_id(bus) == printed


def test_duplicate_message_is_nccls_wording_from_the_field_notes():
    rows = [{"rank": 19, "host": "gpu-c", "pci_bus_id": "00000000:53:00.0"},
            {"rank": 27, "host": "gpu-c", "pci_bus_id": "0000:53:00.0"}]
    (dup,) = find_duplicates(rows)
    assert dup["message"] == "Duplicate GPU detected : rank 27 and rank 19 both on CUDA device 53000"
    assert dup["host"] == "gpu-c" and dup["pci_bus_id"] == "0000:53:00.0" and dup["ranks"] == [27, 19]


def test_same_bus_id_on_different_hosts_is_not_a_duplicate():
    rows = [{"rank": 3, "host": "a", "pci_bus_id": "0000:53:00.0"}, {"rank": 11, "host": "b", "pci_bus_id": "0000:53:00.0"}]
    assert find_duplicates(rows) == []


def test_three_ranks_on_one_gpu_report_every_pair():
    rows = [{"rank": r, "host": "a", "pci_bus_id": "0000:07:00.0"} for r in (0, 8, 16)]
    assert [d["ranks"] for d in find_duplicates(rows)] == [[8, 0], [16, 0], [16, 8]]


# -- CUDA_VISIBLE_DEVICES and order ----------------------------------------------------------------

def test_unset_visible_devices_means_all_gpus_in_pci_order():
    rows = plan(3, 8, 1, None, "PCI_BUS_ID", gpus())
    assert [r["rank"] for r in rows] == list(range(8, 16))
    assert [r["pci_bus_id"] for r in rows] == [normalize_bus_id(f"0000:{b}:00.0") for b in A100_BUS]


def test_visible_devices_reorders_gpus_by_index():
    rows = plan(1, 2, 0, "7,0", "PCI_BUS_ID", gpus())
    assert [(r["cuda_index"], r["nvml_index"], r["pci_bus_id"]) for r in rows] == [(0, 7, "0000:bd:00.0"), (1, 0, "0000:07:00.0")]


def test_visible_devices_accepts_uuid_prefixes():
    g = gpus()
    res = resolve_visible(f"{g[3]['uuid'][:12]},{g[1]['uuid']}", "PCI_BUS_ID", g)
    assert [d["index"] for d in res.devices] == [3, 1] and res.problems == []


@pytest.mark.parametrize("cvd, problem", [
    ("0,1,1,2", "lists GPU 1 (0000:0f:00.0) twice (positions 1 and 2)"),
    ("0,1,8,2", "entry '8' (position 2) is out of range: this node has 8 GPUs (0–7)"),
    ("0,1,8,2", "the 1 entries after '8' are ignored"),
    ("GPU-deadbeef", "matches no GPU UUID on this node"),
    ("0,x", "'x' (position 1) is neither an index nor a GPU UUID"),
    ("", "CUDA_VISIBLE_DEVICES is empty: no GPU is visible"),
])
def test_bad_visible_device_lists_are_named(cvd, problem):
    res = resolve_visible(cvd, "PCI_BUS_ID", gpus())
    assert any(problem in p for p in res.problems), res.problems


def test_cuda_stops_at_the_first_invalid_entry():
    assert [d["index"] for d in resolve_visible("0,1,8,2", "PCI_BUS_ID", gpus()).devices] == [0, 1]


def test_fastest_first_is_uncertain_only_with_mixed_models():
    assert resolve_visible(None, None, gpus()).order_certain
    mixed = gpus()[:4] + gpus(name="NVIDIA A100 40GB PCIe")[4:]
    assert not resolve_visible(None, None, mixed).order_certain
    assert resolve_visible(None, "PCI_BUS_ID", mixed).order_certain


def test_parse_visible_devices_distinguishes_unset_from_empty():
    assert parse_visible_devices(None) is None and parse_visible_devices("") == [] and parse_visible_devices(" 0, 1") == ["0", "1"]


def test_mapping_table_reads_like_the_field_notes():
    rows = plan(3, 8, 0, "0,1,2,3,4,5,6,7", "PCI_BUS_ID", gpus(), host="gpu-a") + \
        plan(3, 8, 1, None, "PCI_BUS_ID", gpus(), host="gpu-b")
    lines = mapping_table(rows).splitlines()
    assert lines[0].startswith("node 0 (gpu-a): ranks 0–7 → GPUs 0–7 (07:00.0, 0f:00.0")
    assert lines[1].startswith("node 1 (gpu-b): ranks 8–15 → GPUs 0–7")


# -- properties -------------------------------------------------------------------------------------

@st.composite
def visible_lists(draw):
    n = draw(st.integers(1, 8))
    g = gpus(A100_BUS[:n])
    for i in range(n):  # some nodes mix models: FASTEST_FIRST then reorders, and must stay a bijection
        if draw(st.booleans()) and draw(st.booleans()):
            g[i] = dict(g[i], name="NVIDIA A100 40GB PCIe", memory_total_bytes=42949672960)
    order = draw(st.sampled_from(["PCI_BUS_ID", None, "FASTEST_FIRST"]))
    enumerated, _ = enumeration_order(order, g)  # an index names a GPU of CUDA's enumeration, a UUID names it directly
    picked = draw(st.permutations(list(range(n))))
    k = draw(st.integers(1, n))
    entries = [str(i) if draw(st.booleans()) else enumerated[i]["uuid"] for i in picked[:k]]
    return g, entries, order


@settings(max_examples=150, deadline=None)
@given(visible_lists(), st.integers(0, 3))
def test_any_valid_visible_list_maps_local_ranks_bijectively_onto_its_gpus(case, node_rank):
    g, entries, order = case
    rows = plan(4, len(entries), node_rank, ",".join(entries), order, g, host="h")
    assert sorted(r["rank"] for r in rows) == list(range(node_rank * len(entries), (node_rank + 1) * len(entries)))
    buses = [r["pci_bus_id"] for r in rows]
    assert None not in buses and len(set(buses)) == len(buses)   # injective
    assert set(buses) <= {normalize_bus_id(x["pci_bus_id"]) for x in g}   # onto the listed GPUs
    assert find_duplicates(rows) == [] and resolve_visible(",".join(entries), order, g).problems == []


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a", "b"]), st.sampled_from(A100_BUS)), min_size=1, max_size=24))
def test_every_shared_gpu_is_reported_once_per_pair(assignments):
    rows = [{"rank": r, "host": h, "pci_bus_id": f"0000:{b}:00.0"} for r, (h, b) in enumerate(assignments)]
    expected = {(hi, lo) for lo, (h1, b1) in enumerate(assignments) for hi, (h2, b2) in enumerate(assignments)
                if lo < hi and h1 == h2 and b1 == b2}
    found = find_duplicates(rows)
    assert {tuple(d["ranks"]) for d in found} == expected and len(found) == len(expected)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 9), min_size=1, max_size=10))
def test_a_repeated_index_is_always_reported(indices):
    res = resolve_visible(",".join(map(str, indices)), "PCI_BUS_ID", gpus())
    valid_prefix = []
    for i in indices:
        if i > 7:
            break
        valid_prefix.append(i)
    if len(set(valid_prefix)) < len(valid_prefix):
        assert any("twice" in p for p in res.problems)
    if any(i > 7 for i in indices):
        assert any("out of range" in p for p in res.problems)


# -- the node check ---------------------------------------------------------------------------

def host(name="gpu-a"):
    return {"hostname": name, "machine_id": f"m-{name}", "boot_id": f"b-{name}"}


def test_rank_mapping_passes_the_field_notes_setup():
    env = {"CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    r = rank_mapping(nvml=nvml(), env=env, host=host(), profile=profile(node_rank=1, cuda_visible_devices="0,1,2,3,4,5,6,7"))
    assert r.status is Status.PASS and r.summary.startswith("node 1 (gpu-a): ranks 8–15 → GPUs 0–7")


def test_rank_mapping_warns_when_order_is_unset_on_identical_gpus():
    r = rank_mapping(nvml=nvml(), env={}, host=host(), profile=profile())
    assert r.status is Status.WARN and "CUDA_DEVICE_ORDER is unset (FASTEST_FIRST)" in r.summary
    assert "export CUDA_DEVICE_ORDER=PCI_BUS_ID" in r.remediation


def test_rank_mapping_fails_when_fastest_first_can_differ_from_pci_order():
    mixed = gpus()[:4] + gpus(name="NVIDIA A100 40GB PCIe")[4:]
    r = rank_mapping(nvml=nvml(mixed), env={"CUDA_DEVICE_ORDER": "FASTEST_FIRST"}, host=host(), profile=profile())
    assert r.status is Status.FAIL and "CUDA's order can differ from PCI order" in r.summary


def test_rank_mapping_fails_with_more_local_ranks_than_visible_gpus():
    env = {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    r = rank_mapping(nvml=nvml(), env=env, host=host(), profile=profile(cuda_visible_devices="0,1,2,3,4,5", node_rank=2))
    assert r.status is Status.FAIL
    assert "8 local ranks but only 6 visible GPUs: ranks 22–23 have no GPU" in r.summary
    assert "ranks 22–23 have no visible GPU" in r.evidence["table"]


def test_rank_mapping_reports_a_duplicated_visible_gpu_as_nccl_would():
    env = {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    r = rank_mapping(nvml=nvml(), env=env, host=host(), profile=profile(cuda_visible_devices="0,1,2,3,3,5,6,7"))
    assert r.status is Status.FAIL
    assert any(d["message"] == "Duplicate GPU detected : rank 4 and rank 3 both on CUDA device 4e000" for d in r.evidence["duplicates"])


def test_rank_mapping_without_nvml_fails_honestly_and_skips_under_cpu_profile():
    no = {"available": False, "error": "NVML Shared Library Not Found", "gpus": []}
    assert rank_mapping(nvml=no, env={}, host=host(), profile=profile()).summary == \
        "cannot map ranks to GPUs: no NVIDIA driver/NVML: NVML Shared Library Not Found"
    assert rank_mapping(nvml=no, env={}, host=host(), profile=cpu_profile()).status is Status.SKIP


# -- the cluster check ------------------------------------------------------------------------

def field_notes_cluster():
    doc = json.loads((DATA / "cluster_two_node_ranks_one_host.json").read_text())
    nodes = list(doc["node_ranks"])
    env = {n: {"CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"} for n in nodes}
    return doc, {n: {"available": True, "gpus": doc["gpus"]} for n in nodes}, env


def test_cluster_mapping_reproduces_the_field_notes_duplicate_gpu_error():
    doc, nv, env = field_notes_cluster()
    r = rank_mapping_cluster(nvml=nv, env=env, host=doc["hosts"], node_ranks=doc["node_ranks"],
                             profile=profile(nnodes=4))
    assert r.status is Status.FAIL
    messages = [d["message"] for d in r.evidence["duplicates"]]
    assert "Duplicate GPU detected : rank 27 and rank 19 both on CUDA device 53000" in messages
    assert "Duplicate GPU detected : rank 29 and rank 21 both on CUDA device 91000" in messages
    assert "nodes n2, n3 share the host name gpu-c" in r.summary
    assert "NODE_RANK" in r.remediation


def test_cluster_mapping_passes_three_distinct_nodes_and_shows_the_table():
    doc, nv, env = field_notes_cluster()
    ranks = {"n0": 0, "n1": 1, "n2": 2}
    r = rank_mapping_cluster(nvml={n: nv[n] for n in ranks}, env=env, host={n: doc["hosts"][n] for n in ranks},
                             node_ranks=ranks, profile=profile())
    assert r.status is Status.PASS, r.summary
    assert r.evidence["table"].splitlines()[2].startswith("node 2 (gpu-c): ranks 16–23 → GPUs 0–7 (18:00.0")


@pytest.mark.parametrize("ranks, world, text", [
    ({"n0": 0, "n1": 1, "n2": 1}, None, "node rank 1 is used by 2 nodes: n1, n2"),
    ({"n0": 0, "n1": 1, "n2": 2}, 16, "world size does not add up: the nodes launch 24 ranks (8 + 8 + 8), WORLD_SIZE is 16"),
    ({"n0": 0, "n1": 2}, None, "no node has node rank 1"),
])
def test_cluster_problems_name_node_rank_and_world_size_errors(ranks, world, text):
    hosts = {n: host(n) for n in ranks}
    problems = cluster_problems(ranks, hosts, 3, 8, world or 24)
    assert any(text in p for p in problems), problems


def test_cluster_mapping_fails_when_nodes_disagree_on_device_order():
    doc, nv, env = field_notes_cluster()
    ranks = {"n0": 0, "n1": 1, "n2": 2}
    env["n1"] = {"CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7"}
    r = rank_mapping_cluster(nvml=nv, env=env, host=doc["hosts"], node_ranks=ranks, profile=profile())
    assert r.status is Status.FAIL
    assert "CUDA_DEVICE_ORDER differs across nodes: n0=PCI_BUS_ID, n1=FASTEST_FIRST (unset), n2=PCI_BUS_ID" in [
        f.message for f in r.findings]


def test_cluster_mapping_is_skipped_under_the_cpu_profile():
    doc, nv, env = field_notes_cluster()
    r = rank_mapping_cluster(nvml=nv, env=env, host=doc["hosts"], node_ranks=doc["node_ranks"], profile=cpu_profile())
    assert r.status is Status.SKIP


# -- a duplicated entry is the job's error, knowable without a driver (issue 46.2) -----------------------------

NO_NVML = {"available": False, "error": "NVML Shared Library Not Found", "gpus": []}


@pytest.mark.parametrize("cvd, nproc, words", [
    ("0,1,2,3,4,5,6,6", 8, "lists 6 twice (positions 6 and 7): two local ranks would share one GPU"),
    ("GPU-aa11,GPU-bb22,gpu-AA11", 3, "lists gpu-AA11 twice (positions 0 and 2)"),
    ("0,1,x,3", 4, "entry 'x' (position 2) is neither an index nor a GPU UUID: CUDA stops reading there"),
    ("0,1", 8, "makes 2 GPUs visible for 8 local ranks"),
])
def test_without_a_driver_the_visible_devices_error_is_still_the_jobs_own_cause(cvd, nproc, words):
    r = rank_mapping(nvml=NO_NVML, env={"CUDA_VISIBLE_DEVICES": cvd}, host=host(),
                     profile=profile(nproc_per_node=nproc))
    assert r.status is Status.FAIL
    from paste_lint import paste_problems

    assert {f.cause for f in r.findings} == {"gpu.no_driver", "gpu.visible_devices"}, r.findings
    assert {f.actor.value for f in r.findings if f.cause == "gpu.no_driver"} == {"node"}
    job = [f for f in r.findings if f.cause == "gpu.visible_devices"]
    assert {f.actor.value for f in job} == {"job"} and any(words in f.message for f in job), job
    assert all(paste_problems(f.fix) == [] for f in job)


def test_the_duplicate_is_a_cause_of_its_own_beside_no_driver_in_the_report():
    """The field's `CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,6 NPROC_PER_NODE=8` on a node without a driver read only
    'no NVIDIA driver/NVML'; the duplicate would bite after the administrator installs one."""
    from dsv3_preflight.reports.rootcause import root_causes

    r = rank_mapping(nvml=NO_NVML, env={"CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,6"}, host=host(), profile=profile())
    doc_result = {**r.to_dict(), "name": "gpu.rank_mapping", "node": "gpu-a"}
    causes = {c.key: c for c in root_causes([doc_result])}
    assert set(causes) == {"gpu.no_driver", "gpu.visible_devices"}
    assert causes["gpu.no_driver"].actor == "node" and causes["gpu.visible_devices"].actor == "job"
    assert "lists 6 twice" in causes["gpu.visible_devices"].title


def test_without_a_driver_a_good_visible_list_adds_nothing_to_no_driver():
    r = rank_mapping(nvml=NO_NVML, env={"CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7"}, host=host(), profile=profile())
    assert [f.cause for f in r.findings] == ["gpu.no_driver"]


def test_the_cluster_check_names_a_driverless_nodes_duplicate_too():
    profile_ = profile(nnodes=2)
    r = rank_mapping_cluster(nvml={"a": NO_NVML, "b": nvml()},
                             env={"a": {"CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,6"},
                                  "b": {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}},
                             host={"a": host("a"), "b": host("b")}, profile=profile_, node_ranks={"a": 0, "b": 1})
    assert {f.cause for f in r.findings} >= {"gpu.no_driver", "gpu.visible_devices"}
    assert any(f.message.startswith("a: CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,6 lists 6 twice") for f in r.findings)
