"""`dsv3-preflight lint FILE.yaml` end to end (a real subprocess), the same checks under `pytest checks/`, and the
fixes pasted into bash (yq played by jq, tests/kuberay_yq_jq.py) until the manifest lints clean."""
import json
import shutil
import subprocess
import sys
import textwrap

import pytest
from conftest import REPO, python_cli
from kuberay_lab import KUBERAY

HEAVY = ("torch", "ray", "deepspeed", "peft", "transformers")


def lint(*args, cwd=None):
    return subprocess.run(python_cli("lint", "--no-color", *args), capture_output=True, text=True, timeout=120,
                          cwd=cwd)


def test_a_clean_rayjob_exits_0():
    proc = lint(str(KUBERAY / "rayjob_good.yaml"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.rstrip().endswith("GO: 6 pass")


def test_a_rayjob_that_loses_its_checkpoints_exits_1_naming_file_and_line():
    path = KUBERAY / "rayjob_loses_checkpoints.yaml"
    proc = lint(str(path))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"✘ FAIL kuberay.storage: {path}:8: RayJob pytorch-lora-*: shutdownAfterJobFinishes: true" in proc.stdout
    assert "who acts: the job's configuration (paste the fix)" in proc.stdout
    assert proc.stdout.rstrip().endswith("NO-GO: 1 fail, 4 warn, 1 pass")


def test_warnings_exit_0_and_1_under_strict():
    path = str(KUBERAY / "rayjob_idle_gpus.yaml")
    assert lint(path).returncode == 0
    assert lint("--strict", path).returncode == 1


@pytest.mark.parametrize("name, why", [
    ("not_ray.yaml", "no RayJob or RayCluster (apiVersion ray.io/v1) in it: Deployment (line 1)"),
    ("absent.yaml", "no such file"),
])
def test_a_file_that_is_no_ray_manifest_exits_4(name, why):
    proc = lint(str(KUBERAY / name))
    assert proc.returncode == 4 and proc.stdout == ""
    assert proc.stderr.startswith(f"dsv3-preflight: error: KubeRay manifest {KUBERAY / name}: {why}")


def test_json_and_junit_are_the_run_documents(tmp_path):
    doc_path, junit = tmp_path / "lint.json", tmp_path / "lint.xml"
    proc = lint("--json", str(doc_path), "--junit", str(junit), str(KUBERAY / "raycluster_8gpu.yaml"))
    assert proc.returncode == 1
    doc = json.loads(doc_path.read_text())
    assert doc["verdict"] == "NO-GO" and doc["exit_code"] == 1
    assert {r["name"]: r["status"] for r in doc["results"]} == {
        "kuberay.shm": "fail", "kuberay.nccl_ifname": "warn", "kuberay.storage": "skip", "kuberay.gpu_limits": "skip",
        "kuberay.deadline": "skip", "kuberay.backoff": "skip"}
    assert doc["profile"]["values"]["kuberay_manifest"] == str(KUBERAY / "raycluster_8gpu.yaml")
    assert "kuberay.shm" in junit.read_text()


@pytest.mark.parametrize("args", [["lint", "--help"], ["lint", "--no-color", str(KUBERAY / "rayjob_good.yaml")]])
def test_lint_imports_no_heavy_library(args):
    code = textwrap.dedent(f"""
        import sys
        from dsv3_preflight.cli import main
        try:
            main({args!r})
        except SystemExit:
            pass
        print("HEAVY=" + ",".join(sorted(m for m in {HEAVY!r} if m in sys.modules)))
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.stdout.rstrip().endswith("HEAVY="), proc.stdout[-2000:] + proc.stderr[-2000:]


def pytest_checks(*args):
    return subprocess.run([sys.executable, "-m", "pytest", "checks/", "-p", "no:cacheprovider", "-k", "kuberay",
                           "--preflight-profile", "cpu", "-rA", *args],
                          cwd=REPO, capture_output=True, text=True, timeout=240)


@pytest.mark.slow
def test_pytest_checks_runs_the_lint_with_a_manifest():
    proc = pytest_checks("--kuberay-manifest", str(KUBERAY / "rayjob_env_scaling.yaml"))
    assert proc.returncode == 1, proc.stdout[-3000:]
    assert "3 failed, 3 passed" in proc.stdout, proc.stdout[-3000:]
    assert "FAIL kuberay.gpu_limits" in proc.stdout and "num_workers 8 × 1 GPU = 8 GPUs" in proc.stdout


@pytest.mark.slow
def test_pytest_checks_skips_the_lint_without_a_manifest():
    proc = pytest_checks()
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "6 skipped" in proc.stdout
    assert "no KubeRay manifest given (dsv3-preflight lint FILE.yaml, or --kuberay-manifest FILE)" in proc.stdout


NEEDS_JQ = pytest.mark.skipif(shutil.which("jq") is None,
                              reason="jq is not installed: the fixes' yq expressions are run by jq")


def paste_fixes(manifest, doc_path, checks):
    """Run the fixes of ``checks`` from the lint's document in bash, yq played by jq; the placeholders set."""
    fixes = [r["remediation"] for r in json.loads(doc_path.read_text())["results"]
             if r["remediation"] and r["name"] in checks]
    script = "\n".join([f"yq() {{ {sys.executable} {REPO / 'tests' / 'kuberay_yq_jq.py'} \"$@\"; }}",
                        "CLAIM=shared-ckpt DEADLINE_S=86400 NCCL_SOCKET_IFNAME=eth0", *fixes])
    run = subprocess.run(["bash", "-euo", "pipefail", "-c", script], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert fixes


def statuses(doc_path):
    return {r["name"]: r["status"] for r in json.loads(doc_path.read_text())["results"]}


@pytest.mark.slow
@NEEDS_JQ
@pytest.mark.parametrize("name", ["rayjob_loses_checkpoints.yaml", "raycluster_8gpu.yaml"])
def test_pasting_the_manifest_fixes_clears_their_findings(tmp_path, name):
    manifest, doc_path = tmp_path / name, tmp_path / "lint.json"
    shutil.copy(KUBERAY / name, manifest)
    assert lint("--json", str(doc_path), str(manifest)).returncode == 1
    edits = ("kuberay.shm", "kuberay.deadline", "kuberay.backoff", "kuberay.nccl_ifname")
    paste_fixes(manifest, doc_path, edits)
    after = lint("--json", str(doc_path), str(manifest))
    assert {n: s for n, s in statuses(doc_path).items() if n in edits and s not in ("pass", "skip")} == {}, after.stdout


@pytest.mark.slow
@NEEDS_JQ
def test_the_shared_claim_and_a_storage_path_on_it_clear_the_storage_failure(tmp_path):
    manifest, doc_path = tmp_path / "job.yaml", tmp_path / "lint.json"
    shutil.copy(KUBERAY / "rayjob_env_scaling.yaml", manifest)
    assert lint("--json", str(doc_path), str(manifest)).returncode == 1
    paste_fixes(manifest, doc_path, ("kuberay.storage",))
    body = manifest.read_text()
    assert "value: /home/ray/checkpoints" in body   # the storage path itself is the person's (its comment says so)
    manifest.write_text(body.replace("value: /home/ray/checkpoints", "value: /mnt/cluster_storage/env-scaling"))
    lint("--json", str(doc_path), str(manifest))
    assert statuses(doc_path)["kuberay.storage"] == "pass"


def test_a_token_in_the_manifests_env_is_masked_in_the_document(tmp_path):
    manifest, doc_path = tmp_path / "job.yaml", tmp_path / "lint.json"
    token = "hf_" + "Zq8Lx2Vb7Nc4Mw1Ks9Pd3Rt6Yh5Gf0Ja"
    manifest.write_text((KUBERAY / "rayjob_env_scaling.yaml").read_text().replace(
        "      NCCL_SOCKET_IFNAME: \"eth0\"\n", f"      NCCL_SOCKET_IFNAME: \"eth0\"\n      HF_TOKEN: \"{token}\"\n"))
    lint("--json", str(doc_path), str(manifest))
    text = doc_path.read_text()
    assert token not in text and "HF_TOKEN" in text
