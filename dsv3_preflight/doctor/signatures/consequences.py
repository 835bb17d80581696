"""Consequences without a class: what ranks print once something else failed (a peer gone, a process's exit code, a launcher passing a stop on). A log with only these is a failure whose cause is not recognised.

Keyword records (:class:`.record.Signature`); their place in the table is stated in :mod:`.order`.
"""
from __future__ import annotations

from .record import Decode, S, Signature
from .shared import ALLREDUCE_FIX, LABELS

SIGNATURES: tuple[Signature, ...] = (
    S(id="nccl.remote_error", cls=None, kind="symptom", needles=(b"ncclRemoteError", b"remote process exited or there was a network error"),
      pattern=r"ncclRemoteError|remote process exited or there was a network error",
      title="NCCL remote error: a peer exited or the network failed",
      root_cause="A peer rank exited (see its own first error) or the inter-node network dropped the connection.",
      fix=ALLREDUCE_FIX, check="dist.allreduce", tier=4,
      example="ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.",
      source="https://github.com/NVIDIA/nccl/issues/2076"),
    S(id="net.connection_closed", cls=None, kind="symptom", needles=(b"Connection closed by", b"Connection reset by peer", b"Broken pipe", b"Call to recv from",
                                                                   b"Connection closed by peer", b"Call to send to", b"Socket unexpectedly closed",
                                                                   b"Socket closed [", b"Call to recv failed"),
      pattern=r"Connection closed by (?:remote )?peer ?(?P<peer>\S*?)\.?(?:\s|$)|Connection reset by peer|Broken pipe"
      r"|Call to (?:recv from|send to) (?P<peer2>\S+) failed|Socket (?:unexpectedly )?closed (?P<peer3>\[[^\]]+\]:\d+)"
      r"|Call to recv failed",  # NCCL <= 2.9 include/socket.h
      title="A connection to a peer was closed[[ ({peer})]]",
      root_cause="The peer's process went away (crash, OOM kill) or the connection was reset by the network.",
      fix=ALLREDUCE_FIX, check="dist.allreduce", tier=4,
      example="a100-st-p4d24xlarge-22:183006:183220 [1] misc/socket.cc:518 NCCL WARN Net : Call to recv from 10.200.84.247<58355> failed : Broken pipe",
      source="https://github.com/NVIDIA/nccl/issues/795",
      decode=(Decode(kind="peer_crashed",
                     pattern=r"Connection closed by peer \[?(?P<peer>[^\]\s]+)\]?:(?P<port>\d+)",
                     cause=lambda m: f"the peer at {m['peer']} closed the connection mid-collective: that rank crashed or was ended",
                     remediation=lambda m: f"# read the log of the rank on {m['peer']}: its own error is the cause",
                     actor="node", cause_id="collective.peer_crashed"),)),
    S(id="cuda.driver_shutting_down", cls=None, kind="symptom", needles=(b"driver shutting down",),
      pattern=r"driver shutting down",
      title="CUDA was already shutting down in this process",
      root_cause="The process was exiting (its CUDA context being destroyed) while NCCL or torch still used the GPU. After a "
      "finished run that is teardown noise (destroy the process group before exiting); otherwise the process was "
      "leaving because of an earlier error, which is the cause.", fix="", check=None, tier=4,
      example="user:16899:16961 [32735] include/alloc.h:250 NCCL WARN Cuda failure 'driver shutting down'",
      source="https://github.com/NVIDIA/nccl-tests/issues/188 (CUDA error string of cudaErrorCudartUnloading)", teardown=True),
    S(id="nccl.proxy_teardown", cls=None, kind="symptom", needles=(b"Failed to execute operation Close", b"[Service thread] Accept failed",
                                                                   b"Could not receive type from localRank"),
      pattern=r"\[Proxy Service \d+\] Failed to execute operation Close|\[Service thread\] Accept failed"
      r"|\[Service thread\] Could not receive type from localRank (?P<local_rank>\d+)",
      title="NCCL's proxy service lost a local rank while closing[[ (local rank {local_rank})]]",
      root_cause="A process of this node closed or left its NCCL communicator (it exited, or aborted after an error) while the "
      "proxy thread still served it. After a finished run that is teardown noise (destroy the process group before "
      "exiting); otherwise the error that made the process leave is the cause.",
      fix=ALLREDUCE_FIX, check="dist.allreduce", tier=4,
      example="0bc8f5b83646:2374:2994 [0] proxy.cc:1521 NCCL WARN [Proxy Service 0] Failed to execute operation Close from rank 0, retcode 3",
      source="https://github.com/deepseek-ai/DeepEP/issues/41 (NCCL src/proxy.cc)", teardown=True),
    S(id="nccl.proxy_peer_gone", cls=None, kind="symptom", needles=(b"Proxy Call to rank", b"Saw abortFlag", b"Attempt to use communicator before"),
      pattern=r"Proxy Call to rank (?P<rank_a>\d+) failed"
      r"|Saw abortFlag while waiting for proxyThread|Attempt to use communicator before the previous operation returned ncclSuccess",
      title="NCCL's proxy lost a local rank[[ (rank {rank_a})]]",
      root_cause="The process of a local rank, or its communicator, went away after an earlier error: that error is the cause.",
      fix=ALLREDUCE_FIX, check="dist.allreduce", tier=4,
      example="gpu-node07:24817:24901 [3] proxy.cc:808 NCCL WARN Proxy Call to rank 3 failed (Setup)",
      source="NCCL src/proxy.cc, src/init.cc (format strings 2.12-2.17)"),
    S(id="python.keyboard_interrupt", cls=None, kind="symptom", needles=(b"KeyboardInterrupt",),
      pattern=r"^\W*" + LABELS + r"KeyboardInterrupt\b",
      title="A process was interrupted (KeyboardInterrupt: Ctrl-C or SIGINT)",
      root_cause="Someone (or a scheduler) sent SIGINT: the run was stopped, it did not fail by itself. If it was stopped because "
      "it hung, `dsv3-preflight doctor --hung` names the phase it hung in.", fix="", check=None, tier=4,
      example="[rank1]: KeyboardInterrupt",
      source="CPython's SIGINT handler; produced here by Ctrl-C on a torchrun job", stop="signal"),
    S(id="slurm.step_cancelled", cls=None, kind="symptom", needles=(b" CANCELLED AT ",),
      pattern=r"\*\*\* (?:STEP|JOB) (?P<step>\S+) ON (?P<where>\S+) CANCELLED AT \S+ (?:DUE TO (?P<why>TIME LIMIT|PREEMPTION) )?\*\*\*",
      title="Slurm cancelled job step {step} on {where}[[ (due to {why})]]",
      root_cause="Slurm stopped the step (its time limit, a preemption, or scancel): every task got SIGTERM, then SIGKILL. "
      "Nothing in the run failed by then unless an error comes before this line.", fix="", check=None, tier=4,
      example="slurmstepd: error: *** STEP 1234.0 ON gpu-node-1 CANCELLED AT 2024-05-01T10:00:00 DUE TO TIME LIMIT ***",
      source="Slurm's slurmstepd (src/slurmd/slurmstepd/req.c: '*** %s ON %s CANCELLED AT %s DUE TO TIME LIMIT ***')",
      stop="signal"),
    S(id="elastic.signal_exception", cls=None, kind="symptom", needles=(b"SignalException", b"got signal: ", b"death signal"),
      pattern=r"SignalException: Process (?P<pid>\d+) got signal: (?P<sig>\d+)|Process (?P<pid2>\d+) got signal: (?P<sig2>\d+)"
      r"|(?:\b(?P<pid3>\d+) \S*api\.py:\d+\] )?Received (?P<sig3>\d+) death signal",
      title="The launcher[[ (pid {pid})]] received signal {sig}",
      root_cause="torchrun itself was sent a signal (15: SIGTERM from a scheduler's time limit or preemption, a user's kill; "
      "2: Ctrl-C) and stopped its workers.", fix="", check=None, tier=4,
      example="torch.distributed.elastic.multiprocessing.api.SignalException: Process 1234 got signal: 15",
      source="torch/distributed/elastic/multiprocessing/api.py (_terminate_process_handler)", stop="signal"),
    S(id="cluster.process_died", cls=None, kind="symptom", needles=(b"Some Ray subprocesses exited unexpectedly", b"has been marked dead because the detector",
                                                                    b"scheduler is dead", b"This might cause deadlock in distributed execution",
                                                                    b"peer process has unexpectedly disconnected", b"has lost communication with a remote daemon",
                                                                    b"exiting improperly", b"Horovod has been shut down"),
      pattern=r"Some Ray subprocesses exited unexpectedly|has been marked dead because the detector has missed too many heartbeats"
      r"|Rank \d+ scheduler is dead|Error executing method (?P<method>\S+?)\.? This might cause deadlock in distributed execution"
      r"|An MPI communication peer process has unexpectedly disconnected|(?:ORTE|PRTE) has lost communication with a remote daemon"
      r"|(?:mpirun|prterun) has exited due to process rank \d+ with PID \d+ on|exiting improperly"
      r"|Horovod has been shut down\. This was caused by an exception on one of the ranks",
      title="A Ray/vLLM/SGLang process of the job died[[ (in {method})]]",
      root_cause="A raylet, a node or a worker process went away; what it printed before (or its own log: raylet.err, the "
      "worker's traceback) holds the cause.", fix="", check=None, tier=4,
      example="2023-03-03 05:15:30,774\tWARNING worker.py:1866 -- The node with node id: 9426f4 and address: 10.130.0.113 and "
      "node name: 10.130.0.113 has been marked dead because the detector has missed too many heartbeats from it.",
      source="ray src/ray/gcs/gcs_server/gcs_node_manager.cc, python/ray/scripts/scripts.py; vllm worker_base.py; sglang engine"),
    S(id="elastic.closing_signal", cls=None, kind="symptom", needles=(b"closing signal SIGTERM", b"Killing subprocess", b"closing signal SIGINT"),
      pattern=r"Sending process (?P<pid>\d+) closing signal SIG\w+|Killing subprocess (?P<pid2>\d+)",
      title="The launcher stopped the other ranks",
      root_cause="torchrun/deepspeed stop every rank once one failed: a consequence of the first failure.",
      fix="", check=None, tier=4,
      example="WARNING:torch.distributed.elastic.multiprocessing.api:Sending process 3710366 closing signal SIGTERM",
      source="https://github.com/codefuse-ai/MFTCoder/issues/31 (torch/distributed/elastic/multiprocessing/api.py)", stop="relay"),
    S(id="process.native_crash", cls=None, kind="symptom", needles=(b"exitcode: -11", b"exitcode: -6", b"exitcode: -4", b"exitcode: -8",
                                                                   b"exitcode  : -", b"received by PID", b"Fatal Python error: ", b"(core dumped)",
                                                                   b"exit code 139", b"exit code 134", b"exitcode: 139", b"exitcode: 134"),
      pattern=r"failed \(exitcode: -(?P<sig>11|6|4|8)\) local_rank: (?P<local_rank>\d+)"
      r"|exitcode\s*: -(?P<sig2>11|6|4|8) \(pid: \d+\)|Signal (?P<sig3>11|6|4|8) \(SIG\w+\) received by PID"
      r"|Fatal Python error: (?P<what>Segmentation fault|Aborted|Floating point exception|Illegal instruction)"
      r"|\d+ (?P<what2>Segmentation fault|Aborted|Floating point exception|Illegal instruction)\s+\(core dumped\)"
      r"|(?:exit code|exitcode:) (?P<code>139|134)\b",
      title="A rank crashed in native code[[ (signal {sig})]][[: {what}]][[ (exit code {code})]]",
      root_cause="The process died of a fatal signal (11 SIGSEGV, 6 SIGABRT, 4 SIGILL, 8 SIGFPE; exit code 139 or 134 from a "
      "shell): a crash in native code, not a Python error. Usual culprits: a compiled extension (flash-attn, apex, "
      "DeepSpeed ops, bitsandbytes) built against another torch or CUDA, a CUDA/NCCL library fault, a C++ abort. Rerun "
      "that rank with PYTHONFAULTHANDLER=1 to get every thread's stack at the crash; a core dump names the library.",
      fix="", check=None, tier=3,
      example="E1124 01:27:53.825000 13186 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: -11) "
      "local_rank: 1 (pid: 13240) of binary: /work/main/.venv/bin/python",
      source="torch/distributed/elastic/multiprocessing/api.py and errors/__init__.py (exitcode, 'Signal 11 (SIGSEGV) "
      "received by PID'); CPython faulthandler; bash job status; produced here by a rank that SIGSEGVs itself"),
    # our own launcher (launch/ray_launch.py) closing a run: the node whose torchrun failed first, the others stopped
    S(id="launch.cluster_changed", cls="port_rendezvous", kind="cause", needles=(b"Ray cluster changed after the preflight",),
      pattern=r"^dsv3-preflight launch: NO-GO: the Ray cluster changed after the preflight \(ranks then (?P<then>\{[^}]*\}), "
      r"now (?P<now>\{[^}]*\})\)",
      title="The Ray cluster changed between the preflight and the launch (node ranks then {then}, now {now})",
      root_cause="`launch --all-nodes` starts torchrun only on the nodes the preflight judged, with the ranks it gave them; a "
      "node joined or left Ray (a restart, a node lost, a late `ray start`) between the two, so nothing was started. "
      "A node that comes and goes is the node to look at.",
      fix="ray status    # the nodes alive now; then on a node that left: ray start --address \"${RAY_HEAD:?head address}\"\n"
      "dsv3-preflight run --all-nodes --only cluster.node_count    # the cluster the preflight sees now",
      check="cluster.node_count", tier=1,
      example="dsv3-preflight launch: NO-GO: the Ray cluster changed after the preflight (ranks then {'a1f3': 0, '9c2e': 1}, "
      "now {'a1f3': 0}); torchrun not started",
      source="launch/ray_launch.py (cluster_changed_line)"),
    S(id="launch.node_failed_first", cls=None, kind="symptom", needles=(b"failed first (",),
      pattern=r"^dsv3-preflight launch: \[node (?P<node_rank>\d+) (?P<host>[^\]\s]+)\] failed first \((?P<why>[^)]*)\)",
      title="dsv3-preflight launch: node {host} failed first ({why})",
      root_cause="The launcher saw this node's torchrun fail first and stopped the other nodes; the node's own lines before it "
      "hold the cause (its log: reports/launch-*-node{node_rank}-{host}.log).", fix="", check=None, tier=4,
      example="dsv3-preflight launch: [node 1 gpu-node-1] failed first (torchrun exited with 1); stopped the others: "
      "[node 0 gpu-node-0]; exit 11",
      source="launch/ray_launch.py (the launch's closing line)"),
    S(id="elastic.worker_failed", cls=None, kind="symptom", needles=(b"failed (exitcode:", b"exits with return code", b"exited with exit code",
                                                                   b"non-zero exit code", b"non-zero status", b"Exited with exit code",
                                                                   b"non-zero exit status"),
      pattern=r"failed \(exitcode: (?P<exitcode>-?\d+)\) local_rank: (?P<local_rank>\d+)|exits with return code = (?P<exitcode2>-?\d+)"
      r"|[Ee]xited with exit code (?P<exitcode3>-?\d+)|non-zero (?:exit code|status)"
      r"|returned non-zero exit status (?P<exitcode4>-?\d+)",  # torch.distributed.launch <= 1.8 (CalledProcessError)
      title="A rank exited[[ with code {exitcode}]]",
      root_cause="The launcher saw a rank exit; that rank's own error above is the cause.", fix="", check=None, tier=4,
      example="[2024-05-08 08:47:31,877] torch.distributed.elastic.multiprocessing.api: [ERROR] failed (exitcode: 1) local_rank: 2 (pid: 5939) of binary: /usr/bin/python",
      source="https://github.com/xiuqhou/Salience-DETR/issues/4"),
    S(id="process.aborted", cls=None, kind="symptom", needles=(b"terminate called after throwing", b"what():"),
      pattern=r"terminate called after throwing an instance of|^\s*what\(\):\s",
      title="A process aborted on an uncaught C++ exception",
      root_cause="The C++ runtime aborts the process with the exception printed on the 'what():' line; the exception itself is "
      "the failure.", fix="", check=None, tier=4,
      example="terminate called after throwing an instance of 'c10::DistBackendError'",
      source="https://github.com/NVIDIA/Megatron-LM/issues/935 (libstdc++ verbose terminate handler)"),
    S(id="nccl.comm_aborted", cls=None, kind="symptom", needles=(b"communicator was aborted",),
      pattern=r"NCCL communicator was aborted(?: on rank (?P<rank_a>\d+))?",  # torch <= 1.9: no rank
      title="NCCL communicator aborted[[ on rank {rank_a}]]",
      root_cause="The communicator was torn down after an earlier error or timeout (the reason follows on the same line in "
      "torch 1.x; otherwise see the first error).", fix=ALLREDUCE_FIX, check="dist.allreduce", tier=4,
      example="RuntimeError: NCCL communicator was aborted on rank 3.",
      source="torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp"),
    S(id="elastic.child_failed", cls=None, kind="symptom", needles=(b"ChildFailedError", b" FAILED"),
      pattern=r"ChildFailedError|^\s*[\w./-]+ FAILED\s*$",   # and the banner of its summary: '<entrypoint> FAILED'
      title="torchrun: a child process failed (ChildFailedError)",
      root_cause="torchrun's summary of a failed worker; its 'Root Cause (first observed failure)' block names the rank.",
      fix="", check=None, tier=4,
      example="torch.distributed.elastic.multiprocessing.errors.ChildFailedError:",
      source="https://github.com/meta-llama/llama/issues/706"),
)
