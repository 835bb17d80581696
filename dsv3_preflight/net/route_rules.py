"""The rules of net.nic_route (pure: facts in, findings out): the interface toward MASTER_ADDR is up, usable, and the one NCCL and Gloo will select.

Each rule is a small pure function of the ``nic_route`` fact and the profile returning a finding or
None; :func:`nic_route` runs the gate rules (MASTER_ADDR resolves, the kernel has a route, the route names
an interface), then every other rule (only those about the variables' names when a gate failed: the rest
compare with the route's interface), and the accumulator keeps each problem with its own fix."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeGuard

from dsv3_preflight.net import causes
from dsv3_preflight.net.facts import NicRouteFact
from dsv3_preflight.net.ifselect import (
    GLOO_EMPTY_NAME,
    gloo_default_address,
    gloo_select,
    nccl_select,
    nccl_settings,
    recommended_nccl_value,
)
from dsv3_preflight.net.master import loopback_fix, training_addresses, unresolvable_fix
from dsv3_preflight.profile import Profile
from dsv3_preflight.result import Actor, Finding, failure, warning

DOWN_STATES = frozenset({"down", "lowerlayerdown", "notpresent"})


#: the rules read the nic_route fact
Fact = NicRouteFact


NCCL_VARS = ("NCCL_SOCKET_IFNAME", "NCCL_SOCKET_FAMILY", "NCCL_COMM_ID")


def _settings(f: Fact) -> dict[str, tuple[str | None, str | None]]:
    return nccl_settings(f.get("env") or {}, f.get("nccl_conf") or [], NCCL_VARS)


def _env(f: Fact) -> Mapping[str, Any]:
    """The variables as the libraries see them: the environment, with NCCL's from its settings files where the
    environment leaves them unset."""
    env = dict(f.get("env") or {})
    env.update({name: value for name, (value, _source) in _settings(f).items()})
    return env


def _from_file(f: Fact, name: str) -> str:
    """' (from /etc/nccl.conf: an export overrides it)' when NCCL reads ``name`` from a settings file, else ''."""
    source = _settings(f)[name][1]
    return f" (from {source}: an export overrides it)" if source else ""


PIN_UNKNOWN = ("# once MASTER_ADDR resolves, pin the interface of the route to it (ip route get shows it)\n"
               'export NCCL_SOCKET_IFNAME="${TRAINING_IF:?set TRAINING_IF to the interface toward the head}"\n'
               'export GLOO_SOCKET_IFNAME="$TRAINING_IF"')


def export_fix(f: Fact) -> str:
    """The exports that pin NCCL and Gloo to the route's interface (NCCL's prefix rules: ``eth0``, else ``=eth0``)."""
    ifname = f.get("ifname")
    if not ifname or f.get("route_error") or not f.get("resolved"):
        return PIN_UNKNOWN
    value = recommended_nccl_value(ifname, f.get("interfaces") or [], _env(f).get("NCCL_SOCKET_FAMILY"))
    return f"export NCCL_SOCKET_IFNAME={value}\nexport GLOO_SOCKET_IFNAME={ifname}"


def loopback_master(f: Fact, profile: Profile) -> bool:
    """Multi-node and MASTER_ADDR reached through loopback: comparing NCCL/Gloo with ``lo`` means nothing
    (the fix is a new MASTER_ADDR, and pinning lo would be wrong advice)."""
    return profile.nnodes > 1 and bool(f.get("loopback"))


def _nccl(f: Fact) -> dict[str, Any]:
    return nccl_select(_env(f).get("NCCL_SOCKET_IFNAME"), f.get("interfaces") or [], _env(f).get("NCCL_SOCKET_FAMILY"),
                       f.get("nccl_version"))


def _nccl_named(nccl: Mapping[str, Any]) -> str:
    """'NCCL 2.29.7', or 'NCCL 2.29.7 (assumed: this node's is unknown)'."""
    return f"NCCL {nccl['nccl_version']}" + (" (assumed: this node's is unknown)" if nccl["version_assumed"] else "")


