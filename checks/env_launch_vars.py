"""env.launch_vars: the variables the launch depends on are set and coherent.

Small pure rules over the environment, the profile and what MASTER_ADDR resolves to, each returning
findings with their fix; MASTER_ADDR's problems carry the cause keys net.nic_route and net.port_reach
share, with the same fix."""
from __future__ import annotations

from dsv3_preflight import check
from dsv3_preflight.net.launch_vars import (
    cuda_device_order,
    master_not_loopback,
    master_port_unprivileged,
    master_resolves,
    nccl_port_range_ignored,
    nccl_variables,
    omp_threads,
    variables_seen,
    world_size,
)
from dsv3_preflight.result import Findings


@check("env.launch_vars", needs=["env", "profile", "resolve_master", "nic_route"], tags=["env", "launch"], timeout=10)
def launch_vars(env, profile, resolve_master, nic_route=None):
    """CUDA_DEVICE_ORDER, WORLD_SIZE, MASTER_ADDR/PORT, OMP_NUM_THREADS and NCCL timeouts are set and coherent."""
    found = Findings()
    found.check(cuda_device_order, env, profile)
    found.check(world_size, profile)
    found.check(master_resolves, profile, resolve_master)
    found.check(master_not_loopback, profile, resolve_master, nic_route)
    found.check(master_port_unprivileged, profile)
    found.check(omp_threads, env, profile)
    found.check(nccl_variables, env)
    found.check(nccl_port_range_ignored, env, nic_route)
    ok = (f"launch variables coherent (world size {profile.nnodes * profile.nproc_per_node}, "
          f"rendezvous {profile.master_addr}:{profile.master_port})")
    return found.result(ok, {"variables": variables_seen(env, profile, resolve_master)})
