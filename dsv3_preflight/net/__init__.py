"""Network helpers of the net.* checks: NCCL/Gloo interface-selection rules (``ifselect``), the kernel's
route to an address and the interface inventory (``route``), a classified TCP reach probe (``reach``)
and the temporary rendezvous listener (``listener``). Standard library and psutil/netifaces only."""
