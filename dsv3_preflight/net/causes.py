"""Root-cause keys of the network domain (and of the launch variables that point at it), shared by every
check that can fail for the same reason, so a report shows the cause once with the checks it blocks.

A check attaches one to each finding (``failure(..., cause=MASTER_UNRESOLVABLE)``); another domain's check
that fails for the same reason (the collective probe on a firewalled port, say) uses the same key.
"""
from __future__ import annotations

#: MASTER_ADDR does not resolve on this node (env.launch_vars, net.nic_route, net.port_reach)
MASTER_UNRESOLVABLE = "net.master_unresolvable"
#: MASTER_ADDR is, or resolves to, a loopback address on a multi-node profile (env.launch_vars, net.nic_route)
MASTER_LOOPBACK = "net.master_loopback"
#: MASTER_ADDR cannot be a rendezvous address: an IPv6 link-local address without a scope (net.port_reach)
MASTER_ADDR_INVALID = "net.master_addr_invalid"
#: the kernel has no route toward MASTER_ADDR (net.nic_route, net.port_reach with ENETUNREACH)
NO_ROUTE_TO_MASTER = "net.no_route_to_master"
#: a router or the head answers that the head cannot be reached (net.port_reach: EHOSTUNREACH and kin)
MASTER_UNREACHABLE = "net.master_unreachable"
#: the interface toward MASTER_ADDR is down or has lost its carrier (net.nic_route)
NIC_DOWN = "net.nic_down"
#: NCCL_SOCKET_IFNAME selects another interface than the route's, or nothing (net.nic_route; a collective on the
#: wrong NIC fails for it)
NCCL_IFNAME = "net.nccl_socket_ifname"
#: GLOO_SOCKET_IFNAME names a missing interface, one without an address, or another than the route's (net.nic_route)
GLOO_IFNAME = "net.gloo_socket_ifname"
#: NCCL_/GLOO_SOCKET_IFNAME are unset on a multi-node job: the libraries guess (net.nic_route)
SOCKET_IFNAME_UNSET = "net.socket_ifname_unset"
#: NCCL_SOCKET_FAMILY asks for an address family the route's interface lacks (net.nic_route)
SOCKET_FAMILY = "net.socket_family"
#: NCCL_COMM_ID is set on a torch job: NCCL bootstraps at that address and on the interface of its subnet, not at the
#: id torch hands it nor on NCCL_SOCKET_IFNAME's interface (net.nic_route)
NCCL_COMM_ID = "net.nccl_comm_id"
#: a process holds MASTER_PORT (net.port_free on the head, host.resources on every node, net.port_reach when
#: something else answers there)
PORT_HELD = "net.port_held"
#: MASTER_PORT is below 1024: only root can bind it (env.launch_vars, net.port_free)
PORT_PRIVILEGED = "net.port_privileged"
#: this node has node_rank 0 but does not hold MASTER_ADDR (net.port_free)
RANK0_NOT_MASTER = "net.rank0_not_master"
#: the head actively refuses MASTER_PORT while the dsv3-preflight listener serves it: a firewall REJECT (net.port_reach)
PORT_REJECTED = "net.port_rejected"
#: nothing listens on MASTER_PORT at the head, and no listener was started for the check (net.port_reach)
PORT_NOT_LISTENING = "net.port_not_listening"
#: no answer from MASTER_PORT within the timeout: a firewall DROP, or packets lost (net.port_reach)
PORT_FILTERED = "net.port_filtered"
#: MASTER_ADDR is a host name this node resolves, through its own /etc/hosts, to an address where the head does not
#: answer: a stale mapping on this node, not a firewall (net.port_reach)
MASTER_NAME_STALE = "net.master_name_stale"
