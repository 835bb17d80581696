"""Our own preflight's verdict as findings: one per failed check, under that check's id.

`dsv3-preflight launch` (and `run`) print the causes of a NO-GO as "1. ✘ FAIL host.resources: port 39511 is held
by pid 1321 (…)" (reports/console.py), the launch log repeats them behind "# ", the JSON report holds the results.
The preflight has judged: the doctor repeats its judgement (dsv3_preflight.doctor.gate reads it).
"""
from __future__ import annotations

import re
import shlex

from .classes import GATE_CLASS, GPU_FAULT_CLASS
from .record import S, Signature

#: the corpus class a failed check stands for, where the check guards one; a check that guards several (host.resources:
#: a held port, /dev/shm or a full disk) is GATE_CLASS, and so is a plugin's. Every built-in check is listed (a test
#: holds the table to the registry), so a new check comes with a decision.
CHECK_CLASS: dict[str, str] = {
    "cluster.env_consistency": GATE_CLASS, "cluster.master_node": "port_rendezvous", "cluster.node_count": "port_rendezvous",
    "cluster.node_rank": "pci_rank_dup", "cluster.unique_hostnames": GATE_CLASS, "dist.allreduce": GATE_CLASS, "dist.allreduce_cluster": GATE_CLASS,
    "dist.pairs": GATE_CLASS, "env.launch_vars": GATE_CLASS, "env.torchrun_python": "version_drift",
    "gpu.clocks": GATE_CLASS, "gpu.cuda_init": GATE_CLASS,
    "gpu.fabric_manager": "cuda_fabric", "gpu.inventory": GATE_CLASS, "gpu.memory_errors": GPU_FAULT_CLASS,
    "gpu.modes": GATE_CLASS, "gpu.nvlink": "nccl_transport", "gpu.pcie_link": GATE_CLASS,
    "gpu.rank_mapping": "pci_rank_dup", "gpu.rank_mapping_cluster": "pci_rank_dup", "gpu.reset_pending": GPU_FAULT_CLASS,
    "gpu.versions": "version_drift", "gpu.xid": GPU_FAULT_CLASS, "host.resources": GATE_CLASS,
    "kuberay.backoff": GATE_CLASS, "kuberay.deadline": GATE_CLASS, "kuberay.gpu_limits": GATE_CLASS,
    "kuberay.nccl_ifname": GATE_CLASS, "kuberay.shm": GATE_CLASS, "kuberay.storage": GATE_CLASS,
    "lora.adapter_base": "lora_empty", "lora.deepspeed_config": GATE_CLASS, "lora.output_dir": GATE_CLASS,
    "lora.targets": "lora_empty", "net.mtu": GATE_CLASS, "net.nic_route": "nic_iface", "net.port_free": "port_rendezvous",
    "net.port_reach": "port_rendezvous",
}
#: a cause of the preflight's console ("Why NO-GO" block; the launch log has it behind "# ")
GATE_CAUSE_RE = (r"^\s*(?:#\s*)?\d+\. (?:\u2718 |\u203c )(?P<status>FAIL|ERROR) (?P<check>{check})"
                 r"(?: on (?P<nodes>[^:]+?))?: (?P<summary>.+)$")
_GATE_TITLE = "Preflight check {check} {status}[[ on {nodes}]]: {summary}"
_GATE_ROOT = ("The preflight judged this before the run[[ (who must act: {who})]]: a check that is FAIL or ERROR keeps "
              "`dsv3-preflight launch` from starting torchrun[[; {launched}]][[; the same cause blocks {also}]].[[ {error_note}]]")
#: the gate's {launched}, when a line of `dsv3-preflight launch` is among the inputs (a plain `run` says nothing of one)
GATE_LAUNCHED = "this launch did not start it, so no training ran"
#: what an ERROR is (the root cause's {error_note} for a check that is ERROR)
GATE_ERROR_NOTE = "ERROR: the check could not run (its probe failed or timed out); unknown is never taken as healthy."


def gate_rerun(check: str) -> str:
    """The last line of a failed check's fix: the check again."""
    return f"dsv3-preflight run --only {shlex.quote(check)}    # once fixed: this check again (--all-nodes, as for the launch)"


def _gate_fix(check: str) -> str:
    return ("# the preflight printed this cause's fix under it (\"fix: (paste as is)\") with the node's own values"
            "[[; the doctor reads it from the report:\ndsv3-preflight doctor {report}]]\n" + gate_rerun(check))


def gate_signature(check: str) -> Signature:
    """The finding of a failed preflight check (built-in or a plugin's: any id the preflight printed)."""
    sig = _GATE_SIGNATURES.get(check)
    if sig is None:
        sig = _GATE_SIGNATURES[check] = S(
            id=f"preflight.{check}", cls=CHECK_CLASS.get(check, GATE_CLASS), kind="cause", needles=("\u2718 FAIL ".encode(),),
            pattern=GATE_CAUSE_RE.format(check=re.escape(check)), title=_GATE_TITLE, root_cause=_GATE_ROOT, fix=_gate_fix(check), check=check, tier=1,
            example=f"1. \u2718 FAIL {check}: the summary the check gave", source="dsv3-preflight's console (reports/console.py: the causes of a NO-GO)",
            actor=None)   # who acts is the preflight's word on each failure (its "who acts" line), not a guess per check
    return sig


_GATE_SIGNATURES: dict[str, Signature] = {}
GATE_SIGNATURES: tuple[Signature, ...] = tuple(gate_signature(c) for c in CHECK_CLASS)
#: the gate's closing line, or the launch log's verdict, without the causes above it
GATE_NO_GO = S(
    id="preflight.no_go", cls=GATE_CLASS, kind="cause", needles=(b"NO-GO",),
    pattern=r"dsv3-preflight launch: NO-GO \((?P<why>[^)]*)\): torchrun not started(?:; report: (?P<report>\S+\.json)$)?"
    r"|^# preflight: NO-GO \(exit \d+; (?P<why2>[^)]*)\)",
    title="The preflight said NO-GO ({why}): torchrun was not started",
    root_cause="The gate of `dsv3-preflight launch` stopped the launch: a check was FAIL or ERROR. Which one is not in these "
    "lines: the console printed the causes above its last line (\"Why NO-GO\"), each with who must act and its fix.",
    fix="[[dsv3-preflight doctor {report}    # the causes, who must act and the fixes, from the preflight's report"
    "||dsv3-preflight run    # the preflight again: each cause with its fix (--all-nodes, as for the launch)]]",
    check=None, tier=2, example="dsv3-preflight launch: NO-GO (2 FAIL): torchrun not started; report: reports/preflight-20261124-092911-vm.json",
    source="launch/gate.py (red_line)")