def _nccl_judged_against_route(f: Fact, profile: Profile) -> dict[str, Any] | None:
    """NCCL's selection when it is set, valid, non-empty, and the job spans nodes (else None)."""
    if _env(f).get("NCCL_SOCKET_IFNAME") is None or profile.nnodes <= 1 or loopback_master(f, profile):
        return None
    nccl = _nccl(f)
    return nccl if not nccl["invalid"] and nccl["selected"] else None


def _nccl_failure(message: str, f: Fact) -> Finding:
    return failure(message + _from_file(f, "NCCL_SOCKET_IFNAME"), export_fix(f), actor=Actor.JOB,
                   cause=causes.NCCL_IFNAME)


def _gloo_failure(message: str, f: Fact) -> Finding:
    return failure(message, export_fix(f), actor=Actor.JOB, cause=causes.GLOO_IFNAME)


def master_resolves(f: Fact, profile: Profile | None = None) -> Finding | None:
    if f.get("resolved"):
        return None
    name = f.get("master_addr")
    return failure(f"MASTER_ADDR {name!r} does not resolve: {f.get('resolve_error')}", unresolvable_fix(str(name)),
                   actor=Actor.JOB, cause=causes.MASTER_UNRESOLVABLE)


def kernel_has_route(f: Fact, profile: Profile | None = None) -> Finding | None:
    if not f.get("route_error"):
        return None
    target = f.get("target")
    return failure(f"no route to MASTER_ADDR {f.get('master_addr')} ({target}): {f['route_error']}",
                   f"ip route get {target}   # then add a route, or bring up the interface that should reach the head",
                   actor=Actor.NODE, cause=causes.NO_ROUTE_TO_MASTER)


def route_names_interface(f: Fact, profile: Profile | None = None) -> Finding | None:
    if f.get("ifname"):
        return None
    return failure(f"the kernel's route to {f.get('target')} names no interface",
                   f"ip route get {f.get('target')}   # shows the route the kernel takes", actor=Actor.NODE,
                   cause=causes.NO_ROUTE_TO_MASTER)


GATES = (master_resolves, kernel_has_route, route_names_interface)


def interface_up(f: Fact, profile: Profile | None = None) -> Finding | None:
    if f.get("up") is not False and (f.get("operstate") or "").lower() not in DOWN_STATES:
        return None
    ifname = f["ifname"]
    return failure(f"{ifname}, the interface toward MASTER_ADDR {f.get('master_addr')}, is down (operstate {f.get('operstate')})",
                   f"ip link set dev {ifname} up   # and check the cable/port: cat /sys/class/net/{ifname}/carrier",
                   actor=Actor.NODE, cause=causes.NIC_DOWN)


def not_loopback_on_multi_node(f: Fact, profile: Profile) -> Finding | None:
    if not loopback_master(f, profile):
        return None
    name = str(f.get("master_addr"))
    this_is_head = profile.node_rank == 0 and profile.sources.get("node_rank", "default") != "default"
    fix = loopback_fix(name, f.get("addresses") or [], f.get("hosts_entries") or [],
                       training_addresses(f.get("interfaces")), this_is_head)
    return failure(f"MASTER_ADDR {name} is reached through loopback {f['ifname']} but the profile has {profile.nnodes} nodes",
                   fix, actor=Actor.JOB, cause=causes.MASTER_LOOPBACK)


def family_has_address(f: Fact, profile: Profile | None = None) -> Finding | None:
    if _env(f).get("NCCL_SOCKET_FAMILY") != "AF_INET" or f.get("ipv4"):
        return None
    ifname = f["ifname"]
    return failure(f"NCCL_SOCKET_FAMILY=AF_INET but {ifname} has no IPv4 address",
                   f"unset NCCL_SOCKET_FAMILY   # or give {ifname} an IPv4 address (ip addr add ADDRESS/PREFIX dev {ifname})",
                   actor=Actor.JOB, cause=causes.SOCKET_FAMILY)


