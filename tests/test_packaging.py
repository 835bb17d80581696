"""The wheel: installs in a fresh venv, ships checks/launch/reports inside dsv3_preflight, and runs from anywhere."""
import subprocess
import sys
import venv
import zipfile

import pytest

from conftest import REPO


@pytest.mark.slow
def test_wheel_installs_in_a_fresh_venv_and_lists_checks_from_another_directory(tmp_path):
    dist = tmp_path / "dist"
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(dist), str(REPO)],
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
    install = subprocess.run([str(py), "-m", "pip", "install", "--quiet", str(wheel)], capture_output=True, text=True, timeout=900)
    assert install.returncode == 0, install.stderr[-3000:]
    assert subprocess.run([str(py), "-c", "import torch"], capture_output=True).returncode != 0  # not pulled in
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    listing = subprocess.run([str(env_dir / "bin" / "dsv3-preflight"), "list", "--no-color"], cwd=elsewhere,
                             capture_output=True, text=True, timeout=120)
    assert listing.returncode == 0, listing.stderr
    assert "env.launch_vars" in listing.stdout and "host.resources" in listing.stdout
    run = subprocess.run([str(env_dir / "bin" / "dsv3-preflight"), "run", "--profile", "cpu", "--only", "env.launch_vars",
                          "--no-report"], cwd=elsewhere, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
