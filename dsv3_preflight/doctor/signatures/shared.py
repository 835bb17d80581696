"""What several cause families share: the launchers' line labels, the Xid catalogue's groups, the fixes many causes
end with, and pattern pieces (interfaces other nodes cannot reach, a local path)."""
from __future__ import annotations

from collections.abc import Iterable

from ...gpu.xid import PCI, XIDS, pci_key
from ...gpu.xid import meaning as xid_meaning
from ...gpu.xid_rules import NVLINK_XIDS

#: the labels a launcher puts before a rank's line, read before a rule about the line's own start: torchrun's
#: "[default3]:" and torch's "[rank3]:", srun --label's "3: ", Open MPI's "[1,3]<stderr>:", in any number
LABELS = r"(?:\s*(?:\d{1,5}: |\[\d+,\d+\]<std(?:out|err)>:|\[[^\]]*\]:))*\s*"

#: NVIDIA's Xid catalogue (the gpu.xid check's table): the Xids that are an NVLink's fault, the node's (a reset or a
#: reboot: NVIDIA's "node" bucket, the contained memory error that stopped the program that touched it, a resource
#: retirement that needs a reset), and an application's
XID_FAULTS = tuple(sorted(x for x, m in XIDS.items() if x not in NVLINK_XIDS
                          and (m.kind == "node" or x in (94, 156))))
XID_APPLICATION = tuple(sorted(x for x, m in XIDS.items() if m.kind == "app"))
#: the start of the driver's Xid line, up to the Xid number (the GPU's address in ``pci``)
XID_LINE = r"NVRM: Xid \((?:PCI:)?(?P<pci>" + PCI + r")[^)]*\): "


def one_of(xids: Iterable[int]) -> str:
    """A regex alternative of Xid numbers."""
    return "|".join(map(str, sorted(xids)))


def xid_texts(groups: dict[str, str]) -> dict[str, str]:
    """An Xid line's meaning and NVIDIA's action from the catalogue, and the GPU's bus id as nvidia-smi takes it."""
    out: dict[str, str] = {}
    if groups.get("xid", "").isdigit():
        m = xid_meaning(int(groups["xid"]))
        out["meaning"] = m.meaning.split(":")[0]
        out["action"] = "NVIDIA: " + m.nvidia_action
    if groups.get("pci"):
        out["bus"] = pci_key(groups["pci"]) + ".0"
    return out


# ---------------------------------------------------------------------------------------------- shared fixes
FM_FIX = ("systemctl status nvidia-fabricmanager --no-pager; journalctl -u nvidia-fabricmanager -b --no-pager | tail -20\n"
          "# Fabric Manager must be exactly the driver's version:\n"
          "DRIVER_VERSION=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1)\n"
          "apt-get install -y \"nvidia-fabricmanager-${DRIVER_BRANCH:?driver branch, e.g. 535}=${DRIVER_VERSION}-1\"\n"
          "systemctl enable --now nvidia-fabricmanager\n"
          "# if it was restarted while jobs held the GPUs: stop them, then nvidia-smi -r (or reboot the node)")
IFACE_FIX = ("dsv3-preflight run --only net.nic_route    # on each node: prints the exports for the interface toward MASTER_ADDR\n"
             "# by hand: on a worker the 'dev' of: ip route get \"$MASTER_ADDR\"; on the head the interface that holds MASTER_ADDR\n"
             "export NCCL_SOCKET_IFNAME==\"${IFACE:?interface toward MASTER_ADDR, e.g. eth0}\" GLOO_SOCKET_IFNAME=\"$IFACE\""
             "    # =NAME: exactly that interface (NCCL reads a bare name as a prefix)")
#: containers of a multi-node job need the host's network (their bridge addresses do not route between nodes)
HOST_NETWORK_FIX = ("# run the job's containers with the host's network: docker run --network=host ... (Kubernetes: hostNetwork: true)\n"
                    + IFACE_FIX)
#: Open MPI's TCP transport and out-of-band wire-up on the interface toward the other nodes
OMPI_IFACE_FIX = ("export OMPI_MCA_btl_tcp_if_include=${IFACE:?interface toward the other nodes} "
                  "OMPI_MCA_oob_tcp_if_include=${IFACE}    # then rerun mpirun")
HOROVODRUN_FIX = ("horovodrun --network-interface \"${IFACE:?interface toward the other hosts}\" -np \"${NP:?number of processes}\" "
                  "-H \"${HOSTS:?host1:slots,host2:slots}\" python \"${TRAIN_SCRIPT:?the training script}\"")
