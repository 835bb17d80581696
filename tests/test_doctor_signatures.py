"""Every signature of the doctor's table recognises its own real example line, and its texts are complete."""
import re

import pytest

from dsv3_preflight.doctor.signatures import CLASSES, SIGNATURES
from dsv3_preflight.doctor.triage import _Matcher, _fill, _groups

CHECKS = {"gpu.cuda_init", "gpu.rank_mapping", "net.port_free", "net.port_reach", "net.nic_route", "dist.allreduce",
          "host.resources", "lora.deepspeed_config", "lora.targets", "lora.scan"}
MATCHER = _Matcher(SIGNATURES)


@pytest.mark.parametrize("sig", SIGNATURES, ids=lambda s: s.id)
def test_signature_recognises_its_real_example_before_any_other(sig):
    hit = MATCHER.match(sig.example)
    assert hit is not None, f"{sig.id}: its example matches nothing"
    assert hit[0].id == sig.id, f"{sig.id}: its example is taken by {hit[0].id} (earlier in the table)"


@pytest.mark.parametrize("sig", SIGNATURES, ids=lambda s: s.id)
def test_signature_names_where_its_format_comes_from(sig):
    assert sig.source.strip(), f"{sig.id}: say where the format comes from (issue thread or library source)"


@pytest.mark.parametrize("sig", SIGNATURES, ids=lambda s: s.id)
def test_signature_texts_fill_every_placeholder_from_its_example(sig):
    groups = _groups(sig.regex.search(sig.example))
    for text in (sig.title, sig.root_cause, sig.fix):
        filled = _fill(text, groups)
        # awk's {print $1} and JSON braces in fixes are not placeholders: only bare {name} with a group name are
        left = [n for n in re.findall(r"\{(\w+)\}", filled) if n in sig.regex.groupindex or n + "2" in sig.regex.groupindex]
        assert not left, f"{sig.id}: placeholders {left} not filled from {sig.example!r}"


@pytest.mark.parametrize("sig", [s for s in SIGNATURES if s.kind in ("cause", "suspect")], ids=lambda s: s.id)
def test_every_cause_says_why_how_to_fix_and_which_check_catches_it(sig):
    assert sig.root_cause and sig.fix
    assert sig.check in CHECKS, f"{sig.id}: check {sig.check!r} is not a preflight check"
    assert sig.cls in CLASSES


def test_signature_ids_are_unique():
    ids = [s.id for s in SIGNATURES]
    assert len(ids) == len(set(ids))


def test_every_failure_class_of_the_issue_has_a_cause_signature():
    classes = {s.cls for s in SIGNATURES if s.kind == "cause"}
    for cls in ("cuda_init", "rank_mapping", "rendezvous", "nic_selection", "transport", "oom", "lora_save"):
        assert cls in classes


@pytest.mark.parametrize("sig", [s for s in SIGNATURES if "ip route get $MASTER_ADDR" in s.fix], ids=lambda s: s.id)
def test_interface_fixes_do_not_send_the_head_to_lo(sig):
    # `ip route get $MASTER_ADDR` answers `dev lo` on the head itself: a fix built only on it pins loopback there
    assert "dsv3-preflight run --only net.nic_route" in sig.fix
    assert "on the head, the interface holding MASTER_ADDR" in sig.fix


def test_every_nic_selection_cause_points_at_the_preflight_for_the_exports():
    nic = [s for s in SIGNATURES if s.cls == "nic_selection" and "export" in s.fix]
    assert len(nic) >= 5
    assert all("dsv3-preflight run --only net.nic_route" in s.fix for s in nic), [s.id for s in nic]