def nccl_value_honoured(f: Fact, profile: Profile | None = None) -> Finding | None:
    note = _nccl(f).get("note")
    return warning(note + _from_file(f, "NCCL_SOCKET_IFNAME"), export_fix(f), actor=Actor.JOB,
                   cause=causes.NCCL_IFNAME) if note else None


def nccl_comm_id_unset(f: Fact, profile: Profile | None = None) -> Finding | None:
    """NCCL_COMM_ID set: NCCL takes its bootstrap address from it instead of the unique id torch sends every rank
    through the rendezvous store, every communicator's rank 0 listens there, and the bootstrap interface is the
    one in its subnet, whatever NCCL_SOCKET_IFNAME says (bootstrap.cc bootstrapNetInit; init.cc)."""
    value, source = _settings(f)["NCCL_COMM_ID"]
    if value is None:
        return None
    if source:
        fix = (f"# {source} sets NCCL_COMM_ID; an empty export does not help (NCCL reads it as set and invalid)\n"
               f"sed -i '/^NCCL_COMM_ID=/d' {source}")
        actor = Actor.NODE if source == "/etc/nccl.conf" else Actor.JOB
    else:
        fix, actor = "unset NCCL_COMM_ID   # torch gives NCCL its own id through the rendezvous store", Actor.JOB
    return warning(f"NCCL_COMM_ID={value!r} is set{_from_file(f, 'NCCL_COMM_ID')}: NCCL then bootstraps at that "
                   "address instead of the id torch sends every rank, every communicator's rank 0 (DeepSpeed makes "
                   "several) listens on it, and the bootstrap interface is the one in its subnet, not "
                   "NCCL_SOCKET_IFNAME's; a torchrun job needs none", fix, actor=actor, cause=causes.NCCL_COMM_ID)


def nccl_entries_valid(f: Fact, profile: Profile | None = None) -> Finding | None:
    value = _env(f).get("NCCL_SOCKET_IFNAME")
    invalid = _nccl(f)["invalid"] if value is not None else []
    if not invalid:
        return None
    return _nccl_failure(f"NCCL_SOCKET_IFNAME={value!r} has entries that cannot be interface names: {invalid}", f)


def nccl_selects_something(f: Fact, profile: Profile | None = None) -> Finding | None:
    value = _env(f).get("NCCL_SOCKET_IFNAME")
    nccl = _nccl(f)
    if value is None or nccl["invalid"] or nccl["selected"]:
        return None
    reaches = f"; {f['ifname']} reaches MASTER_ADDR" if f.get("ifname") and not f.get("route_error") else ""
    if nccl["not_running"]:
        names = ", ".join(nccl["not_running"])
        return _nccl_failure(f"NCCL_SOCKET_IFNAME={value!r} matches only {names}, not RUNNING (down or no carrier): "
                             f"{_nccl_named(nccl)} skips {'it' if len(nccl['not_running']) == 1 else 'them'}, selects "
                             f"nothing and fails at init{reaches}", f)
    return _nccl_failure(f"NCCL_SOCKET_IFNAME={value!r} selects no interface here (NCCL fails at init){reaches}", f)


def nccl_includes_route_interface(f: Fact, profile: Profile) -> Finding | None:
    nccl = _nccl_judged_against_route(f, profile)
    if nccl is None or f["ifname"] in nccl["selected"]:
        return None
    return _nccl_failure(f"NCCL_SOCKET_IFNAME={_env(f)['NCCL_SOCKET_IFNAME']!r} selects {', '.join(nccl['selected'])}, "
                           f"not {f['ifname']} which reaches MASTER_ADDR {f.get('master_addr')}", f)