RAY_IP_FIX = ("# start Ray on every node with the address the other nodes reach it at (its interface toward the head):\n"
              "ray start --address \"${RAY_HEAD:?head address:port}\" --node-ip-address \"${NODE_IP:?address of this node toward the head}\"\n"
              "export VLLM_HOST_IP=\"${NODE_IP}\"    # vLLM: the same address, set on each node\n" + IFACE_FIX)
DRIVER_FIX = ("nvidia-smi | head -4; python -c 'import torch; print(torch.__version__, torch.version.cuda)'\n"
              "# the driver must support the CUDA the program was built with: upgrade the driver, or install a build for the driver's CUDA:\n"
              "pip install torch --index-url \"https://download.pytorch.org/whl/${CUDA_TAG:?CUDA tag the driver supports, e.g. cu121}\"")
VERSIONS_FIX = ("dsv3-preflight run --only gpu.versions    # every version that must agree, node by node\n"
                "# install the same driver, CUDA, NCCL, torch and DeepSpeed everywhere (one container image on all nodes)")
STORE_FIX = ("nc -vz -w 3 \"$MASTER_ADDR\" \"$MASTER_PORT\"    # from every node; the head must be listening\n"
             "dsv3-preflight run --only net.port_reach,cluster.master_node")
# the same, with the host and port the log named when it named them (a host name: how every node resolves it)
STORE_FIX_AT = ("[[getent hosts {host}    # on every node: one address, the head's (not 127.0.1.1, not the node's own)\n"
                "nc -vz -w 3 {host} {port}    # from every node; the head must be listening"
                "||nc -vz -w 3 \"$MASTER_ADDR\" \"$MASTER_PORT\"    # from every node; the head must be listening]]\n"
                "dsv3-preflight run --only net.port_reach,cluster.master_node")
LAUNCH_FIX = ("# start every rank through a launcher (torchrun, deepspeed, accelerate launch): it sets RANK, LOCAL_RANK,\n"
              "# WORLD_SIZE, MASTER_ADDR and MASTER_PORT for each process; plain `python train.py` sets none of them\n"
              "torchrun --nnodes \"${NNODES:?number of nodes}\" --nproc-per-node \"${NPROC_PER_NODE:?GPUs per node}\" "
              "--rdzv-backend c10d --rdzv-endpoint \"${MASTER_ADDR:?address of the head node}:${MASTER_PORT:-29500}\" "
              "\"${TRAIN_SCRIPT:?the training script}\"\n"
              "dsv3-preflight run --only env.launch_vars")
ALLREDUCE_FIX = "dsv3-preflight run --only dist.allreduce    # the data path between all ranks, with a timeout and the cause"
SHM_FIX = ("df -h /dev/shm; ls /dev/shm | head\n"
           "# docker: run with --ipc=host or --shm-size=16g; Kubernetes: mount an emptyDir with medium: Memory at /dev/shm\n"
           "rm -f /dev/shm/nccl-*    # stale segments of dead runs (no job running)")
RANK_DUP_FIX = ("export CUDA_DEVICE_ORDER=PCI_BUS_ID\n"
                "# in the script, before init_process_group: torch.cuda.set_device(int(os.environ['LOCAL_RANK']))\n"
                "dsv3-preflight run --only gpu.rank_mapping,gpu.rank_mapping_cluster")
#: a path that looks local (absolute, ./, ../, ~): a Hub repo id never starts so
LOCAL_PATH = r"(?:/|\.{1,2}/|~/?)[^'\s]*"
#: a Gloo rank bound to an address no other node reaches: the connects that then fail are its consequences
GLOO_BOUND_UNREACHABLE = ("gloo.hostname_loopback", "gloo.cannot_resolve_local", "gloo.no_address_for_interface")
#: and a connect to a peer's loopback address is what the mesh then fails on
GLOO_MESH_CAUSES = GLOO_BOUND_UNREACHABLE + ("gloo.loopback_peer", "gloo.connect_retry")
#: interface names other nodes cannot reach (loopback, docker, libvirt, veth, CNI and flannel bridges)
UNREACHABLE_IFACE = r"lo|docker\d*|virbr\d*|veth\w*|cni\d*|flannel[\w.]*|br-\w+"
DS_CONFIG_FIX = "dsv3-preflight run --only lora.deepspeed_config    # reads the DeepSpeed config the run uses"
