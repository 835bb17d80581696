"""The docs cannot rot: the README stays a README, every file a page names exists, every command block
marked `<!-- doc-test: run -->` runs with the exit code it says (0 unless its comment says `exit N`),
every output block marked `<!-- doc-test: output of "CMD" -->` is what CMD prints, and the check and
probe DEVELOPING.md shows work as one file each.

Commands run as a user would, from a fresh directory that holds links to the repository's examples,
data and checks (so nothing they write lands in the repository), with this checkout's dsv3-preflight
first on PATH and a free MASTER_PORT.
"""
from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO
from ports import free_port

PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
LINKED = ("examples", "tests", "checks", "docs", "scripts", "benchmarks", "pyproject.toml")
MARK = re.compile(r"<!-- doc-test: (run|output of \"(?P<cmd>[^\"]+)\") -->\n```\w*\n(?P<body>.*?)\n```", re.S)
PATHLIKE = re.compile(r"(?:\]\(|`)((?:\.\./)?(?:examples|docs|scripts|benchmarks|tests|checks|reports|launch|dsv3_preflight)"
                      r"/[\w./*-]*|[\w-]+\.md)(?:\)|`|#)")


@pytest.fixture()
def workdir(tmp_path):
    for name in LINKED:
        (tmp_path / name).symlink_to(REPO / name)
    return tmp_path


def _env(workdir: Path) -> dict[str, str]:
    drop = {"MASTER_ADDR", "MASTER_PORT", "NNODES", "NODE_RANK", "WORLD_SIZE", "RAY_ADDRESS", "NPROC_PER_NODE",
            "OUTPUT_DIR", "MODEL_PATH", "DEEPSPEED_CONFIG", "LOCAL_WORLD_SIZE", "CUDA_VISIBLE_DEVICES"}
    env = {k: v for k, v in os.environ.items() if k not in drop and not k.startswith(("NCCL_", "GLOO_", "PYTEST_"))}
    # TMPDIR: a documented launch starts torchrun, which leaves $TMPDIR/torchelastic_* behind without --log-dir
    tmpdir = workdir / ".tmp"
    tmpdir.mkdir(exist_ok=True)
    env.update(PATH=f"{Path(sys.executable).parent}:{env.get('PATH', '/usr/bin:/bin')}", MASTER_PORT=str(free_port()),
               COLUMNS="200", NO_COLOR="1", TMPDIR=str(tmpdir))
    return env


def _blocks():
    for page in PAGES:
        for m in MARK.finditer(page.read_text(encoding="utf-8")):
            yield page, m


RUN_BLOCKS = [(p, m.group("body")) for p, m in _blocks() if m.group(1) == "run"]
OUTPUT_BLOCKS = [(p, m.group("cmd"), m.group("body")) for p, m in _blocks() if m.group("cmd")]


def test_the_readme_is_a_readme():
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 250, len(lines)
    assert lines[0] == "# dsv3-preflight"
    assert "bash scripts/preflight.sh" in lines and "bash scripts/test.sh" in lines


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_every_file_a_page_names_exists(page):
    text = page.read_text(encoding="utf-8")
    missing = []
    for match in PATHLIKE.finditer(text):
        name = match.group(1).rstrip(".")
        if "*" in name or "<" in name:
            continue
        base = page.parent if name.startswith("../") or (page.parent.name == "docs" and "/" not in name) else REPO
        if not (base / name).exists():
            missing.append(name)
    assert not missing, f"{page.name} names files that do not exist: {missing}"


def test_every_docs_page_is_linked_from_the_readme():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    for page in sorted((REPO / "docs").glob("*.md")):
        assert f"(docs/{page.name})" in readme, page.name


def _expected_code(line: str) -> int:
    m = re.search(r"#.*\bexit (\d)", line)
    return int(m.group(1)) if m else 0


@pytest.mark.slow
@pytest.mark.parametrize("page, body", RUN_BLOCKS, ids=[f"{p.name}:{i}" for i, (p, _) in enumerate(RUN_BLOCKS)])
def test_documented_commands_run_with_the_documented_exit_code(page, body, workdir):
    for line in (line for line in body.splitlines() if line.strip() and not line.lstrip().startswith("#")):
        proc = subprocess.run(["bash", "-c", line], cwd=workdir, env=_env(workdir), capture_output=True, text=True, timeout=300)
        assert proc.returncode == _expected_code(line), f"{page.name}: {line}\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
        assert "Traceback" not in proc.stderr, proc.stderr[-2000:]


def _norm(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.slow
@pytest.mark.parametrize("page, cmd, body", OUTPUT_BLOCKS, ids=[f"{p.name}:{i}" for i, (p, _, _) in enumerate(OUTPUT_BLOCKS)])
def test_documented_output_is_what_the_command_prints(page, cmd, body, workdir):
    proc = subprocess.run(shlex.split(cmd), cwd=workdir, env=_env(workdir), capture_output=True, text=True, timeout=300)
    printed = [_norm(line) for line in proc.stdout.splitlines()]
    at = 0
    for line in (_norm(line) for line in body.splitlines() if line.strip() and "..." not in line):
        hits = [i for i in range(at, len(printed)) if line in printed[i]]
        assert hits, f"{page.name}: {line!r} is not printed (in order) by {cmd}:\n{proc.stdout}"
        at = hits[0] + 1


@pytest.mark.slow
def test_the_check_and_the_probe_of_developing_md_work_as_one_file_each(workdir):
    text = (REPO / "docs" / "DEVELOPING.md").read_text(encoding="utf-8")
    snippets = re.findall(r"```python\n(# (\S+)\n.*?)```", text, re.S)
    files = {Path(path).name: code for code, path in snippets}
    assert set(files) == {"host_swap.py", "meminfo.py"}, files.keys()
    site = workdir / "site"
    site.mkdir()
    for name, code in files.items():
        (site / name).write_text(code)
    out = workdir / "doc.json"
    proc = subprocess.run(["dsv3-preflight", "run", "--profile", "cpu", "--checks-dir", str(site), "--only", "host.swap",
                           "--json", str(out), "--no-report"], cwd=workdir, env=_env(workdir), capture_output=True, text=True, timeout=120)
    import json

    [result] = json.loads(out.read_text())["results"]
    assert result["status"] in ("pass", "fail"), result
    assert result["summary"].endswith("MiB of swap in use" if result["status"] == "fail" else "MiB configured)"), result
    assert proc.returncode == (0 if result["status"] == "pass" else 1), proc.stderr


BASH_BLOCK = re.compile(r"```bash\n(.*?)\n```", re.S)


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_every_bash_block_of_the_docs_pastes(page):
    from paste_lint import paste_problems

    bad = {}
    for block in BASH_BLOCK.findall(page.read_text(encoding="utf-8")):
        problems = [p for p in paste_problems(block) if not p.startswith("line") or "placeholder" in p]
        if problems:
            bad[block[:80]] = problems
    assert not bad, bad
