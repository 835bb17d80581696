"""The network domain. ``probes/`` touches the system (netlink routes and interfaces, name resolution,
the temporary rendezvous listener, TCP reach); ``ifselect`` holds the pure NCCL/Gloo interface-selection
rules the net.* checks apply. Standard library and psutil/netifaces only."""
