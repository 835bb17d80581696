"""The fact cache (dsv3_preflight/factcache.py): a node's preflight asks its libraries the same questions every run
(peft on DeepSeek-V3's config, the Trainer's DeepSpeed set-up); the answer is kept, keyed by all it depends on, and
asked again whenever any of that changes."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dsv3_preflight import factcache

DATA = Path(__file__).resolve().parents[1] / "data" / "lora"


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    where = tmp_path / "cache"
    monkeypatch.setenv(factcache.DIR_ENV, str(where))
    monkeypatch.delenv(factcache.OFF_ENV, raising=False)
    return where


class Asker:
    """What the library would answer, and how often it was asked."""

    def __init__(self, answer: dict) -> None:
        self.answer, self.asked = answer, 0

    def __call__(self) -> dict:
        self.asked += 1
        return dict(self.answer)


def _ask(question, asker, **kw):
    return factcache.remembered("test", question, asker, dists=kw.pop("dists", ("pytest",)), code=("lora",), **kw)


def test_the_same_question_is_answered_once_and_then_from_the_cache_with_its_time(cache):
    asker = Asker({"modules": {"b": 1, "a": 2}, "count": 3})
    first = _ask({"config": {"x": 1}}, asker)
    second = _ask({"config": {"x": 1}}, asker)
    assert asker.asked == 1
    assert first == {"modules": {"b": 1, "a": 2}, "count": 3}
    assert list(second["modules"]) == ["b", "a"]   # the library's own order, kept
    assert {k: v for k, v in second.items() if k != "from_cache"} == first
    assert time.strptime(second["from_cache"], "%Y-%m-%dT%H:%M:%SZ")
    assert [p.name.startswith("test-") for p in cache.iterdir()] == [True]


def test_another_question_another_library_or_environment_is_asked_again(cache, monkeypatch):
    asker = Asker({"ok": True})
    _ask({"targets": ["q_a_proj"]}, asker)
    _ask({"targets": ["q_proj"]}, asker)
    assert asker.asked == 2
    _ask({"targets": ["q_a_proj"]}, asker, dists=("pytest", "psutil"))
    assert asker.asked == 3
    monkeypatch.setenv("ACCELERATE_MIXED_PRECISION", "bf16")
    _ask({"targets": ["q_a_proj"]}, asker, env_prefixes=("ACCELERATE_",))
    _ask({"targets": ["q_a_proj"]}, asker, env_prefixes=("ACCELERATE_",))
    monkeypatch.setenv("ACCELERATE_MIXED_PRECISION", "fp16")
    _ask({"targets": ["q_a_proj"]}, asker, env_prefixes=("ACCELERATE_",))
    assert asker.asked == 5
    monkeypatch.setenv("ACCELERATE_HUB_TOKEN", "hf_aVeryRealLookingTokenValue1234")   # keyed by, never written
    _ask({"targets": ["q_a_proj"]}, asker, env_prefixes=("ACCELERATE_",))
    assert asker.asked == 6
    assert not [p for p in cache.iterdir() if "hf_aVeryRealLookingTokenValue1234" in p.read_text()]


def test_a_package_installed_on_the_import_path_makes_every_answer_stale(cache, tmp_path, monkeypatch):
    """A dependency's dependency changing under the same peft (issue 42's huggingface_hub) is not in the libraries
    named; the import path's directories changing is."""
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.setattr(sys, "path", [*sys.path, str(site)])   # a site-packages (sys.path[0] is the script's own)
    asker = Asker({"ok": True})
    _ask({"q": 1}, asker)
    _ask({"q": 1}, asker)
    assert asker.asked == 1
    time.sleep(0.01)
    (site / "kernels").mkdir()   # what an install does to its site-packages
    _ask({"q": 1}, asker)
    assert asker.asked == 2


def test_answers_not_kept_unreadable_entries_and_the_off_switch(cache, monkeypatch):
    timed_out = Asker({"available": None, "timed_out": True})
    for _ in range(2):
        _ask({"q": "chain"}, timed_out, keep=lambda got: got.get("available") is not None)
    assert timed_out.asked == 2 and not cache.exists()
    not_json = Asker({"shape": (1, 2)})   # JSON would give back a list: not kept
    _ask({"q": "tuple"}, not_json)
    _ask({"q": "tuple"}, not_json)
    assert not_json.asked == 2
    asker = Asker({"ok": True})
    _ask({"q": "x"}, asker)
    [entry] = list(cache.iterdir())
    entry.write_text('{"material": {}, "answer": {"ok": false}}')   # another key's, or tampered
    assert _ask({"q": "x"}, asker) == {"ok": True} and asker.asked == 2
    entry.write_text("{cut")
    assert _ask({"q": "x"}, asker) == {"ok": True} and asker.asked == 3
    monkeypatch.setenv(factcache.OFF_ENV, "off")
    _ask({"q": "x"}, asker)
    assert asker.asked == 4


def test_a_cache_that_cannot_be_written_only_means_no_memory(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv(factcache.DIR_ENV, str(blocker / "cache"))   # under a file: mkdir fails
    asker = Asker({"ok": True})
    assert _ask({"q": 1}, asker) == {"ok": True}
    assert _ask({"q": 1}, asker) == {"ok": True}
    assert asker.asked == 2


def _targets(tmp_path: Path, env: dict, name: str) -> dict:
    out = tmp_path / f"{name}.json"
    subprocess.run([sys.executable, "-m", "dsv3_preflight", "run", "--profile", "cpu", "--no-report", "--no-color",
                    "--only", "lora.targets", "--model-path", str(DATA / "deepseek_v3_config.json"),
                    "--lora-targets", "q_a_proj,q_b_proj,kv_a_proj_with_mqa,kv_b_proj,o_proj", "--lora-rank", "16",
                    "--json", str(out)], env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    return json.loads(out.read_text())


@pytest.mark.slow
def test_a_second_run_of_lora_targets_imports_no_library_and_reports_the_same(tmp_path):
    """peft's answer on DeepSeek-V3 (the import of transformers and peft is most of a run's CPU) comes from the cache
    in the second run: the same result, the facts saying when it was computed."""
    env = {**os.environ, factcache.DIR_ENV: str(tmp_path / "cache")}
    env.pop(factcache.OFF_ENV, None)
    first, second = _targets(tmp_path, env, "first"), _targets(tmp_path, env, "second")
    assert [r["status"] for r in first["results"]] == ["pass"]
    strip = [{k: v for k, v in r.items() if k != "duration_s"} for r in first["results"]]
    assert [{k: v for k, v in r.items() if k != "duration_s"} for r in second["results"]] == strip
    text = json.dumps(second)
    assert '"from_cache"' in text and '"from_cache"' not in json.dumps(first)
    kept = sorted(p.name.split("-")[0] for p in (tmp_path / "cache").iterdir())
    assert kept == ["detect_secrets_patterns", "model_modules", "peft_targets"]


def test_the_secret_patterns_from_the_cache_are_detect_secrets_own(cache):
    """Every command that writes a document masks it with detect-secrets' patterns; importing detect-secrets (and
    requests) for them was a fifth of a short command's CPU. From the cache they are the same patterns."""
    from dsv3_preflight import secrets

    own = [(name, rx.pattern, rx.flags) for name, rx in secrets._detect_secrets_compiled()]
    assert len(own) > 30
    for _ in range(2):
        got = [(name, rx.pattern, rx.flags) for name, rx in secrets.detect_secrets_patterns()]
        assert got == own
    assert [p.name.split("-")[0] for p in cache.iterdir()] == ["detect_secrets_patterns"]
