"""Probes of the network domain: the kernel route toward MASTER_ADDR and the interface inventory
(netlink), name resolution, the temporary rendezvous listener and the classified TCP reach."""
