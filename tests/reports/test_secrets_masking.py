"""Secrets in free text, argv lists and environment dumps are masked before any document or report holds them."""
from __future__ import annotations

import json

import pytest
from report_lab import RED, documents, load  # noqa: F401 - fixtures

from dsv3_preflight.reports import write_html
from dsv3_preflight.secrets import mask, mask_text


@pytest.mark.parametrize("text, secret", [
    ("HF_TOKEN=hf_abcSECRET", "hf_abcSECRET"),
    ("python train.py --hf_token hf_abcSECRET --lr 1e-4", "hf_abcSECRET"),
    ("HTTPS_PROXY=http://bob:pr0xySECRET@proxy.corp:3128", "pr0xySECRET"),
    ("git clone https://oauth2:glpatSECRET123@gitlab.corp/ml/lora.git", "glpatSECRET123"),
    ("requests.exceptions.HTTPError: 401 ... Authorization: Bearer eyJhbGciSECRET.part", "eyJhbGciSECRET.part"),
    ("MY_CREDENTIALS=credSECRET", "credSECRET"),
    ("AWS_ACCESS_KEY_ID=AKIASECRET123", "AKIASECRET123"),
    ("SSH_KEY=sshSECRET", "sshSECRET"),
    # issue 46.4: every value of a comma-separated list after a secret name, and webhook URLs on any host
    ("wandb: ERROR api_key=FIRSTSECRET111,SECONDSECRET222", "SECONDSECRET222"),
    ("wandb: ERROR api_key=FIRSTSECRET111,SECONDSECRET222", "FIRSTSECRET111"),
    ("SLACK_WEBHOOK_URL=https://127.0.0.1/services/T0/B0/SLACKSECRET1234", "SLACKSECRET1234"),
    ("posting to https://127.0.0.1/services/T0/B0/SLACKSECRET1234 failed", "SLACKSECRET1234"),
    ("POST https://discord.com/api/webhooks/1234/DISCORDsecretTOKEN: 404", "DISCORDsecretTOKEN"),
])
def test_mask_text_hides_the_secret_value(text, secret):
    masked = mask_text(text)
    assert secret not in masked and "***" in masked


def test_a_list_after_a_secret_name_is_masked_whole_but_the_next_assignment_is_judged_by_its_own_name():
    assert mask_text("api_key=A1,B2,nodes=gpu-a,gpu-b") == "api_key=***,nodes=gpu-a,gpu-b"
    assert mask_text("NODES=gpu-a,gpu-b TOKEN=t1,t2 done") == "NODES=gpu-a,gpu-b TOKEN=*** done"
    assert mask_text("see https://example.com/services/status for the outage") == (
        "see https://example.com/services/status for the outage")   # no Slack-shaped T…/B…/… path: no webhook


@pytest.mark.parametrize("text", [
    "gpu-a:41234:41234 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB ens9f0np0:10.10.0.11<0>",
    "ssh://git@host:22/org/repo.git", "http://proxy.corp:3128", "--key-file=/etc/ssh/id", "monkey=banana",
    "ncclDevComm basic operation", "bearer of bad news",
])
def test_mask_text_leaves_ordinary_text_alone(text):
    assert mask_text(text) == text


def test_a_secret_flag_and_its_value_in_separate_argv_elements_are_masked():
    argv = ["torchrun", "train.py", "--hf_token", "hf_argvSECRET", "--lr", "1e-4", "--api-key", "k3ySECRET", "--token"]
    assert mask(argv) == ["torchrun", "train.py", "--hf_token", "***", "--lr", "1e-4", "--api-key", "***", "--token"]


def test_proxy_password_in_the_environment_and_argv_secret_never_reach_json_or_page(tmp_path, load):
    doc = load(RED)
    doc["nodes"][0]["facts"]["env"]["HTTPS_PROXY"] = "http://bob:pr0xySECRET@proxy.corp:3128"
    doc["command"] = ["dsv3-preflight", "launch", "--", "train.py", "--hf_token", "hf_argvSECRET"]
    page = write_html(doc, tmp_path / "r.html").read_text()
    text = json.dumps(mask(doc))
    for secret in ("pr0xySECRET", "hf_argvSECRET"):
        assert secret not in page and secret not in text
    assert "http://bob:***@proxy.corp:3128" in page
