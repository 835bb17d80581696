"""A site's own check, loaded with `--checks-dir examples/site_checks` (a complete, working example).

It declares one probe (a fact: the scratch directory's free space) and one check that judges it.
"""
import os

from dsv3_preflight import Result, check, probe

SCRATCH_ENV = "SITE_SCRATCH_DIR"


@probe("site_scratch", timeout=5)
def site_scratch():
    """Free bytes in $SITE_SCRATCH_DIR (default /tmp)."""
    path = os.environ.get(SCRATCH_ENV, "/tmp")
    try:
        st = os.statvfs(path)
    except OSError as exc:
        return {"path": path, "error": exc.strerror}
    return {"path": path, "free_bytes": st.f_bavail * st.f_frsize}


@check("site.scratch_space", needs=["site_scratch"], tags=["site"], timeout=5)
def scratch_space(site_scratch):
    """The site's scratch directory exists and has at least 1 GiB free."""
    if "error" in site_scratch:
        return Result.failed(f"scratch dir {site_scratch['path']} unusable: {site_scratch['error']}",
                             evidence=site_scratch, remediation=f"export {SCRATCH_ENV}=/path/to/local/scratch")
    free_gib = site_scratch["free_bytes"] / 2**30
    if free_gib < 1:
        return Result.failed(f"scratch dir {site_scratch['path']} has {free_gib:.2f} GiB free (< 1 GiB)",
                             evidence=site_scratch, remediation=f"clean up {site_scratch['path']} or point {SCRATCH_ENV} elsewhere")
    return Result.passed(f"scratch dir {site_scratch['path']} has {free_gib:.0f} GiB free", evidence=site_scratch)
