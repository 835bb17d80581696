"""The host domain: who this node is, its environment, and its resources (shared memory, the processes
holding the rendezvous port or the GPUs, the checkpoint directory). Probes live in ``probes/``."""
