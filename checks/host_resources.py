"""host.resources: /dev/shm size, room in the output directory, and leftovers holding GPUs or the rendezvous port.

Small pure rules over the facts (``shm``, ``output_dir``, ``port_holders``, ``gpu_holders``), each returning
findings with their own fix; where the output dir lies and whether it is writable is lora.output_dir's."""
from __future__ import annotations

from dsv3_preflight import check
from dsv3_preflight.host.resource_rules import (
    gpus_not_held,
    ok_summary,
    output_dir_has_room,
    rendezvous_port_not_held,
    shm_big_enough,
)
from dsv3_preflight.result import Findings


@check("host.resources", needs=["shm", "output_dir", "port_holders", "gpu_holders", "profile"], tags=["host"], timeout=20)
def resources(shm, output_dir, port_holders, gpu_holders, profile):
    """/dev/shm is big enough, the output dir's filesystem has room, and no leftover holds GPUs or the port
    (where the output dir lies and whether it is writable is lora.output_dir's)."""
    evidence = {"shm": shm, "output_dir": output_dir,
                "port_holders": [h for h in port_holders.get("holders", []) if h["port"] == port_holders["port"]],
                "gpu_holders": gpu_holders.get("holders", [])}
    found = Findings()
    found.check(shm_big_enough, shm, profile)
    found.check(output_dir_has_room, output_dir)
    found.check(rendezvous_port_not_held, port_holders)
    found.check(gpus_not_held, gpu_holders)
    return found.result(ok_summary(shm, output_dir, port_holders), evidence)
