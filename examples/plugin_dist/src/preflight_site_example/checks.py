"""Example entry-point plugin: a probe (the open-file limit) and a pure check that judges it."""
import resource

from dsv3_preflight import Result, check, probe

NEEDED = 65536


@probe("nofile_limit", timeout=2)
def nofile_limit():
    """The soft and hard RLIMIT_NOFILE of this process (what torchrun's children inherit)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    infinite = resource.RLIM_INFINITY
    return {"soft": None if soft == infinite else soft, "hard": None if hard == infinite else hard}


@check("site.ulimit_nofile", needs=["nofile_limit"], tags=["site"], timeout=5)
def ulimit_nofile(nofile_limit):
    """The open-file limit suits NCCL's many sockets (>= 65536)."""
    soft = nofile_limit["soft"]
    if soft is not None and soft < NEEDED:
        return Result.warned(f"open-file limit is {soft} (< {NEEDED})", evidence=nofile_limit,
                             remediation="ulimit -n 1048576   # or --ulimit nofile=1048576:1048576 for docker")
    return Result.passed(f"open-file limit is {soft or 'unlimited'}", evidence=nofile_limit)
