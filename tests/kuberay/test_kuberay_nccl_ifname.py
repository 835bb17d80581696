"""kuberay.nccl_ifname: GPU pods tell NCCL which interface to use."""
from kuberay_lab import judge
from paste_lint import paste_problems

from dsv3_preflight.kuberay.job import judge_nccl_ifname
from dsv3_preflight.result import Actor, Status


def test_no_interface_in_the_runtime_env_or_the_gpu_containers_warns():
    r = judge("rayjob_loses_checkpoints.yaml", judge_nccl_ifname)
    assert r.status is Status.WARN and r.actor is Actor.JOB and r.cause == "kuberay.nccl_ifname_unset"
    assert "rayjob_loses_checkpoints.yaml:40: RayJob pytorch-lora-*: no NCCL_SOCKET_IFNAME in the runtime env or " \
           "the containers of gpu-group: Ray Train no longer sets it" in r.summary
    assert "${NCCL_SOCKET_IFNAME:?the pod interface on the training network" in r.remediation
    assert paste_problems(r.remediation) == []


def test_an_envfrom_the_manifest_cannot_show_is_named():
    r = judge("raycluster_8gpu.yaml", judge_nccl_ifname)
    assert r.status is Status.WARN
    assert "(unless the envFrom/valueFrom of h100x8 sets it: not shown here)" in r.summary


def test_the_runtime_env_reaches_every_worker():
    r = judge("rayjob_good.yaml", judge_nccl_ifname)
    assert r.status is Status.PASS and r.evidence["RayJob lora-finetune"]["runtime_env"] == "eth0"


def test_the_gpu_containers_env_passes():
    r = judge("raycluster_8gpu.yaml", judge_nccl_ifname, {
        "              envFrom:\n": "              env:\n                - name: NCCL_SOCKET_IFNAME\n"
                                    "                  value: net1\n              envFrom:\n"})
    assert r.status is Status.PASS and r.evidence["RayCluster h100-pool"]["containers"] == {"h100x8": "net1"}


def test_no_gpu_no_nccl():
    r = judge("rayjob_script_sets.yaml", judge_nccl_ifname)
    assert r.status is Status.SKIP and "no group asks for GPUs: NCCL is not used" in r.summary
