"""A planted corpus: secrets in the environment, in another variable's JSON, in URLs, in a training command and in a
log line must be absent from every artifact the tool writes or prints (the JSON document, the HTML report,
--facts-out, a merged report, the launch log, the console of run/launch/report/doctor); named non-secrets
(PWD, RAY_AUTH_MODE, MASTER_ADDR, NCCL_SOCKET_IFNAME, TOKENIZERS_PARALLELISM, paths) must still be there.

The corpus holds the 10 values that leaked in issue 21 (DB_PASS, SSHPASS, GITHUB_PAT, CI_JOB_JWT, a Slack webhook's
secret path, https://TOKEN@host, an hf_token inside a JSON log line, Azure AccountKey=, https://:PASS@host, a
JSON "WANDB_API_KEY" inside another variable) and the usual ones.
"""
from __future__ import annotations

import json
import subprocess

import pytest
from conftest import python_cli
from harness_env import env_without

from dsv3_preflight.secrets import is_secret_name, leaks, mask, mask_text

AZURE_KEY = "PLANTazure" + "A" * 78  # 88 characters, the shape of a storage account key
#: variable -> (value, the secret part that must never appear)
PLANTED_ENV = {
    "DB_PASS": ("dbPLANT01pass", "dbPLANT01pass"),
    "SSHPASS": ("sshPLANT02pass", "sshPLANT02pass"),
    "GITHUB_PAT": ("github_pat_11AAPLANT03bbbbbbbbbbbbbbbbbbbbbbbbbbbb", "PLANT03"),
    "CI_JOB_JWT": ("eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJQTEFOVDA0In0.PLANT04signature", "PLANT04"),
    "ALERTS_WEBHOOK": ("https://hooks.slack.com/services/T0PLANT05/B0PLANT05/plant05secretpath", "plant05secretpath"),
    "GIT_REMOTE": ("https://ghtokenPLANT06abcdef@git.example.com/ml/lora.git", "ghtokenPLANT06abcdef"),
    "AZURE_STORAGE_CONNECTION_STRING": (f"DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={AZURE_KEY};"
                                        "EndpointSuffix=core.windows.net", AZURE_KEY),
    "DATABASE_URL": ("postgres://:PLANT08pass@db.internal:5432/app", "PLANT08pass"),
    "APP_CONFIG": ('{"WANDB_API_KEY": "PLANT09wandb0123456789abcdef0123456789"}', "PLANT09wandb"),
    "HF_TOKEN": ("hf_PLANT11abcdefghijklmnopqrstuvwxyzABCD", "PLANT11"),
    "WANDB_API_KEY": ("0123456789abcdef0123456789abcdefPLANT12", "PLANT12"),
    "AWS_SECRET_ACCESS_KEY": ("wJalrXUtnFEMI/K7MDENG/bPxRfiCYPLANT13", "PLANT13"),
    "AWS_ACCESS_KEY_ID": ("AKIAPLANT14XXXXXXXXX", "AKIAPLANT14"),
    "HTTPS_PROXY": ("http://bob:PLANT15proxy@proxy.corp:3128", "PLANT15proxy"),
    "MYSQL_PWD": ("PLANT16mysql", "PLANT16mysql"),
    "NPM_TOKEN": ("npm_PLANT17abcdefghijklmnopqrstuvwxyz0123", "PLANT17"),
    "OPENAI_API_KEY": ("sk-PLANT18abcdefghijklmnopqrstuvwxyz", "PLANT18"),
    "REDIS_PASSWORD": ("PLANT19redis", "PLANT19redis"),
    "RAY_AUTH_TOKEN": ("PLANT20raytoken", "PLANT20raytoken"),
    "SENTRY_DSN": ("https://PLANT21public@o1.ingest.sentry.io/42", "PLANT21public"),
    "TRAIN_EXTRA": ("--hf_token hf_PLANT22abcdefghijklmnopqrstuvwxyzAB --lr 1e-4", "PLANT22"),
    "SLACK_BOT": ("xoxb-1234-5678-PLANT23abcdefgh", "PLANT23"),
    "SSH_PRIVATE_KEY": ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaPLANT24\n-----END OPENSSH PRIVATE KEY-----",
                        "PLANT24"),
    "GITLAB_CI_TOKEN": ("glpat-PLANT25abcdefghijklmn", "PLANT25"),
    "PIP_INDEX_URL": ("https://user:PLANT26pip@pypi.corp/simple", "PLANT26pip"),
    # issue 46.4: a webhook on another host than hooks.slack.com appeared verbatim beside variables shown as ***
    "SLACK_WEBHOOK_URL": ("https://127.0.0.1/services/T0/B0/SLACKSECRET1234", "SLACKSECRET1234"),
}
#: named non-secrets (value must survive masking)
KEPT_ENV = {"RAY_AUTH_MODE": "token", "NCCL_SOCKET_IFNAME": "lo", "TOKENIZERS_PARALLELISM": "false",
            "SSH_KEY_FILE": "/home/me/.ssh/id_ed25519", "MY_DATA_PATH": "/data/corpus/train", "GLOO_SOCKET_IFNAME": "lo"}
LOG_SECRET = "hf_PLANT10abcdefghijklmnopqrstuvwxyzAB"
LOG_LINES = [
    '{"ts": "2026-01-01T00:00:00", "level": "info", "msg": "args", "hf_token": "' + LOG_SECRET + '"}',
    "[rank0]: torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled system error",
    "connecting with WANDB_API_KEY=PLANT27wandb0123456789abcdef0123456789ab",
    # issue 46.4: the second of two comma-separated keys read 'api_key=***,SECONDSECRET222'
    "wandb: ERROR api_key=FIRSTSECRET111,SECONDSECRET222",
]
TRAIN_SECRET = "hf_PLANT28abcdefghijklmnopqrstuvwxyzAB"
SECRETS = [secret for _, secret in PLANTED_ENV.values()] + [LOG_SECRET, "PLANT27wandb", TRAIN_SECRET,
                                                             "FIRSTSECRET111", "SECONDSECRET222"]


