"""net.nic_route: the interface toward MASTER_ADDR is up, usable, and the one NCCL and Gloo will select."""
from __future__ import annotations

import ipaddress

from dsv3_preflight import Result, check
from dsv3_preflight.net.ifselect import gloo_select, nccl_select, recommended_nccl_value

_DOWN_STATES = {"down", "lowerlayerdown", "notpresent"}


def _is_loopback(addr: str) -> bool:
    try:
        return ipaddress.ip_address(addr.split("%")[0]).is_loopback
    except ValueError:
        return False


def _exports(ifname: str, interfaces, family_env) -> str:
    value = recommended_nccl_value(ifname, interfaces, family_env)
    return f"export NCCL_SOCKET_IFNAME={value}\nexport GLOO_SOCKET_IFNAME={ifname}"


def _verdict(fails, warns, evidence, remediation, ok_summary):
    evidence["problems"], evidence["warnings"] = fails, warns
    if fails:
        return Result.failed(fails[0] + (f" (+{len(fails) - 1} more)" if len(fails) > 1 else ""), evidence, remediation)
    if warns:
        return Result.warned(warns[0] + (f" (+{len(warns) - 1} more)" if len(warns) > 1 else ""), evidence, remediation)
    return Result.passed(ok_summary, evidence)


@check("net.nic_route", needs=["nic_route", "profile"], tags=["network"], timeout=10)
def nic_route(nic_route, profile):
    """MASTER_ADDR's interface (from the kernel's route) is up, not loopback on multi-node, and selected by NCCL_/GLOO_SOCKET_IFNAME."""
    f = nic_route
    addr = f.get("master_addr")
    if not f.get("resolved"):
        return Result.failed(
            f"MASTER_ADDR {addr!r} does not resolve: {f.get('resolve_error')}",
            {"master_addr": addr, "error": f.get("resolve_error")},
            f"export MASTER_ADDR=<head node's IP on the training network>   # or add '<IP> {addr}' to /etc/hosts on every node",
        )
    if f.get("route_error"):
        return Result.failed(
            f"no route to MASTER_ADDR {addr} ({f['target']}): {f['route_error']}",
            {"master_addr": addr, "target": f["target"], "error": f["route_error"], "errno": f.get("route_errno")},
            f"ip route get {f['target']}   # then add a route or fix the interface that should reach the head",
        )
    ifname = f.get("ifname")
    env = f.get("env") or {}
    interfaces = f.get("interfaces") or []
    family_env = env.get("NCCL_SOCKET_FAMILY")
    evidence = {
        "master_addr": addr, "target": f.get("target"), "local": f.get("local"), "role": f.get("role"),
        "interface": ifname, "src": f.get("src"), "gateway": f.get("gateway"), "mtu": f.get("mtu"),
        "operstate": f.get("operstate"), "speed_mbps": f.get("speed_mbps"), "ipv4": f.get("ipv4"),
        "method": f.get("method"), "route_type": f.get("route_type"),
        "NCCL_SOCKET_IFNAME": env.get("NCCL_SOCKET_IFNAME"), "GLOO_SOCKET_IFNAME": env.get("GLOO_SOCKET_IFNAME"),
        "NCCL_SOCKET_FAMILY": family_env,
    }
    if not ifname:
        return Result.failed(f"the kernel's route to {f.get('target')} names no interface", evidence,
                             f"ip route get {f.get('target')}")
    fixes: list[str] = []
    fails: list[str] = []
    warns: list[str] = []
    multi = profile.nnodes > 1
    if f.get("up") is False or (f.get("operstate") or "").lower() in _DOWN_STATES:
        fails.append(f"{ifname}, the interface toward MASTER_ADDR {addr}, is down (operstate {f.get('operstate')})")
        fixes.append(f"ip link set dev {ifname} up   # and check the cable/port: cat /sys/class/net/{ifname}/carrier")
    if multi and f.get("loopback"):
        fails.append(f"MASTER_ADDR {addr} is reached through loopback {ifname} but the profile has {profile.nnodes} nodes")
        fixes.append("export MASTER_ADDR=<head node's IP on the training network>")
    if family_env == "AF_INET" and not f.get("ipv4"):
        fails.append(f"NCCL_SOCKET_FAMILY=AF_INET but {ifname} has no IPv4 address")
        fixes.append(f"ip addr add <IPv4>/<prefix> dev {ifname}   # or: unset NCCL_SOCKET_FAMILY")

    nccl_value = env.get("NCCL_SOCKET_IFNAME")
    nccl = nccl_select(nccl_value, interfaces, family_env)
    evidence["nccl_selects"] = nccl["selected"]
    evidence["nccl_bootstrap_interface"] = nccl["bootstrap"]
    if nccl.get("note"):
        evidence["nccl_note"] = nccl["note"]
    export_fix = _exports(ifname, interfaces, family_env)
    if nccl_value is not None:
        if nccl["invalid"]:
            fails.append(f"NCCL_SOCKET_IFNAME={nccl_value!r} has entries that cannot be interface names: {nccl['invalid']}")
        elif not nccl["selected"]:
            fails.append(f"NCCL_SOCKET_IFNAME={nccl_value!r} selects no interface here (NCCL fails at init); {ifname} reaches MASTER_ADDR")
        elif not multi:
            pass  # one node: every rank reaches any local address; only an empty selection breaks init
        elif ifname not in nccl["selected"]:
            fails.append(f"NCCL_SOCKET_IFNAME={nccl_value!r} selects {', '.join(nccl['selected'])}, not {ifname} which reaches MASTER_ADDR {addr}")
        elif nccl["bootstrap"] != ifname:
            fails.append(f"NCCL_SOCKET_IFNAME={nccl_value!r} matches {', '.join(nccl['selected'])}: NCCL bootstraps on the first, "
                         f"{nccl['bootstrap']}, not {ifname} which reaches MASTER_ADDR {addr}")
        elif len(nccl["selected"]) > 1:
            others = [n for n in nccl["selected"] if n != ifname]
            warns.append(f"NCCL_SOCKET_IFNAME={nccl_value!r} also selects {', '.join(others)}: NCCL's socket transport "
                         f"uses every selected interface, and peers may not reach them")
        if nccl.get("note"):
            warns.insert(0, nccl["note"])
    gloo_value = env.get("GLOO_SOCKET_IFNAME")
    gloo = gloo_select(gloo_value, interfaces)
    evidence["gloo_uses"] = gloo["selected"]
    if gloo_value is not None:
        if gloo["invalid"]:
            fails.append(f"GLOO_SOCKET_IFNAME={gloo_value!r} has names that cannot be interfaces: {gloo['invalid']}")
        elif gloo["missing"]:
            fails.append(f"GLOO_SOCKET_IFNAME={gloo_value!r} names {', '.join(gloo['missing'])}, which does not exist here "
                         "(Gloo needs exact names, no prefixes)")
        elif gloo["no_address"]:
            fails.append(f"GLOO_SOCKET_IFNAME={gloo_value!r}: {', '.join(gloo['no_address'])} has no address")
        elif multi and any(n != ifname for n in gloo["selected"]):
            fails.append(f"GLOO_SOCKET_IFNAME={gloo_value!r} uses {', '.join(gloo['selected'])}, not only {ifname} which reaches MASTER_ADDR {addr}")
    # on multi-node a loopback route is already a FAIL whose fix is a new MASTER_ADDR; pinning lo would be wrong advice
    loopback_master = multi and bool(f.get("loopback"))
    if (nccl_value is None or gloo_value is None) and multi and not loopback_master:
        unset = [v for v, val in (("NCCL_SOCKET_IFNAME", nccl_value), ("GLOO_SOCKET_IFNAME", gloo_value)) if val is None]
        guesses = []
        if nccl_value is None:
            picked = nccl["bootstrap"]
            guesses.append(f"NCCL would pick {picked}" + ("" if picked == ifname else f", not {ifname}"))
        if gloo_value is None:
            host_addrs = f.get("hostname_addresses") or []
            local = {a for i in interfaces for a in (i.get("ipv4") or []) + (i.get("ipv6") or [])}
            usable = [a for a in host_addrs if a in local and not _is_loopback(a)]
            if not usable:
                hazard = (f"Gloo binds the address of the host name {f.get('hostname')!r}, which resolves to "
                          f"{', '.join(host_addrs) or 'no address'}: no usable local address, so Gloo falls back to "
                          "loopback, unreachable from other nodes")
                (fails if profile.backend == "gloo" else guesses).append(hazard)
            else:
                guesses.append(f"Gloo would bind {usable[0]} (the host name's address)")
        warns.append(f"{' and '.join(unset)} unset: {'; '.join(guesses) or 'the libraries pick by themselves'}; "
                     f"pin {ifname}, the interface toward MASTER_ADDR {addr}")
    if fails or warns:
        if loopback_master:
            fixes.append("# then rerun dsv3-preflight: it prints the NCCL_/GLOO_SOCKET_IFNAME exports for the route to the new address")
        elif any("SOCKET_IFNAME" in m for m in fails + warns):
            fixes.append(export_fix)
    summary = (f"MASTER_ADDR {addr} via {ifname} (src {f.get('src')}"
               + (f", gateway {f['gateway']}" if f.get("gateway") else "")
               + f", MTU {f.get('mtu')}, {f.get('operstate')})")
    if not multi:
        summary += "; single node: NCCL/Gloo interface choice does not matter"
    elif nccl_value is not None or gloo_value is not None:
        summary += "; NCCL/Gloo select it"
    return _verdict(fails, warns, evidence, "\n".join(dict.fromkeys(fixes)) or None, summary)
