"""gpu.xid: no Xid event since boot says a GPU needs a reset, a reboot or replacing (NVIDIA's Xid catalogue)."""
from __future__ import annotations

from dsv3_preflight import Result, check
from dsv3_preflight.gpu.common import NOT_EXPECTED
from dsv3_preflight.gpu.facts import KernelXidFact, NvmlFact
from dsv3_preflight.gpu.xid import CATALOG_URL, meaning
from dsv3_preflight.gpu.xid_rules import rule_application_xids, rule_node_xids, rule_reset_soon_xids
from dsv3_preflight.profile import Profile
from dsv3_preflight.result import Findings


@check("gpu.xid", needs=["kernel_xid", "nvml", "profile"], tags=["gpu", "health"], timeout=20)
def xid(kernel_xid: KernelXidFact, nvml: NvmlFact, profile: Profile):
    """Xid events in the kernel log since boot, judged by NVIDIA's catalogue: reset/reboot class fails, contained
    errors and application faults warn."""
    events = kernel_xid.get("events") or []
    evidence = {"source": kernel_xid.get("source"), "records": kernel_xid.get("records"), "oldest": kernel_xid.get("oldest"),
                "truncated": kernel_xid.get("truncated"), "catalogue": CATALOG_URL,
                "events": [dict(e, meaning=meaning(e["xid"]).meaning, nvidia_action=meaning(e["xid"]).nvidia_action)
                           for e in events],
                "lines": kernel_xid.get("lines", [])[-20:]}
    if not profile.expects_gpus:
        return Result.skipped(NOT_EXPECTED, evidence)
    if not kernel_xid.get("available"):
        return Result.skipped(f"cannot read the kernel log: {kernel_xid.get('error')} (run as root, or "
                              "journalctl -k -b | grep Xid on the node)", evidence)
    gpus = nvml.get("gpus") or []
    found = Findings()
    found.check(rule_node_xids, events, gpus)
    found.check(rule_reset_soon_xids, events, gpus)
    found.check(rule_application_xids, events, gpus)
    oldest = str(kernel_xid.get("oldest") or "")
    since = (f" (oldest record {float(oldest[:-1]):.0f} s after boot)" if oldest.endswith("s") and oldest[:-1].replace(".", "").isdigit()
             else f" (oldest record {oldest})" if oldest else "")
    quiet = f" ({len(events)} informational)" if events else ""
    return found.result(f"no Xid that needs an administrator in {kernel_xid.get('source')}{since}{quiet}", evidence)
