"""host.resources (checks/host_resources.py, its rules in dsv3_preflight/host/resource_rules.py): the check and each
rule on its own, judged on tables of facts. The runs against real processes, sockets and directories are in
tests/host/test_checks_foundation.py."""
import pytest
from paste_lint import paste_problems

from dsv3_preflight import Status
from dsv3_preflight.checks.host_resources import resources
from dsv3_preflight.host import resource_rules as host_rules
from dsv3_preflight.profile import resolve_profile
from dsv3_preflight.result import Actor

GPU = resolve_profile(environ={"MASTER_ADDR": "10.0.0.1"})
GIB = 1 << 30
SHM_OK = {"path": "/dev/shm", "exists": True, "total_bytes": 16 * GIB, "free_bytes": 16 * GIB}
NO_OUTPUT_DIR = {"configured": False}
NO_HOLDERS = {"port": 39500, "holders": []}
NO_GPU_HOLDERS = {"device_files": [], "holders": []}
PROC = {"pid": 4242, "user": "ubuntu", "cmdline": "python src/train.py --deepspeed ds.json", "name": "python", "started": "2026-11-21T23:10:00+0000"}


@pytest.mark.parametrize("facts, status, text, fix", [
    ({}, Status.PASS, "/dev/shm 16.0 GiB", None),
    ({"shm": {**SHM_OK, "total_bytes": 64 << 20}}, Status.FAIL, "/dev/shm is 0.1 GiB, below 16 GiB", "--shm-size=16g"),
    ({"shm": {"path": "/dev/shm", "exists": False}}, Status.FAIL, "/dev/shm does not exist", "--shm-size=16g"),
    ({"output_dir": {"configured": True, "path": "/ckpt", "setting": "checkpoint_dir", "exists": True, "writable": True,
                     "free_bytes": 3 * GIB, "mount": {"device": "/dev/sda", "mountpoint": "/", "fstype": "ext4"}}},
     Status.WARN, "checkpoint_dir /ckpt has only 3.0 GiB free", "df -h /ckpt"),
    ({"port_holders": {"port": 39500, "holders": [{"port": 39500, "address": "0.0.0.0", "status": "LISTEN", "type": "tcp", "process": PROC}]}},
     Status.FAIL, "port 39500 is held by pid 4242 (python src/train.py", "kill 4242"),
    ({"port_holders": {"port": 39500, "holders": [{"port": 39500, "address": "0.0.0.0", "status": "LISTEN", "type": "tcp", "process": None}]}},
     Status.FAIL, "port 39500 is held by a process this user cannot see", "ss -ltnp 'sport = :39500'"),
    ({"gpu_holders": {"device_files": ["nvidia0"], "holders": [dict(PROC, devices=["/dev/nvidia0"])]}},
     Status.FAIL, "/dev/nvidia0 held by pid 4242", "kill 4242"),
    ({"gpu_holders": {"device_files": ["nvidia0"], "holders": [dict(PROC, pid=7, name="nvidia-persistenced", devices=["/dev/nvidia0"])]}},
     Status.PASS, "not held", None),
])
def test_resources_verdicts(facts, status, text, fix):
    args = {"shm": SHM_OK, "output_dir": NO_OUTPUT_DIR, "port_holders": NO_HOLDERS, "gpu_holders": NO_GPU_HOLDERS, "profile": GPU, **facts}
    result = resources(**args)
    assert result.status is status, result
    assert text in result.summary
    if fix:
        assert fix in result.remediation
        assert "pkill" not in result.remediation and "killall" not in result.remediation
    assert paste_problems(result.remediation) == [], result.remediation
    assert all(f.actor is not None for f in result.findings), result.findings


def test_each_resources_rule():
    small = host_rules.shm_big_enough({**SHM_OK, "total_bytes": 1 << 30}, GPU)
    assert small.cause == "host.shm_small" and small.actor is Actor.NODE and "remount,size=16G" in small.fix
    assert host_rules.shm_big_enough(SHM_OK, GPU) is None
    room = {"configured": True, "path": "/ckpt", "setting": "checkpoint_dir", "writable": True, "free_bytes": GIB}
    assert "checkpoint_dir /ckpt has only 1.0 GiB" in host_rules.output_dir_has_room(room).message
    assert host_rules.output_dir_has_room({**room, "writable": False}) is None  # lora.output_dir says why
    held = {"port": 39500, "holders": [{"port": 39500, "process": PROC}, {"port": 39501, "process": PROC}]}
    [port] = host_rules.rendezvous_port_not_held(held)
    assert port.cause == "net.port_held" and port.fix.startswith("kill 4242")
    gpu = {"holders": [dict(PROC, devices=["/dev/nvidia0"]), dict(PROC, pid=7, name="nv-hostengine", devices=["/dev/nvidia1"])]}
    [leftover] = host_rules.gpus_not_held(gpu)
    assert leftover.cause == "host.gpu_held" and "/dev/nvidia0" in leftover.message
    for f in (small, port, leftover):
        assert paste_problems(f.fix) == []
