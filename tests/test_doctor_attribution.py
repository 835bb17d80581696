"""Node and rank come from the prefixes real launchers and libraries print (sources in each row)."""
import pytest

from dsv3_preflight.doctor.attribution import origin_of

ROWS = [
    # NCCL prefix host:pid:tid [cudaDev] (https://github.com/NVIDIA/nccl/issues/1405)
    ("kp-ddp-worker-0:3468:3905 [4] ib_plugin.c:1615 NCCL WARN NET/IB : Got completion from peer", "kp-ddp-worker-0", None, None, 4),
    # torch 2.x rank prefix and watchdog (https://github.com/hiyouga/LlamaFactory/issues/6269)
    ("[rank4]:[E1206 18:44:12.755262105 ProcessGroupNCCL.cpp:607] [Rank 4] Watchdog caught", None, 4, None, None),
    ("[rank3]:[E1206 18:44:13.275514180 ProcessGroupNCCL.cpp:1664] [PG 1 Rank 3] Exception", None, 3, None, None),
    # DeepSpeed pdsh launcher (https://github.com/deepspeedai/DeepSpeed/issues/6737)
    ("worker-5: [rank22]:   File \"/nvfile-data/main_new.py\", line 307, in <module>", "worker-5", 22, None, None),
    # Open MPI / Horovod (https://github.com/horovod/horovod/issues/3929)
    ("[1,2]<stdout>:smc-gpu-03:29880:30398 [0] init.cc:497 NCCL WARN Duplicate GPU detected", "smc-gpu-03", 2, None, 0),
    # Ray worker (https://github.com/foundation-model-stack/fastsafetensors/issues/36)
    ("(EngineCore_DP0 pid=1088) (RayWorkerWrapper pid=285, ip=192.168.177.12) spark2:285:285 [0] NCCL INFO comm", "spark2", None, None, 0),
    ("(RayTrainWorker pid=423719, ip=172.16.0.2) Initializing distributed: GLOBAL_RANK: 1, MEMBER: 2/2", "172.16.0.2", None, None, None),
    # torchrun --tee prefix with torch rank prefix
    ("[default5]:[rank13]: torch.cuda.OutOfMemoryError: CUDA out of memory.", None, 13, 5, None),
    # journal (https://github.com/dstackai/dstack/issues/2348)
    ("Feb 24 09:28:28 ip-172-31-92-157 nv-fabricmanager[1507]: fabric manager NVIDIA GPU driver", "ip-172-31-92-157", None, None, None),
    # a glog timestamp is not a host:pid:tid prefix
    ("[E616 02:08:15.931416442 socket.cpp:1023] [c10d] The client socket has timed out", None, None, None, None),
]


@pytest.mark.parametrize("line,node,rank,local_rank,device", ROWS, ids=[r[0][:30] for r in ROWS])
def test_origin_comes_from_the_line_prefixes(line, node, rank, local_rank, device):
    o = origin_of(line)
    assert (o.node, o.rank, o.local_rank, o.device) == (node, rank, local_rank, device)
