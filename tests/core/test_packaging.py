"""The wheel, the install path the README and docs/cluster.md give users (the package is on no index): built once
with ``python -m build --wheel``, installed by pip into a fresh virtual environment (its dependencies held to
requirements/lock.txt, so a release upstream cannot turn this red), it ships checks/launch/reports inside
dsv3_preflight, and ``--help``, ``list`` and ``run --profile cpu`` work from any directory."""
import subprocess
import sys
import venv
import zipfile

import pytest
from conftest import REPO


@pytest.mark.slow
def test_wheel_installs_in_a_fresh_venv_and_lists_checks_from_another_directory(tmp_path):
    dist = tmp_path / "dist"
    # the documented `python -m build --wheel`, without isolation here: setuptools and wheel come from the lock
    build = subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(dist), str(REPO)],
                           capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stderr[-3000:]
    # our own packaging makes no noise (issue 16.9: the license table, package-data of the mapped packages)
    noise = [line for line in (build.stdout + build.stderr).splitlines() if "Warning" in line or "deprecated" in line.lower()]
    assert not noise, noise
    [wheel] = dist.glob("dsv3_preflight-*.whl")
    # installing into a training environment never touches its torch: torch is only ever an extra
    metadata = zipfile.ZipFile(wheel).read(next(n for n in zipfile.ZipFile(wheel).namelist()
                                                if n.endswith(".dist-info/METADATA"))).decode()
    torch_requires = [line for line in metadata.splitlines() if line.startswith("Requires-Dist: torch")]
    assert torch_requires and all("extra ==" in line for line in torch_requires), torch_requires
    names = zipfile.ZipFile(wheel).namelist()
    top_level = {n.split("/")[0] for n in names}
    assert not top_level & {"checks", "launch", "reports", "tests", "benchmarks"}, top_level
    for required in ("dsv3_preflight/checks/env_launch_vars.py", "dsv3_preflight/launch/__init__.py",
                     "dsv3_preflight/reports/__init__.py", "dsv3_preflight/schema/result.schema.json"):
        assert required in names
    assert any(n.startswith("dsv3_preflight/reports/templates/") for n in names)

    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    py = env_dir / "bin" / "python"
    install = subprocess.run([str(py), "-m", "pip", "install", "--quiet", "-c", str(REPO / "requirements" / "lock.txt"),
                              str(wheel)], capture_output=True, text=True, timeout=900)
    assert install.returncode == 0, install.stderr[-3000:]
    assert subprocess.run([str(py), "-c", "import torch"], capture_output=True).returncode != 0  # not pulled in
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    listing = subprocess.run([str(env_dir / "bin" / "dsv3-preflight"), "list", "--no-color"], cwd=elsewhere,
                             capture_output=True, text=True, timeout=120)
    assert listing.returncode == 0, listing.stderr
    assert "env.launch_vars" in listing.stdout and "host.resources" in listing.stdout
    helped = subprocess.run([str(env_dir / "bin" / "dsv3-preflight"), "--help"], cwd=elsewhere, capture_output=True,
                            text=True, timeout=120)
    assert helped.returncode == 0 and "launch" in helped.stdout and "doctor" in helped.stdout, helped.stderr
    run = subprocess.run([str(env_dir / "bin" / "dsv3-preflight"), "run", "--profile", "cpu", "--no-report", "--no-color",
                          "--json", str(tmp_path / "run.json")], cwd=elsewhere, capture_output=True, text=True,
                         timeout=300)
    import json

    results = {r["name"]: r for r in json.loads((tmp_path / "run.json").read_text())["results"]}
    assert results["env.launch_vars"]["status"] == "pass" and "host.resources" in results, results
    # this environment has no torch (the wheel never pulls it): the one red result says so, in that many words,
    # and is the job's to fix; it is not "did not finish importing torch before the deadline" after a second
    red = {name: r for name, r in results.items() if r["status"] in ("fail", "error")}
    assert run.returncode == 1 and list(red) == ["dist.allreduce"], (run.stdout[-3000:], red)
    assert "torch cannot be imported in the Python that runs the probe (No module named 'torch')" in red[
        "dist.allreduce"]["summary"] and red["dist.allreduce"]["actor"] == "job", red