def nccl_bootstraps_on_route_interface(f: Fact, profile: Profile) -> Finding | None:
    nccl = _nccl_judged_against_route(f, profile)
    ifname = f["ifname"]
    if nccl is None or ifname not in nccl["selected"] or nccl["bootstrap"] == ifname:
        return None
    return _nccl_failure(f"NCCL_SOCKET_IFNAME={_env(f)['NCCL_SOCKET_IFNAME']!r} matches {', '.join(nccl['selected'])}: "
                           f"NCCL bootstraps on the first, {nccl['bootstrap']}, not {ifname} which reaches MASTER_ADDR "
                           f"{f.get('master_addr')}", f)


def nccl_selects_only_route_interface(f: Fact, profile: Profile) -> Finding | None:
    nccl = _nccl_judged_against_route(f, profile)
    ifname = f["ifname"]
    if nccl is None or nccl["bootstrap"] != ifname or len(nccl["selected"]) <= 1:
        return None
    others = [n for n in nccl["selected"] if n != ifname]
    return warning(f"NCCL_SOCKET_IFNAME={_env(f)['NCCL_SOCKET_IFNAME']!r} also selects {', '.join(others)}: NCCL's socket "
                   "transport uses every selected interface, and peers may not reach them",
                   export_fix(f), actor=Actor.JOB, cause=causes.NCCL_IFNAME)


def _gloo(f: Fact) -> dict[str, Any] | None:
    """Gloo's selection when GLOO_SOCKET_IFNAME is set and torch honours it (longer than one character)."""
    gloo = gloo_select(_env(f).get("GLOO_SOCKET_IFNAME"), f.get("interfaces") or [])
    return gloo if gloo["honoured"] else None


def gloo_value_honoured(f: Fact, profile: Profile | None = None) -> Finding | None:
    note = gloo_select(_env(f).get("GLOO_SOCKET_IFNAME"), []).get("note")
    if not note:
        return None
    return warning(f"{note}: {_gloo_binds(f)}", export_fix(f), actor=Actor.JOB, cause=causes.GLOO_IFNAME)


def gloo_names_valid(f: Fact, profile: Profile | None = None) -> Finding | None:
    gloo = _gloo(f)
    if not gloo or not (gloo["invalid"] or gloo["empty"]):
        return None
    value = _env(f)["GLOO_SOCKET_IFNAME"]
    if gloo["empty"]:
        return _gloo_failure(f"GLOO_SOCKET_IFNAME={value!r} has an empty name (a leading or doubled comma): torch "
                             f"fails with \"{GLOO_EMPTY_NAME}\"", f)
    return _gloo_failure(f"GLOO_SOCKET_IFNAME={value!r} has names that cannot be interfaces: {gloo['invalid']}", f)


def _gloo_names_ok(gloo: dict[str, Any] | None) -> TypeGuard[dict[str, Any]]:
    if not gloo:
        return False
    return not gloo["invalid"] and not gloo["empty"]


def gloo_names_exist(f: Fact, profile: Profile | None = None) -> Finding | None:
    gloo = _gloo(f)
    if not _gloo_names_ok(gloo) or not gloo["missing"]:
        return None
    return _gloo_failure(f"GLOO_SOCKET_IFNAME={_env(f)['GLOO_SOCKET_IFNAME']!r} names {', '.join(gloo['missing'])}, "
                           "which does not exist here (Gloo needs exact names, no prefixes)", f)


def gloo_names_have_address(f: Fact, profile: Profile | None = None) -> Finding | None:
    gloo = _gloo(f)
    if not _gloo_names_ok(gloo) or gloo["missing"] or not gloo["no_address"]:
        return None
    return _gloo_failure(f"GLOO_SOCKET_IFNAME={_env(f)['GLOO_SOCKET_IFNAME']!r}: {', '.join(gloo['no_address'])} "
                           "has no address", f)


