"""``host_resources``: host resources (RAM and the OOM killer, disk, shared memory, ulimits, permissions).

Keyword records (:class:`.record.Signature`); their place in the table is stated in :mod:`.order`.
"""
from __future__ import annotations

from .record import S, Signature
from .shared import LABELS, SHM_FIX

SIGNATURES: tuple[Signature, ...] = (
    S(id="host.oom_killer", cls="host_resources", kind="cause", needles=(b"Out of memory: Kill", b"oom-kill", b"oom_kill", b"invoked oom-killer",
                                                                        b"Memory cgroup out of memory", b"OOMKilled", b"oom_reaper"),
      pattern=r"Out of memory: Kill(?:ed)? process (?P<pid>\d+) \((?P<comm>[^)]*)\)|oom[-_]kill(?::| event)|invoked oom-killer|Memory cgroup out of memory"
      r"|OOMKilled|oom_kill event|oom_reaper: reaped process",
      title="The kernel OOM killer killed a process[[ ({comm})]]",
      root_cause="Host RAM (or the container's memory limit) ran out and the kernel killed a rank: CPU offload, pinned memory, "
      "dataloader workers or checkpoint loading on every rank at once.",
      fix="dmesg -T | grep -i -E 'out of memory|killed process'; free -g\n"
      "# lower dataloader workers, CPU offload or pin_memory; load checkpoints on one rank; raise the container memory limit\n"
      "dsv3-preflight run --only host.resources",
      check="host.resources", tier=1,
      example="[2059991.491542] Out of memory: Killed process 25315 (python3) total-vm:53312244kB, anon-rss:31451456kB",
      source="https://github.com/pcyin/tranX/issues/41 (kernel mm/oom_kill.c)"),
    S(id="host.shared_memory", cls="host_resources", kind="cause", needles=(b"shared memory", b"(shm)", b"shm_open"),
      pattern=r"insufficient shared memory \(shm\)|out of shared memory|unable to (?:open|write to) shared memory|shared memory limit"
      r"|unable to write to file </torch_|shm_open.*(?:fail|error)"
      # torch 2.x: "RuntimeError: unable to allocate shared memory(shm) for file </torch_11690_1647861759_0>: No space left
      # on device (28)" (a worker's batch onto a full /dev/shm; produced here on a 1 MiB /dev/shm): before disk_full,
      # whose words the line also holds
      r"|unable to allocate shared memory\(shm\) for file",
      title="Shared memory (/dev/shm) exhausted by dataloader workers",
      root_cause="DataLoader workers pass batches through /dev/shm; it is too small (docker's 64 MB default) or full.",
      fix=SHM_FIX.split("\nrm -f")[0] + "\n# or set num_workers=0 to confirm", check="host.resources", tier=1,
      example="RuntimeError: DataLoader worker (pid 56811) is killed by signal: Bus error. It is possible that dataloader's workers are out of shared memory. Please try to raise your shared memory limit.",
      source="https://github.com/NVIDIA/Megatron-LM/issues/878 (torch/utils/data/_utils/signal_handling.py)"),
    S(id="host.disk_full", cls="host_resources", kind="cause", needles=(b"No space left on device", b"ENOSPC", b"StorageFull", b"Disk quota exceeded",
                                                                       b"EDQUOT", b"[Errno 28]", b"[Errno 122]"),
      pattern=r"No space left on device|ENOSPC|StorageFull|Disk quota exceeded|EDQUOT|\[Errno 28\]|\[Errno 122\]",
      title="Disk full (No space left on device)",
      root_cause="The filesystem being written (checkpoint/output dir, cache, /tmp) is full or over quota.",
      fix="df -h \"${OUTPUT_DIR:?output dir of the run}\" /tmp \"${HF_HOME:-$HOME/.cache/huggingface}\"\n"
      "dsv3-preflight run --only host.resources,lora.output_dir",
      check="host.resources", tier=1,
      example="safetensors_rust.SafetensorError: Error while serializing: IoError(Os { code: 28, kind: StorageFull, message: \"No space left on device\" })",
      source="https://github.com/hiyouga/LlamaFactory/issues/5155 (strerror(ENOSPC))"),
    # a file the run must write that the filesystem refuses: read-only (EROFS) or not the run's to write (EACCES). The
    # three writers a run saves with say it each in their own words; produced here by torch.save, safetensors' save_file
    # and os.makedirs onto a tmpfs mounted read-only, and as an unprivileged user into root's directory:
    # "RuntimeError: [enforce fail at inline_container.cc:747] . open file failed with strerror: Read-only file system",
    # "SafetensorError: Error while serializing: I/O error: Permission denied (os error 13) at path \"/out/.tmpX\"",
    # "OSError: [Errno 30] Read-only file system: '/out/checkpoint-50'" (PermissionError, [Errno 13], likewise)
    S(id="host.read_only_filesystem", cls="host_resources", kind="cause", needles=(b"Read-only file system", b"EROFS"),
      # torch's "open file failed with strerror: Read-only file system" is the plain alternative
      pattern=r"\[Errno 30\] Read-only file system: '(?P<path>[^']+)'"
      r"|Read-only file system \(os error 30\)(?: at path \"(?P<path2>[^\"]+)\")?|Read-only file system|\bEROFS\b",
      title="A write was refused: the filesystem is read-only[[: {path}]]",
      root_cause="The run writes (a checkpoint, the adapter, its output dir) onto a filesystem mounted read-only: a container "
      "volume mounted :ro, a read-only export of a shared filesystem, or a disk the kernel remounted read-only after "
      "I/O errors (then dmesg says so, and the node's administrator must repair it or drain the node).",
      fix="awk '$4 ~ /(^|,)ro(,|$)/ {print $2, $3, $4}' /proc/mounts    # this node's read-only mounts: is the output dir "
      "under one?\n"
      "dmesg -T | grep -i -E 'remount|read-only|I/O error' | tail -n 20    # a disk the kernel remounted after errors: "
      "its administrator repairs it\n"
      "mkdir -p \"${OUTPUT_DIR:?a writable directory on a node-local disk}\"    # then pass it to the trainer as "
      "--output_dir\n"
      "dsv3-preflight run --only lora.output_dir --output-dir \"$OUTPUT_DIR\"    # the output dir must be writable "
      "before launch",
      check="lora.output_dir", tier=1,
      example="OSError: [Errno 30] Read-only file system: '/out/checkpoint-50'",
      source="strerror(EROFS) as Python (OSError), torch (caffe2/serialize/inline_container.cc, PyTorchStreamWriter) and "
      "safetensors (io::Error) print it; produced here on a tmpfs mounted read-only"),
    S(id="host.permission_denied", cls="host_resources", kind="cause", needles=(b"[Errno 13] Permission denied: ",
                                                                               b"open file failed with strerror: Permission denied",
                                                                               b"Permission denied (os error 13)"),
      pattern=r"\[Errno 13\] Permission denied: '(?P<path>[^']+)'|open file failed with strerror: Permission denied"
      r"|Permission denied \(os error 13\)(?: at path \"(?P<path2>[^\"]+)\")?",
      title="A file could not be opened: permission denied[[: {path}]]",
      root_cause="The run's user may not write (or read) that file or its directory: the output dir or the model dir belongs to "
      "another user (a container running as another uid than the volume's owner, a shared filesystem squashing root to "
      "nobody), or its mode leaves no write bit for the run.",
      fix="id    # the user the run writes as, in the container or job that runs it\n"
      "ls -ld -- [[{path}||\"${OUTPUT_DIR:?output dir of the run}\"]] \"$(dirname -- [[{path}||\"$OUTPUT_DIR\"]])\"    "
      "# owner and mode, of it and of its directory\n"
      "dsv3-preflight run --only lora.output_dir    # the output dir must be writable before launch",
      check="lora.output_dir", tier=1,
      example="PermissionError: [Errno 13] Permission denied: '/out/checkpoint-50'",
      source="strerror(EACCES) as Python (PermissionError), torch (inline_container.cc) and safetensors (io::Error) print it; "
      "produced here as an unprivileged user saving into root's directory"),
    S(id="host.too_many_open_files", cls="host_resources", kind="cause", needles=(b"Too many open files", b"EMFILE", b"[Errno 24]", b"get errno 2"),
      pattern=r"Too many open files|EMFILE|\[Errno 24\]|socketTryAccept: get errno 2[34] ",  # NCCL 2.16-2.17
      title="Too many open files (ulimit -n)",
      root_cause="The process hit its open-file limit (dataloader workers sharing tensors by file descriptor, many sockets).",
      fix="ulimit -n    # raise it: ulimit -n 1048576 (or LimitNOFILE= in the service / container)\n"
      "# or in the script: torch.multiprocessing.set_sharing_strategy('file_system')",
      check="host.resources", tier=1,
      example="RuntimeError: Too many open files. Communication with the workers is no longer possible. Please increase the limit using `ulimit -n` in the shell",
      source="https://github.com/SCIInstitute/ShapeWorks/issues/1556 (torch/utils/data/dataloader.py)"),
    S(id="host.cpu_memory", cls="host_resources", kind="cause", needles=(b"can't allocate memory", b"bad_alloc", b"MemoryError", b"Cannot allocate memory",
                                                                        b"cannot allocate memory", b"[Errno 12]", b"malloc", b"for an array with shape"),
      pattern=r"DefaultCPUAllocator: can't allocate memory|std::bad_alloc|(?<!\w)MemoryError\b|[Cc]annot allocate memory|\[Errno 12\]"
      r"|Unable to allocate [\d.]+ ?[KMGTPE]?i?B for an array with shape"   # numpy's _ArrayMemoryError
      r"|Failed to malloc \d+ bytes|malloc\(size=\d+\) returned null|malloc of \d+ bytes failed",  # NCCL include/alloc.h
      title="Host memory allocation failed",
      root_cause="A rank could not allocate host RAM: CPU offload, checkpoint loading on every rank, or too many dataloader workers.",
      fix="free -g; dmesg -T | grep -i -E 'out of memory|killed process' | tail\n"
      "# reduce CPU offload or workers, load checkpoints on one rank, or raise the container memory limit\n"
      "dsv3-preflight run --only host.resources",
      check="host.resources", tier=1,
      example="RuntimeError: [enforce fail at alloc_cpu.cpp:83] err == 0. DefaultCPUAllocator: can't allocate memory: you tried to allocate 2147483648 bytes.",
      source="torch c10/core/impl/alloc_cpu.cpp; numpy/_core/_exceptions.py (_ArrayMemoryError)"),
    S(id="host.ulimit", cls="host_resources", kind="cause", needles=(b"RLIMIT_MEMLOCK", b"memlock", b"can't start new thread", b"Resource temporarily unavailable",
                                                                    b"pthread_create", b"Thread creation failed", b"RLIMIT_NPROC"),
      # libgomp (torch's OpenMP threads, at the first parallel op) under a low thread/pids limit: "libgomp: Thread
      # creation failed: Resource temporarily unavailable", produced here with RLIMIT_NPROC 4; OpenBLAS's
      # "blas_thread_init: pthread_create failed for thread 1 of 8" and "RLIMIT_NPROC 4 current, 4 max"
      pattern=r"RLIMIT_MEMLOCK|memlock.{0,40}(?:limit|too low|ulimit)|can't start new thread|pthread_create\S* failed|fork.{0,20}Resource temporarily unavailable"
      r"|Thread creation failed: Resource temporarily unavailable|RLIMIT_NPROC \d+ current",
      title="A per-process limit was hit (locked memory, threads or processes)",
      root_cause="ulimit -l (pinned memory for RDMA) or the thread/process limit (ulimit -u, the container's pids limit) is too low.",
      fix="ulimit -a    # memlock should be unlimited for RDMA; raise nproc/pids limits\n"
      "dsv3-preflight run --only host.resources",
      check="host.resources", tier=1,
      example="RuntimeError: can't start new thread",
      source="CPython _thread.start_new_thread error; NCCL/libibverbs memlock warnings"),
    S(id="host.dataloader_worker_killed", cls="host_resources", kind="cause", needles=(b"is killed by signal: Killed",),
      pattern=r"DataLoader worker \(pid (?P<pid>\d+)\) is killed by signal: Killed",
      title="A DataLoader worker was killed with SIGKILL (pid {pid})",
      root_cause="Something sent SIGKILL to a DataLoader worker process, most often the kernel OOM killer: every worker holds "
      "its own copy of what the dataset object references, so num_workers × ranks per node multiplies host RAM. "
      "Check dmesg on that node.",
      fix="dmesg -T | grep -i -E 'out of memory|killed process'; free -g    # on the node of that rank\n"
      "# lower dataloader_num_workers (or the dataset's in-memory size), then:\n"
      "dsv3-preflight run --only host.resources",
      check="host.resources", tier=2,
      example="RuntimeError: DataLoader worker (pid 18877) is killed by signal: Killed. ",
      source="torch/utils/data/_utils/signal_handling.py (_error_if_any_worker_fails); produced here by a worker killed "
      "with SIGKILL", consequence_of=("host.oom_killer", "host.cpu_memory")),
    # torch.save's zip writer when a write comes up short (a full or over-quota filesystem); produced here by saving
    # onto a 1 MiB tmpfs: "basic_ios::clear: iostream error", then "[enforce fail at inline_container.cc:672] .
    # unexpected pos 704 vs 598"; older torch: "PytorchStreamWriter failed writing file data/0: file write failed"
    S(id="host.checkpoint_write_failed", cls="host_resources", kind="cause", needles=(b"PytorchStreamWriter failed writing", b"unexpected pos ",
                                                                                     b"basic_ios::clear: iostream error", b"write(): fd "),
      pattern=r"PytorchStreamWriter failed writing file (?P<file>\S+): file write failed"
      r"|inline_container\.cc:\d+\] \. unexpected pos (?P<pos>\d+) vs (?P<want>\d+)"
      r"|basic_ios::clear: iostream error"
      r"|write\(\): fd \d+ failed with (?P<why>[A-Za-z][A-Za-z /-]*[a-z])",
      title="A checkpoint write came up short (torch.save)[[: {why}]]",
      root_cause="torch.save's writer could not write every byte: the filesystem it saves to is full or over quota (the "
      "output dir, a shared volume, /tmp), a network filesystem dropped the write, or the disk returned an I/O error "
      "(dmesg on that node names the device).",
      fix="df -h \"${OUTPUT_DIR:?output dir of the run}\"    # and the quota: quota -s, or the volume's own limit\n"
      "dsv3-preflight run --only host.resources,lora.output_dir",
      check="host.resources", tier=1,
      example="RuntimeError: [enforce fail at inline_container.cc:672] . unexpected pos 704 vs 598",
      source="torch caffe2/serialize/inline_container.cc (PyTorchStreamWriter::writeRecord, valid); produced here on a full "
      "tmpfs", consequence_of=("host.disk_full",)),
    # numpy's file writer (np.save, ndarray.tofile: tokenized datasets, data caches, saved arrays) on a full or
    # over-quota filesystem; none of its three messages names the errno. Produced here with numpy 2.4 on a 1 MiB tmpfs:
    # "OSError: 524288 requested and 131056 written" (fwrite came up short), "OSError: Not enough free space to write
    # 40000000 bytes after offset 128" (numpy asked for the space first, fallocate said ENOSPC; before numpy 2.3
    # without the offset), "OSError: problem writing element 131584 to file" (a non-contiguous array, element by element)
    S(id="host.array_write_failed", cls="host_resources", kind="cause", needles=(b"requested and ", b"Not enough free space to write",
                                                                                b"problem writing element "),
      pattern=r"(?:OSError|IOError): (?:(?P<want>\d+) requested and (?P<got>\d+) written"
      r"|Not enough free space to write (?P<nbytes>\d+) bytes|problem writing element \d+ to file)",
      title="A file write came up short (numpy)[[: {got} of {want} bytes written]][[: no room for {nbytes} bytes]]",
      root_cause="numpy's file writer (np.save, ndarray.tofile: a tokenized dataset, a data cache, saved arrays) could not write "
      "every byte: the filesystem it writes to is full or over quota (the output dir, the dataset cache, /tmp), or the "
      "disk returned an I/O error (dmesg on that node names the device). \"Not enough free space\" is numpy's own "
      "check of the space before it writes.",
      fix="df -h \"${OUTPUT_DIR:?output dir of the run}\" /tmp \"${HF_HOME:-$HOME/.cache/huggingface}\"    # and the "
      "quota: quota -s\n"
      "dsv3-preflight run --only host.resources,lora.output_dir",
      check="host.resources", tier=1,
      example="OSError: Not enough free space to write 40000000 bytes after offset 128",
      source="numpy _core/src/multiarray/convert.c (PyArray_ToFile, npy_fallocate); produced here on a full tmpfs; "
      "https://github.com/instructlab/instructlab/issues/3298", consequence_of=("host.disk_full",)),
    S(id="host.sigkill", cls="host_resources", kind="cause", needles=(b"exitcode: -9", b"exitcode  : -9", b"exit code -9", b"return code = -9", b"Signal 9 (SIGKILL)",
                                                                     b"SIGKILL: 9", b"killed by signal 9", b"Killed", b"signal: killed", b"code -9",
                                                                     b"code 137", b"code: 137", b"status 137", b"Code: 137", b"exitcode: 137"),
      pattern=r"exit ?code\s*:?\s*-9\)?(?: local_rank: (?P<local_rank>\d+))?|return code = -9\b|Signal 9 \(SIGKILL\)|<Signals\.SIGKILL: 9>"
      r"|killed by signal 9|signal: killed|^\W*" + LABELS + r"\W*Killed\W*$|line \d+: +\d+ Killed\b|task \d+: Killed|code -9\b"
      r"|\d(?:it/s|s/it)\]\s*Killed\s*$"   # the shell's "Killed" after a progress bar's last redraw, on its line
      r"|^\[\d+\]\+?\s+Killed\b|(?:exit(?:ed)? (?:status|with code)|[Ee]xit [Cc]ode|exitcode)\s*:?\s*137\b",
      title="A rank was killed with SIGKILL (exit -9)",
      root_cause="Something sent SIGKILL to a rank, most often the kernel OOM killer (host RAM exhausted); check dmesg on that "
      "node. A scheduler enforcing a memory limit does the same.",
      fix="dmesg -T | grep -i -E 'out of memory|killed process'; free -g    # on the node of that rank\n"
      "dsv3-preflight run --only host.resources",
      check="host.resources", tier=2,
      example="ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) local_rank: 0 (pid: 333202) of binary: /home/akemid/llama/venv/bin/python3",
      source="https://github.com/meta-llama/llama/issues/706 (torch elastic api.py)",
      consequence_of=("host.oom_killer", "host.cpu_memory")),
    S(id="host.sigbus", cls="host_resources", kind="cause", needles=(b"exitcode: -7", b"exitcode  : -7", b"Bus error", b"SIGBUS"),
      pattern=r"exit ?code\s*:?\s*-7\b|Bus error|SIGBUS",
      title="A rank died of SIGBUS (Bus error)",
      root_cause="SIGBUS in training almost always means a memory-mapped file or /dev/shm segment ran out of backing space "
      "(/dev/shm full, a file truncated under mmap).", fix=SHM_FIX.split("\nrm -f")[0], check="host.resources", tier=2,
      example="bash: line 1:  4242 Bus error               (core dumped) python train.py",
      source="bash job-status message for SIGBUS",
      consequence_of=("host.shared_memory", "nccl.shm_no_space")),
)
