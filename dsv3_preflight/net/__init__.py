"""The network domain. ``probes/`` is the only part that touches the system (name resolution with a deadline
and the /etc/hosts lines, netlink routes and interfaces, the temporary rendezvous listener, TCP reach).
The rest is pure: ``ifselect`` (NCCL's and Gloo's interface-selection rules), ``master`` (MASTER_ADDR:
loopback or not, this node's training addresses, the fixes that name them) and ``causes`` (the root-cause
keys the net.* and env.* checks share). Standard library and psutil/netifaces only."""
