"""``nccl_hang``: a collective that never completes (watchdog timeouts, desynchronised ranks).

Keyword records (:class:`.record.Signature`); their place in the table is stated in :mod:`.order`.
"""
from __future__ import annotations

from .record import Decode, S, Signature
from .shared import ALLREDUCE_FIX, LABELS

SIGNATURES: tuple[Signature, ...] = (
    S(id="nccl.mismatched_collective", cls="nccl_hang", kind="cause", needles=(b"Mismatched collective", b"mismatch between collectives", b"message truncated",
                                                                              b"Message truncated", b"waiting for remainder of ranks",
                                                                              b"collective mismatch around rank", b"op.preamble.length"),
      pattern=r"Mismatched collective detected.*?rank (?P<rank_a>\d+)|Detected mismatch between collectives on ranks"
      r"|[Mm]essage truncated ?: receiv\w* (?P<got>\d+) bytes instead of (?P<want>\d+)"
      r"|submitted to be reduced, gathered or broadcasted by subset of ranks and are waiting for remainder of ranks"
      r"|may be caused by a collective mismatch around rank (?P<rank_a2>\d+)"  # NCCL 2.4-2.6 init.cc
      r"|op\.preamble\.length <= op\.nbytes",  # gloo tcp/pair.cc: a peer sent more than this rank posted
      title="Ranks called different collectives (desynchronised)",
      root_cause="Ranks issued collectives in a different order or with different sizes (a rank skipped a step, a "
      "data-dependent branch, uneven batches), so the collective can never complete.",
      fix="export TORCH_DISTRIBUTED_DEBUG=DETAIL NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=COLL    # names the first mismatching call\n"
      "# make every rank run the same collectives (same number of batches, no rank-dependent branches)",
      check="dist.allreduce", tier=1,
      example="init.cc:1247 NCCL WARN Mismatched collective detected, please check your collective calls at and around rank 39.",
      source="https://github.com/NVIDIA/nccl/issues/296 (NCCL src/enqueue.cc)"),
    S(id="c10d.desync_report", cls="nccl_hang", kind="cause", needles=(b"are the lagging ranks", b"joined but didn't finish collective",
                                                                      b"but didn't join collective"),
      pattern=r"ranks \[(?P<ranks>[\d, ]+)\] are the lagging ranks that caused this timeout"
      r"|\[(?P<ranks2>[\d, ]+)\] joined but didn't finish collective #(?P<seq>\d+)"
      r"|\[(?P<ranks3>[\d, ]+)\] finished collective #(?P<seq2>\d+), but didn't join collective",
      title="torch's desync report names rank(s) {ranks} as the ones the others waited for",
      root_cause="TORCH_NCCL_DESYNC_DEBUG compared the ranks' progress: rank(s) {ranks} never reached the collective the others "
      "timed out in. Their own logs hold the cause (a crash, a hang in data loading or I/O, a rank-dependent branch).",
      fix="# read the log of rank(s) {ranks} first: their last lines before the timeout\n" + ALLREDUCE_FIX,
      check="dist.allreduce", tier=2,
      example="\t - To our best knowledge, ranks [1] are the lagging ranks that caused this timeout. They never joined any collectives",
      source="torch/csrc/distributed/c10d/TraceUtils.h (analyzeMissingRanks, analyzeLaggingRanks)"),
    S(id="c10d.monitored_barrier", cls="nccl_hang", kind="symptom", needles=(b"failed to pass monitoredBarrier",),
      pattern=r"Ranks? (?P<ranks>[\d, ]+?) failed to pass monitoredBarrier",
      title="Rank(s) {ranks} never reached the barrier",
      root_cause="monitored_barrier names the ranks that did not arrive: they crashed or are stuck (their own logs hold the cause).",
      fix=ALLREDUCE_FIX, check="dist.allreduce", tier=3,
      example="RuntimeError: Rank 3 failed to pass monitoredBarrier in 1800000 ms",
      source="torch/csrc/distributed/c10d/ProcessGroupGloo.cpp (monitoredBarrier)"),
    S(id="c10d.monitored_barrier_coordinator", cls="nccl_hang", kind="symptom", needles=(b"successfully reached monitoredBarrier",),
      pattern=r"Rank (?P<rank_a>\d+) successfully reached monitoredBarrier, but received errors while waiting for send/recv from rank 0",
      title="monitored_barrier: rank 0, the coordinator, failed",
      root_cause="This rank reached the barrier but rank 0, which checks the others, failed or went away: rank 0's log holds the "
      "cause.", fix=ALLREDUCE_FIX, check="dist.allreduce", tier=3,
      example="RuntimeError: Rank 1 successfully reached monitoredBarrier, but received errors while waiting for send/recv from "
      "rank 0. Please check rank 0 logs for faulty rank.",
      source="torch/csrc/distributed/c10d/ProcessGroupGloo.cpp (monitoredBarrier)"),
    S(id="pyspy.waiting_in_collective", cls="nccl_hang", kind="suspect", needles=(b"torch/cuda/__init__.py:", b"torch/distributed/"),
      # a py-spy frame: "    synchronize (torch/cuda/__init__.py:954)", innermost first under the thread's header
      pattern=r"^" + LABELS + r"(?P<func>synchronize|wait|barrier|monitored_barrier|all_reduce\w*|all_gather\w*|reduce_scatter\w*|broadcast\w*"
      r"|all_to_all\w*|gather|scatter|reduce|recv|send|irecv|isend|batch_isend_irecv) "
      r"\((?:\S*/)?torch/(?:cuda/__init__|distributed/[\w/]+)\.py:\d+\)",
      title="A rank waits in torch's {func} (py-spy dump)",
      root_cause="py-spy shows the rank inside torch's {func}: it waits for the GPU or for peers that never joined that "
      "collective (a rank stuck elsewhere or dead, ranks out of step, a blocked link).",
      fix="# dump every rank on every node and compare: the rank that is not in the same call is the one to look at\n"
      "for pid in $(pgrep -f \"${SCRIPT:?your training script}\"); do py-spy dump --pid \"$pid\"; done\n"
      "# then run again with the collectives traced: the flight recorder names the rank that never entered\n"
      "export TORCH_DISTRIBUTED_DEBUG=DETAIL TORCH_NCCL_TRACE_BUFFER_SIZE=2000 TORCH_NCCL_DUMP_ON_TIMEOUT=1\n"
      + ALLREDUCE_FIX, check="dist.allreduce", tier=2,
      example="    synchronize (torch/cuda/__init__.py:954)",
      source="py-spy dump's frame format; corpus development excerpt xDiT#363", requires="pyspy", stall="any"),
    S(id="nccl.watchdog_timeout", cls="nccl_hang", kind="symptom", needles=(b"aught collective operation timeout", b"timed out in blocking wait"),
      pattern=r"(?:Watchdog c|C)aught collective operation timeout: WorkNCCL\((?:SeqNum=(?P<seq>\d+), )?OpType=(?P<op>\w+)"
      r"(?:.*?Timeout\(ms\)=(?P<timeout>\d+))?"
      # NCCL_BLOCKING_WAIT: work.wait() reports the same timeout (torch 1.13-2.x, three wordings)
      r"|Work WorkNCCL\((?:SeqNum=(?P<seq2>\d+), )?OpType=(?P<op2>\w+).*?timed out in blocking wait",
      title="Collective {op} timed out[[ (SeqNum {seq})]]",
      root_cause="Some rank never entered {op}[[ #{seq}]]: it crashed or is stuck elsewhere (see the first error on another rank), "
      "ranks are desynchronised, or NCCL's data connections between nodes are blocked.",
      fix="# find the rank that did not reach that collective (the first error above); then verify the data path:\n" + ALLREDUCE_FIX,
      check="dist.allreduce", tier=3,
      example="[rank1]:[E626 06:24:44.903881913 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective operation timeout: "
      "WorkNCCL(SeqNum=808, OpType=ALLREDUCE, NumelIn=9801523, NumelOut=9801523, Timeout(ms)=600000) ran for 600020 milliseconds before timing out.",
      source="https://github.com/XPixelGroup/BasicSR/issues/737 (torch ProcessGroupNCCL.cpp)",
      decode=(Decode(kind="collective_timeout",
                     pattern=r"(Watchdog caught collective operation timeout|ProcessGroupGloo.*timed out|Timed out waiting \d+ms for (send|recv) operation)",
                     cause=lambda m: "a collective started but did not complete before the timeout",
                     remediation=lambda m: "# a rank is stuck or a link is blocked mid-collective: read the other ranks' last phase in the evidence",
                     actor="network", cause_id="collective.stalled"),)),
    S(id="nccl.watchdog_hang", cls="nccl_hang", kind="symptom", needles=(b"Some NCCL operations have failed or timed out", b"Heartbeat monitor timed out",
                                                                        b"watchdog got stuck", b"collective timeout from", b"watchdog thread terminated",
                                                                        b"global timeout from another rank", b"attempting to dump debug info",
                                                                        b"detected by watchdog at work", b"Timeout at NCCL work",
                                                                        b"To avoid data inconsistency", b"dump signal from another rank",
                                                                        b"Exception raised from ncclCommWatchdog", b"Exception raised from watchdogHandler",
                                                                        b"WorkNCCL::checkTimeout"),
      pattern=r"Some NCCL operations have failed or timed out|Heartbeat monitor timed out|watchdog got stuck for \d+ seconds"
      # torch prints "from " + " rank 7": two spaces (ProcessGroupNCCL.cpp getNCCLWatchdogTimeoutErrorMsg)
      r"|collective timeout from\s+rank (?P<rank_a>\d+)|collective timeout from this local rank"
      r"|global timeout from another rank|watchdog thread terminated with exception"
      r"|Terminating the process after attempting to dump debug info|(?:timeout\)|failure) detected by watchdog at work"
      r"|Timeout at NCCL work: \d+|To avoid data inconsistency, we are taking the entire process down"
      r"|Observed flight recorder dump signal from another rank"
      # the C++ traceback torch prints under a watchdog timeout (its first line may be lost in a pasted log)
      r"|Exception raised from (?:ncclCommWatchdog|watchdogHandler) at \S*ProcessGroupNCCL|WorkNCCL::checkTimeout\(",
      title="NCCL watchdog: collectives failed or timed out",
      root_cause="A collective did not complete in time on this rank; the watchdog takes the process down.",
      fix=ALLREDUCE_FIX, check="dist.allreduce", tier=3,
      example="[rank6]:[E ProcessGroupNCCL.cpp:537] Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data.",
      source="https://github.com/deepspeedai/DeepSpeed/issues/4781 (torch ProcessGroupNCCL.cpp)"),
    S(id="gloo.recv_timeout", cls="nccl_hang", kind="symptom", needles=(b"Timed out waiting", b"Read timeout [", b"Write timeout [",
                                                                       b"Application timeout caused pair closure"),
      pattern=r"Timed out waiting (?P<ms>\d+)ms for (?:recv|send) operation to complete"
      r"|(?:Read|Write) timeout \[(?P<peer>[^\]]+)\]"  # gloo transport/tcp/pair.cc, buffer.cc
      r"|Application timeout caused pair closure",  # gloo tcp/unbound_buffer.cc: the other pairs of a timed-out context
      title="Gloo send/recv timed out",
      root_cause="A peer never sent its part of a collective: it crashed or is stuck (or ranks are desynchronised).",
      fix=ALLREDUCE_FIX, check="dist.allreduce", tier=3,
      example="RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 1800000ms for recv operation to complete",
      source="gloo/transport/tcp/unbound_buffer.cc"),
)