def gloo_uses_only_route_interface(f: Fact, profile: Profile) -> Finding | None:
    gloo = _gloo(f)
    if (not _gloo_names_ok(gloo) or gloo["missing"] or gloo["no_address"] or profile.nnodes <= 1
            or loopback_master(f, profile) or all(n == f["ifname"] for n in gloo["selected"])):
        return None
    return _gloo_failure(f"GLOO_SOCKET_IFNAME={_env(f)['GLOO_SOCKET_IFNAME']!r} uses {', '.join(gloo['selected'])}, "
                           f"not only {f['ifname']} which reaches MASTER_ADDR {f.get('master_addr')}", f)


def _pins_matter(f: Fact, profile: Profile) -> bool:
    return profile.nnodes > 1 and not loopback_master(f, profile)


def gloo_bound_address(f: Fact) -> dict[str, Any]:
    """What Gloo binds when GLOO_SOCKET_IFNAME is unset or ignored (:func:`ifselect.gloo_default_address`), with
    the /etc/hosts line that maps the host name to that address (``hosts_line``, None when none does)."""
    bound = gloo_default_address(f.get("hostname_addresses") or [], f.get("interfaces") or [])
    line = next((e for e in f.get("hostname_hosts_entries") or [] if e.get("address") == bound["address"]), None)
    return dict(bound, hosts_line=None if bound["fallback"] else line)


def _gloo_binds(f: Fact) -> str:
    """Where Gloo binds without GLOO_SOCKET_IFNAME, and why, in words."""
    bound = gloo_bound_address(f)
    name = f.get("hostname")
    if bound["fallback"]:
        resolved = ", ".join(f.get("hostname_addresses") or []) or "no address"
        return (f"the host name {name!r} resolves to {resolved}, no address of this node, so torch falls back to "
                "127.0.0.1")
    line = bound["hosts_line"]
    where = f" (/etc/hosts line {line['line']}: {line['text']})" if line else ""
    addresses = f.get("hostname_addresses") or []
    if addresses[:1] == [bound["address"]]:
        return f"Gloo binds {bound['address']}, the first address the host name {name!r} resolves to{where}"
    return (f"Gloo binds {bound['address']}, the first of the host name {name!r}'s addresses ({', '.join(addresses)}) "
            f"that this node can bind{where}")


def _gloo_pinned(f: Fact) -> bool:
    return _gloo(f) is not None


def gloo_backend_has_a_reachable_address(f: Fact, profile: Profile) -> Finding | None:
    """With the gloo backend and GLOO_SOCKET_IFNAME unset (or ignored), a loopback address first among the host
    name's addresses (or none of this node's) makes Gloo bind loopback: the other nodes cannot reach it."""
    if profile.backend != "gloo" or _gloo_pinned(f) or not _pins_matter(f, profile) or not gloo_bound_address(f)["loopback"]:
        return None
    bound = gloo_bound_address(f)
    fix = export_fix(f)
    line = bound["hosts_line"]
    if line:
        fix += (f"\n# or, on this node: take {f.get('hostname')} off /etc/hosts line {line['line']} ({line['text']}) so that "
                "it resolves to this node's address on the training network first")
    return failure(f"{_gloo_binds(f)}: a loopback address, unreachable from the other nodes", fix, actor=Actor.JOB,
                   cause=causes.SOCKET_IFNAME_UNSET)


