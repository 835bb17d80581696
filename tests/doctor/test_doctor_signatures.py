"""Every signature of the doctor's table recognises its own real example line, and its texts are complete:
a root cause, a fix that pastes into bash (``bash -n``), and an existing preflight check that catches it."""
import json
import re
import shutil
import subprocess

import pytest
from conftest import python_cli
from paste_lint import paste_problems

from dsv3_preflight.doctor.signatures import (
    CLASSES,
    DERIVED,
    DERIVED_NAMES,
    EXTRA_CLASSES,
    GATE_CLASS,
    GPU_FAULT_CLASS,
    NO_PREFLIGHT_CHECK,
    SIGNATURES,
)
from dsv3_preflight.doctor.triage import _fill, _groups, _Matcher

MATCHER = _Matcher(SIGNATURES)
ALL = SIGNATURES + DERIVED


def _ctx_for(sig):
    return {sig.requires: 1} if sig.requires else {}


@pytest.fixture(scope="module")
def check_names():
    p = subprocess.run(python_cli("list", "--json"), capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return {c["name"] for c in json.loads(p.stdout)["checks"]}


@pytest.mark.parametrize("sig", [s for s in SIGNATURES if s.kind not in ("benign", "context")], ids=lambda s: s.id)
def test_signature_recognises_its_example_before_any_other(sig):
    hit, m, _benign = MATCHER.match(sig.example, _ctx_for(sig), 2)
    assert hit is not None, f"{sig.id}: its example matches nothing"
    assert hit.id == sig.id, f"{sig.id}: its example is taken by {hit.id} (earlier in the table)"


@pytest.mark.parametrize("sig", [s for s in SIGNATURES if s.kind in ("benign", "context")], ids=lambda s: s.id)
def test_benign_and_context_signatures_match_their_example(sig):
    assert sig.regex.search(sig.example), sig.id


@pytest.mark.parametrize("sig", ALL, ids=lambda s: s.id)
def test_signature_names_where_its_format_comes_from(sig):
    assert sig.source.strip() and sig.example.strip(), f"{sig.id}: say where the format comes from"


@pytest.mark.parametrize("sig", ALL, ids=lambda s: s.id)
def test_signature_texts_fill_every_placeholder_from_its_example(sig):
    m = sig.regex.search(sig.example)
    assert m, f"{sig.id}: pattern does not match its example"
    groups = _groups(m)
    names = {k.rstrip("0123456789") or k for k in sig.regex.groupindex}
    if sig.enrich is not None:   # what the triage adds from the groups (an Xid's meaning) is filled as well
        groups.update(sig.enrich(groups))
        names |= DERIVED_NAMES
    for text in (sig.title, sig.root_cause):
        filled = _fill(text, groups, names)
        left = [n for n in re.findall(r"\{(\w+)\}", filled) if n in names]
        assert not left, f"{sig.id}: placeholders {left} not filled from {sig.example!r}"
        assert "[[" not in filled and "]]" not in filled, sig.id


@pytest.mark.skipif(not shutil.which("bash"), reason="needs bash")
@pytest.mark.parametrize("sig", [s for s in ALL if s.fix], ids=lambda s: s.id)
def test_every_fix_passes_bash_n(sig):
    """A fix is pasted into a shell: commands, ${NAME:?what} placeholders, prose only in # comments."""
    m = sig.regex.search(sig.example)
    groups = _groups(m) if m else {}
    if m and sig.enrich is not None:
        groups.update(sig.enrich(groups))
    names = {k.rstrip("0123456789") or k for k in sig.regex.groupindex} | DERIVED_NAMES
    for filled in (_fill(sig.fix, groups, names, quote=True), _fill(sig.fix, {}, names, quote=True),
                   _fill(sig.fix, {k: "x'; rm -rf / #" for k in names}, names, quote=True)):
        p = subprocess.run(["bash", "-n"], input=filled, capture_output=True, text=True, timeout=30)
        assert p.returncode == 0, f"{sig.id}: bash -n fails: {p.stderr}\n{filled}"
        assert paste_problems(filled) == [], f"{sig.id}: {paste_problems(filled)}\n{filled}"


@pytest.mark.parametrize("sig", [s for s in ALL if s.kind in ("cause", "suspect")], ids=lambda s: s.id)
def test_every_cause_says_why_how_to_fix_and_which_existing_check_catches_it(sig, check_names):
    assert sig.root_cause and sig.fix and (sig.cls in CLASSES or sig.cls == GPU_FAULT_CLASS
                                                  or sig.cls == GATE_CLASS and sig.id.startswith("preflight."))
    if sig.id in NO_PREFLIGHT_CHECK:  # the training script itself (its argument checks, its collectives): no check sees it
        assert sig.check is None
    else:
        assert sig.check in check_names, f"{sig.id}: check {sig.check!r} is not a preflight check"


@pytest.mark.parametrize("sig", [s for s in ALL if "--only" in s.fix], ids=lambda s: s.id)
def test_checks_named_in_fixes_exist(sig, check_names):
    for arg in re.findall(r"--only (\S+)", sig.fix):
        for name in arg.strip("'\"").split(","):
            assert name in check_names, f"{sig.id}: the fix names {name!r}, not a check"


def test_signature_ids_are_unique():
    ids = [s.id for s in ALL]
    assert len(ids) == len(set(ids))


def test_every_class_of_the_issue_has_a_cause_signature():
    assert set(CLASSES) == {"cuda_fabric", "version_drift", "pci_rank_dup", "port_rendezvous", "nic_iface", "nccl_hang",
                            "nccl_transport", "gpu_oom", "host_resources", "lora_empty", "config"}
    assert {s.cls for s in ALL if s.kind == "cause"} == set(CLASSES) | set(EXTRA_CLASSES)   # and our own preflight's verdict


def test_interface_fixes_do_not_send_the_head_to_lo():
    # `ip route get $MASTER_ADDR` answers `dev lo` on the head itself: a fix built only on it pins loopback there
    for s in ALL:
        if "ip route get" in s.fix:
            assert "dsv3-preflight run --only net.nic_route" in s.fix and "on the head" in s.fix, s.id


def test_every_nic_cause_points_at_the_preflight_for_the_exports():
    nic = [s for s in ALL if s.cls == "nic_iface" and s.kind in ("cause", "suspect")]
    assert len(nic) >= 8
    assert all("net.nic_route" in s.fix for s in nic), [s.id for s in nic if "net.nic_route" not in s.fix]


def test_every_cause_says_who_acts_unless_the_log_cannot():
    """Root cause first, and who must act on it: the job's configuration, the node's administrator or the network's.
    Only a hang without a culprit (a timeout, a rank behind) and the preflight's own verdict (it says who, per failure)
    leave it to the log."""
    from dsv3_preflight.doctor.signatures import ACTOR_OF, ACTORS, CLASS_ACTOR, GATE_SIGNATURES

    table = SIGNATURES + DERIVED
    assert set(ACTOR_OF) <= {s.id for s in table}, set(ACTOR_OF) - {s.id for s in table}
    assert set(CLASS_ACTOR) == set(CLASSES) | set(EXTRA_CLASSES)   # a new class comes with a decision
    assert ACTORS == ("job", "node", "network")
    unsaid = {s.id for s in table if s.kind in ("cause", "suspect") and s.actor is None and s not in GATE_SIGNATURES
              and s.id != "preflight.no_go"}
    assert all(next(s for s in table if s.id == i).cls == "nccl_hang" for i in unsaid), unsaid
    assert all(s.actor is None for s in GATE_SIGNATURES)
    assert all(s.actor is None for s in table if s.kind in ("progress", "benign", "context") or s.cls is None)
    by = {s.id: s.actor for s in table}
    # the guide's own failures: who acts on each
    assert by["cuda.error_802"] == by["fabricmanager.service_failed"] == "node"          # Fabric Manager stopped
    assert by["nccl.duplicate_gpu"] == by["elastic.duplicate_node_rank"] == "job"        # two ranks on one GPU
    assert by["c10d.address_in_use"] == "job" and by["net.name_resolution"] == "node"  # port held; DNS
    assert by["nccl.bad_interface_selected"] == by["hang.nccl_init"] == "job"            # NCCL_SOCKET_IFNAME
    assert by["deepspeed.not_gathered_on_save"] == by["peft.target_modules_not_found"] == "job"   # empty adapters
    assert by["nccl.ib_completion_error"] == "network" and by["nccl.watchdog_timeout"] is None
    assert by["torch.driver_too_old"] == "job" and by["nvml.driver_library_mismatch"] == "node"


@pytest.mark.skipif(not shutil.which("bash"), reason="needs bash")
@pytest.mark.parametrize("sig", [s for s in ALL if s.fix and "NCCL_SOCKET_IFNAME=" in s.fix], ids=lambda s: s.id)
def test_a_fix_that_pins_nccl_exports_the_exact_interface_not_a_prefix(sig):
    """NCCL reads NCCL_SOCKET_IFNAME=eth0 as a prefix (it also takes eth01; eth1 also takes eth10): pasted with
    IFACE=eth0, the fix must export =eth0, which selects exactly eth0."""
    exports = "\n".join(line for line in sig.fix.splitlines()
                        if line.startswith("export ") and "NCCL_SOCKET_IFNAME=" in line)
    proc = subprocess.run(["bash", "-c", f'IFACE=eth0\n{exports}\nprintf %s "$NCCL_SOCKET_IFNAME"'],
                          capture_output=True, text=True, timeout=10)
    assert (proc.returncode, proc.stdout) == (0, "=eth0"), (sig.id, exports, proc.stderr)
