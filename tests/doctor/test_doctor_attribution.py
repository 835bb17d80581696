"""Node and rank come from the prefixes real launchers and libraries print (sources in each row)."""
import pytest

from dsv3_preflight.doctor.attribution import origin_of, strip_launcher

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


SRUN_AND_MORE = [
    # srun --label (https://github.com/clessig/atmorep/issues/77, dev corpus pci_rank_dup_011)
    ("3: Duplicate GPU detected : rank 3 and rank 0 both on CUDA device 3000", None, 3, None, None),
    # Open MPI --tag-output (https://github.com/aws/aws-k8s-tester/pull/503)
    ("[1,0]<stdout>:# Out of bounds values : 0 OK", None, 0, None, None),
    # pdsh / DeepSpeed multi-node without a rank prefix (https://github.com/deepspeedai/DeepSpeed/issues/2899)
    ("gpu-q-13: torch.cuda.OutOfMemoryError: CUDA out of memory.", "gpu-q-13", None, None, None),
    # NCCL prefix after a timestamp (https://github.com/NVIDIA/nccl/issues/1488 style)
    ("[2025-05-10 23:09:41] bm-h100-02:630335:630409 [2] transport/nvls.cc:254 NCCL WARN Cuda failure 1", "bm-h100-02", None, None, 2),
    # kubectl logs --prefix over a PyTorchJob's pods (kubectl's own format: [pod/NAME/CONTAINER])
    ("[pod/dsv3-lora-worker-1/pytorch] [rank9]:[E1123 10:00:00.1 ProcessGroupNCCL.cpp:607] [Rank 9] Watchdog caught",
     "dsv3-lora-worker-1", 9, None, None),
    # docker compose v2 and v1 service prefixes
    ("trainer-2  | [rank1]: torch.cuda.OutOfMemoryError: CUDA out of memory.", "trainer-2", 1, None, None),
    ("node_1    | Traceback (most recent call last):", "node_1", None, None, None),
    # a table row or a logging separator is not a compose prefix
    ("loss   | 0.3412", None, None, None, None),
    ("2020-08-03T10:20:25 | mmf.trainers.core.training_loop: Starting training...", None, None, None, None),
    # an exception name followed by ": " is not a host
    ("RuntimeError: CUDA error: invalid device ordinal", None, None, None, None),
    ("Error: rank 27 and rank 19 both on CUDA device 53000", None, None, None, None),
]


@pytest.mark.parametrize("line,node,rank,local_rank,device", SRUN_AND_MORE, ids=[r[0][:30] for r in SRUN_AND_MORE])
def test_more_launcher_prefixes(line, node, rank, local_rank, device):
    o = origin_of(line)
    assert (o.node, o.rank, o.local_rank, o.device) == (node, rank, local_rank, device)


OUR_LAUNCHER = [
    # launch/ray_launch.py's prefix: the node's name, and the torchrun line under it read as usual (recorded in
    # tests/launch/test_launch_ray.py's two-node lab)
    ("[node 1 lab-node1] [rank1]: ValueError: bad", "[rank1]: ValueError: bad", "lab-node1", 1),
    ("[node 0 lab-node0] 1: Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 3000",
     "1: Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 3000", "lab-node0", 1),
    # the launch's closing line keeps its text and names the node
    ("dsv3-preflight launch: [node 1 lab-node1] failed first (torchrun exited with 1); stopped the others: [node 0 lab-node0]; exit 11",
     "dsv3-preflight launch: [node 1 lab-node1] failed first (torchrun exited with 1); stopped the others: [node 0 lab-node0]; exit 11",
     "lab-node1", None),
    ("[node] not ours", "[node] not ours", None, None),
]


@pytest.mark.parametrize("line,rest,node,rank", OUR_LAUNCHER, ids=[r[0][:30] for r in OUR_LAUNCHER])
def test_our_launchers_node_prefix_is_taken_off_and_names_the_node(line, rest, node, rank):
    text, launched_on = strip_launcher(line)
    assert (text, launched_on, origin_of(text).rank) == (rest, node, rank)


TIMES = [
    ("[rank0]:[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog", (12, 6, 18 * 3600 + 44 * 60 + 12.715298746)),
    ("E0325 20:57:27.620000 2606 site-packages/torch/distributed/elastic/multiprocessing/api.py:869] failed", (3, 25, 75447.62)),
    ("[2024-05-08 08:47:31,877] torch.distributed.elastic.multiprocessing.api: [ERROR] failed", (5, 8, 31651.877)),
    ("2020-08-03T10:20:25 | mmf.trainers.core.training_loop: Starting training...", (8, 3, 37225.0)),
    ("09/04/2024 02:49:57 - INFO - __main__ - Distributed environment: MULTI_GPU", (9, 4, 10197.0)),
    ("ERROR 05-29 04:08:22 worker_base.py:145] RuntimeError: Gloo connectFullMesh failed", (5, 29, 14902.0)),
    ("Feb 24 09:28:28 ip-172-31-92-157 nv-fabricmanager[1507]: fabric manager", (2, 24, 34108.0)),
    ("[Sun Mar 30 08:24:00 2025] Out of memory: Killed process 7899 (python)", (3, 30, 30240.0)),
    ("[default0]:15:44:10 SUCCESS Step 0 | Time: 53.67s", (None, None, 56650.0)),
    ("[2059991.491542] Out of memory: Killed process 25315 (python3)", None),   # dmesg uptime: not wall-clock
    ("RuntimeError: CUDA error: out of memory", None),
]


@pytest.mark.parametrize("line,expected", TIMES, ids=[t[0][:30] for t in TIMES])
def test_timestamps_of_the_common_formats(line, expected):
    from dsv3_preflight.doctor.attribution import time_of

    got = time_of(line)
    if expected is None:
        assert got is None
    else:
        assert (got.month, got.day) == expected[:2] and abs(got.seconds - expected[2]) < 1e-6


def test_kubectl_prefixed_pods_name_the_first_failing_node(tmp_path):
    from dsv3_preflight.doctor import triage

    log = tmp_path / "job.log"   # kubectl logs -l job-name=dsv3-lora --prefix, interleaved as kubectl prints it
    log.write_text(
        "[pod/dsv3-lora-worker-0/pytorch] [rank0]:[E1123 10:10:00.100 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught "
        "collective operation timeout: WorkNCCL(SeqNum=88, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) "
        "ran for 600412 milliseconds before timing out.\n"
        "[pod/dsv3-lora-worker-1/pytorch] [rank9]:[W1123 10:00:01.000 init.cc:1] torch.cuda.OutOfMemoryError: CUDA out of "
        "memory. Tried to allocate 2.00 GiB. GPU 1 has a total capacity of 79.10 GiB of which 1.06 GiB is free.\n")
    doc = triage([str(log)])
    assert (doc["cause_class"], doc["first_failure"]["node"], doc["first_failure"]["rank"]) == ("gpu_oom", "dsv3-lora-worker-1", 9)
    hang = next(f for f in doc["findings"] if f["id"] == "nccl.watchdog_timeout")
    assert hang["role"] == "consequence" and hang["node"] == "dsv3-lora-worker-0"