def ifnames_pinned(f: Fact, profile: Profile) -> Finding | None:
    env = _env(f)
    # with the gloo backend, Gloo on loopback is a failure of its own (gloo_backend_has_a_reachable_address)
    gloo_fails = profile.backend == "gloo" and gloo_bound_address(f)["loopback"]
    unset = [v for v in ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME") if env.get(v) is None
             and not (v == "GLOO_SOCKET_IFNAME" and gloo_fails)]
    if not unset or not _pins_matter(f, profile):
        return None
    ifname = f["ifname"]
    guesses = []
    if "NCCL_SOCKET_IFNAME" in unset:
        picked = _nccl(f)["bootstrap"]
        guesses.append(f"NCCL would pick {picked}" + ("" if picked == ifname else f", not {ifname}"))
    if "GLOO_SOCKET_IFNAME" in unset:
        guesses.append(_gloo_binds(f) + (": loopback, unreachable from the other nodes"
                                         if gloo_bound_address(f)["loopback"] else ""))
    return warning(f"{' and '.join(unset)} unset: {'; '.join(guesses) or 'the libraries pick by themselves'}; "
                   f"pin {ifname}, the interface toward MASTER_ADDR {f.get('master_addr')}",
                   export_fix(f), actor=Actor.JOB, cause=causes.SOCKET_IFNAME_UNSET)


NAME_RULES = (nccl_comm_id_unset, nccl_entries_valid, nccl_selects_something, gloo_names_valid, gloo_names_exist,
              gloo_names_have_address)


RULES = (interface_up, not_loopback_on_multi_node, family_has_address, nccl_comm_id_unset,
         nccl_value_honoured, nccl_entries_valid, nccl_selects_something, nccl_includes_route_interface,
         nccl_bootstraps_on_route_interface, nccl_selects_only_route_interface,
         gloo_value_honoured, gloo_names_valid, gloo_names_exist, gloo_names_have_address, gloo_uses_only_route_interface,
         gloo_backend_has_a_reachable_address, ifnames_pinned)


def evidence_of(f: Fact) -> dict[str, Any]:
    env = _env(f)
    evidence = {k: f.get(k) for k in ("master_addr", "target", "local", "role", "src", "gateway", "mtu", "operstate",
                                      "speed_mbps", "ipv4", "method", "route_type")}
    evidence.update(interface=f.get("ifname"), resolve_error=f.get("resolve_error"), route_error=f.get("route_error"),
                    route_errno=f.get("route_errno"), hosts_entries=f.get("hosts_entries") or [],
                    NCCL_SOCKET_IFNAME=env.get("NCCL_SOCKET_IFNAME"), GLOO_SOCKET_IFNAME=env.get("GLOO_SOCKET_IFNAME"),
                    NCCL_SOCKET_FAMILY=env.get("NCCL_SOCKET_FAMILY"), NCCL_COMM_ID=env.get("NCCL_COMM_ID"),
                    nccl_conf={name: source for name, (_v, source) in _settings(f).items() if source})
    if f.get("interfaces"):
        nccl = _nccl(f)
        evidence.update(nccl_selects=nccl["selected"], nccl_bootstrap_interface=nccl["bootstrap"],
                        nccl_version=nccl["nccl_version"], nccl_version_assumed=nccl["version_assumed"],
                        nccl_skips_not_running=nccl["skips_not_running"],
                        gloo_uses=(_gloo(f) or {}).get("selected", []))
        if nccl.get("note"):
            evidence["nccl_note"] = nccl["note"]
        if nccl.get("not_running"):
            evidence["nccl_not_running"] = nccl["not_running"]
        if not _gloo_pinned(f):
            evidence["gloo_binds"] = gloo_bound_address(f)["address"]
    return evidence


def ok_summary(f: Fact, profile: Profile) -> str:
    summary = (f"MASTER_ADDR {f.get('master_addr')} via {f.get('ifname')} (src {f.get('src')}"
               + (f", gateway {f['gateway']}" if f.get("gateway") else "")
               + f", MTU {f.get('mtu')}, {f.get('operstate')})")
    env = _env(f)
    if profile.nnodes <= 1:
        return summary + "; single node: NCCL/Gloo interface choice does not matter"
    if env.get("NCCL_SOCKET_IFNAME") is not None or env.get("GLOO_SOCKET_IFNAME") is not None:
        return summary + "; NCCL/Gloo select it"
    return summary