def test_the_corpus_is_what_the_issue_planted():
    assert len(SECRETS) >= 25 and len(set(SECRETS)) == len(SECRETS)
    for name in ("DB_PASS", "SSHPASS", "GITHUB_PAT", "CI_JOB_JWT", "MYSQL_PWD", "RAY_AUTH_TOKEN", "hfToken", "--api-key"):
        assert is_secret_name(name), name
    for name in ("PWD", "OLDPWD", "RAY_AUTH_MODE", "MASTER_ADDR", "NCCL_SOCKET_IFNAME", "TOKENIZERS_PARALLELISM",
                 "SSH_KEY_FILE", "PATH", "HOME"):
        assert not is_secret_name(name), name


#: planted values a scanner finds by their shape alone, whatever variable or line holds them
BY_SHAPE = ("GITHUB_PAT", "CI_JOB_JWT", "ALERTS_WEBHOOK", "GIT_REMOTE", "AZURE_STORAGE_CONNECTION_STRING", "DATABASE_URL",
            "APP_CONFIG", "HF_TOKEN", "AWS_ACCESS_KEY_ID", "HTTPS_PROXY", "SENTRY_DSN", "TRAIN_EXTRA", "SLACK_BOT",
            "SSH_PRIVATE_KEY", "GITLAB_CI_TOKEN", "PIP_INDEX_URL", "SLACK_WEBHOOK_URL")


@pytest.mark.parametrize("name", sorted(PLANTED_ENV))
def test_each_planted_value_is_masked_by_its_name(name):
    value, secret = PLANTED_ENV[name]
    assert secret not in json.dumps(mask({"env": {name: value}}))
    assert secret not in mask_text(f"export {name}={value}") and secret not in mask_text(f'"{name}": "{value}"')


@pytest.mark.parametrize("name", BY_SHAPE)
def test_a_credential_shaped_value_is_masked_under_any_name(name):
    value, secret = PLANTED_ENV[name]
    assert secret not in json.dumps(mask({"env": {"SOME_SETTING": value}, "line": f"saw {value} in the log"}))


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory):
    """Every artifact of a real run, a merged report, a dry-run launch and doctor, all under the planted env."""
    work = tmp_path_factory.mktemp("planted")
    env = env_without(("MASTER_", "NCCL_", "GLOO_", "DSV3_PREFLIGHT"), ())
    env.update({k: v for k, (v, _) in PLANTED_ENV.items()})
    env.update(KEPT_ENV)
    env.update({"MASTER_ADDR": "127.0.0.1", "PWD": str(work)})
    log = work / "train.log"
    log.write_text("\n".join(LOG_LINES) + "\n")
    (work / "train.py").write_text("print('training')\n")
    out: dict[str, str] = {}

    def cli(*args: str) -> subprocess.CompletedProcess:
        proc = subprocess.run(python_cli(*args), env=env, cwd=work, capture_output=True, text=True, timeout=300)
        key = f"console of {args[0]}"
        out[key] = out.get(key, "") + (proc.stdout if args[0] != "launch" else "") + proc.stderr
        return proc

    cli("run", "--profile", "cpu", "--no-color", "--json", "a.json", "--html", "a.html", "--facts-out", "facts.json",
        "--logs", str(log))
    cli("run", "--profile", "cpu", "--no-color", "--json", "b.json", "--no-report", "--only", "env.*")
    cli("report", "a.json", "b.json", "-o", "merged.html", "--json", "merged.json")
    launch = cli("launch", "--profile", "cpu", "--no-color", "--dry-run", "--no-report", "--launch-log", "launch.log",
                 "--", "train.py", "--hf_token", TRAIN_SECRET)
    out["launch stdout"] = launch.stdout
    cli("doctor", str(log))
    for name in ("a.json", "a.html", "facts.json", "merged.html", "merged.json", "launch.log"):
        path = work / name
        assert path.exists(), f"{name} was not written: {out}"
        out[name] = path.read_text()
    out["_cwd"] = str(work)
    return out


@pytest.mark.slow
def test_no_planted_secret_reaches_any_artifact(artifacts):
    found = {name: leaks(text, SECRETS) for name, text in artifacts.items() if not name.startswith("_")
             and name != "launch stdout"}
    # the dry run's stdout is the command to paste: it keeps the training command's own arguments, nothing else
    found["launch stdout"] = leaks(artifacts["launch stdout"], [s for s in SECRETS if s != TRAIN_SECRET])
    assert {k: v for k, v in found.items() if v} == {}


@pytest.mark.slow
def test_named_non_secrets_survive_in_the_documents(artifacts):
    for name in ("a.json", "facts.json", "merged.json"):
        text = artifacts[name]
        for value in (*KEPT_ENV.values(), artifacts["_cwd"]):
            assert json.dumps(value) in text, (name, value)
    env = json.loads(artifacts["a.json"])["nodes"][0]["facts"]["env"]
    assert {k: env[k] for k in ("RAY_AUTH_MODE", "MASTER_ADDR", "NCCL_SOCKET_IFNAME", "PWD")} == {
        "RAY_AUTH_MODE": "token", "MASTER_ADDR": "127.0.0.1", "NCCL_SOCKET_IFNAME": "lo", "PWD": artifacts["_cwd"]}
    assert env["DB_PASS"] == env["SSHPASS"] == env["GITHUB_PAT"] == env["CI_JOB_JWT"] == "***"
