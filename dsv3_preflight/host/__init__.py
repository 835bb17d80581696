"""The host domain: who this node is, its environment, and its resources (shared memory, the processes
holding the rendezvous port or the GPUs, the output/checkpoint directory). Probes live in ``probes/``;
``processes`` (how a process is named and stopped in a fix) and ``storage`` (network filesystems) are pure."""
