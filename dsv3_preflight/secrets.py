"""Masking secrets wherever they appear in a document, a report, a log or the console.

Two rules, the way maintained secret scanners work:

- by **name**: the value of a variable, key or flag whose name says it is a secret (``HF_TOKEN``,
  ``DB_PASS``, ``SSHPASS``, ``GITHUB_PAT``, ``CI_JOB_JWT``, ``WANDB_API_KEY``, ``--hf_token``...), in a
  mapping, an argv list, or free text (``NAME=value``, ``NAME: value``, ``"NAME": "value"``, ``--name value``);
- by **value**: a string that looks like a credential whatever it is called. The provider patterns
  (AWS, GitHub, GitLab, Slack, JWT, private keys, Azure storage keys, Stripe, npm, PyPI...) are Yelp's
  detect-secrets' own regular expressions, read from its plugins; ours add what it lacks: Hugging Face
  tokens, fine-grained GitHub tokens, the secret path of a Slack webhook (on any host) and of other webhook URLs
  (``/webhooks/``, ``/hooks/``), ``https://TOKEN@host`` and
  ``https://:PASS@host`` URLs, ``Authorization: Bearer``.

Not secrets, and never masked: ``PWD``/``OLDPWD`` (the shell's directory), ``RAY_AUTH_MODE`` and other
``*_AUTH_MODE``-like settings, ``TOKENIZERS_PARALLELISM``, key *file* paths (``--key-file``). docs/security.md
says what is covered.
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

MASK = "***"

# -- by name ------------------------------------------------------------------------------------------------
#: a word of a name that makes it a secret wherever it stands (DB_PASS, GITHUB_PAT, CI_JOB_JWT, hfToken)
_SECRET_WORDS = frozenset({
    "token", "tokens", "secret", "secrets", "password", "passwd", "passphrase", "pass", "pat", "jwt",
    "credential", "credentials", "cookie", "cookies", "apikey", "accesskey", "privatekey", "secretkey", "authkey",
    "authorization", "bearer", "sshpass", "pgpass", "dsn", "sessionid", "signature", "sig",
    # a webhook URL is its own credential: whoever has it posts to the channel (SLACK_WEBHOOK_URL, ALERTS_WEBHOOK)
    "webhook", "webhooks", "webhookurl",
})
#: a word that makes a name a secret when it ends the name: SSH_KEY, ACCOUNT_KEY, BASIC_AUTH (not AUTH_MODE,
#: KEY_FILE, KEY_PATH)
_LAST_WORDS = frozenset({"key", "auth"})
#: a word made of a secret word and a prefix (apitoken, hftoken, dbpassword, mysqlpwd)
_SUFFIXES = ("token", "password", "passwd", "secret", "apikey", "accesskey", "privatekey")
#: pairs of words that make a secret anywhere in the name (AWS_ACCESS_KEY_ID, API_KEY_V2, PRIVATE_KEY_PEM)
_PAIRS = frozenset({("api", "key"), ("access", "key"), ("private", "key"), ("secret", "key"), ("account", "key"),
                    ("auth", "token"), ("client", "secret"), ("session", "id")})
#: names that hold a secret-looking word and are not secrets
_NOT_SECRET = frozenset({"pwd", "oldpwd", "tokenizers_parallelism", "keyfile", "key_file", "passthrough"})
_WORD_SPLIT = re.compile(r"[^A-Za-z0-9]+|(?<=[a-z0-9])(?=[A-Z])")


def _words(name: str) -> list[str]:
    return [w.lower() for w in _WORD_SPLIT.split(name) if w]


@lru_cache(maxsize=4096)
def is_secret_name(name: str) -> bool:
    """Whether a variable, key or flag name says its value is a secret (``HF_TOKEN``, ``DB_PASS``, ``--api-key``).

    ``PWD``, ``RAY_AUTH_MODE``, ``TOKENIZERS_PARALLELISM``, ``SSH_KEY_FILE`` are not."""
    bare = name.strip().lstrip("-")
    if not bare or bare.lower() in _NOT_SECRET:
        return False
    words = _words(bare)
    if not words:
        return False
    if any(w in _SECRET_WORDS for w in words):
        return True
    if any(w == "pwd" for w in words):  # MYSQL_PWD; bare PWD/OLDPWD were let through above
        return True
    if words[-1] in _LAST_WORDS:
        return True
    if any(w.endswith(_SUFFIXES) and w not in ("tokenizer",) for w in words):
        return True
    return any(pair in _PAIRS for pair in zip(words, words[1:]))


# -- by value -------------------------------------------------------------------------------------------------
#: detect-secrets plugins left out: a public IPv4 address is what a network report is about, not a secret
_DS_EXCLUDED = {"IPPublicDetector"}
_OWN_PATTERNS: tuple[tuple[str, str], ...] = (
    # the secret path of a Slack webhook: keep the service, hide the path
    ("Slack webhook", r"(?P<keep>https://hooks\.slack\.com/(?:services|workflows|triggers)/)(?P<secret>[A-Za-z0-9_/-]+)"),
    # the same path on any host (a proxy or a test double in front of Slack: https://10.0.0.5/services/T0/B0/SECRET)
    ("Slack-style webhook path",
     r"(?i)(?P<keep>\bhttps?://[^\s/\"'@]+(?:/[^\s/\"'?#]+)*?/services/)(?P<secret>T\w+/B\w+/[A-Za-z0-9_-]+)"),
    # a webhook URL's token path on any host (Discord's /api/webhooks/ID/TOKEN, /hooks/TOKEN, /webhook/TOKEN)
    ("webhook URL",
     r"(?i)(?P<keep>\bhttps?://[^\s/\"'@]+(?:/[^\s/\"'?#]+)*?/(?:webhooks?|hooks)/)(?P<secret>[^\s\"'?#<>]+)"),
    # a JWT whole, signature included (detect-secrets' pattern ends in a lazy match that stops before it)
    ("JSON Web Token", r"(?P<secret>eyJ[A-Za-z0-9_=-]{4,}\.[A-Za-z0-9_=-]{4,}(?:\.[A-Za-z0-9_.+/=-]*)?)"),
    ("Hugging Face token", r"(?<![A-Za-z0-9])(?P<secret>hf_[A-Za-z0-9]{30,})"),
    ("GitHub fine-grained token", r"(?P<secret>github_pat_[A-Za-z0-9_]{22,})"),
    ("GitHub token", r"(?P<secret>gh[pousr]_[A-Za-z0-9_]{30,})"),
    ("Weights & Biases key", r"(?i)(?P<keep>wandb[^\n]{0,30}?[=:]\s*[\"']?)(?P<secret>[0-9a-f]{40})(?![0-9a-f])"),
    ("Azure connection string key",
     r"(?i)(?P<keep>(?:AccountKey|SharedAccessKey|SharedAccessSignature|sig)=)(?P<secret>[^;\s\"']+)"),
    # scheme://user:PASSWORD@host and scheme://:PASSWORD@host (proxies, git remotes, object stores, databases)
    ("URL password", r"(?i)(?P<keep>\b[a-z][a-z0-9+.-]*://[^\s:/@\"']*:)(?P<secret>[^\s@/\"']+)(?=@)"),
    # https://TOKEN@host: a user-only credential in an http(s) URL is how tokens are passed (not ssh://git@host)
    ("URL token", r"(?i)(?P<keep>\bhttps?://)(?P<secret>[^\s:/@\"']+)(?=@[^\s/@\"']+)"),
    ("Authorization header", r"(?i)(?P<keep>\bauthorization\s*[:=]\s*[\"']?(?:bearer\s+|basic\s+|token\s+)?|\bbearer\s+)"
                             r"(?P<secret>[A-Za-z0-9._~+/=-]{8,})"),
    ("private key block", r"(?s)(?P<keep>-----BEGIN [A-Z ]*PRIVATE KEY( BLOCK)?-----)(?P<secret>.*?)(?=-----END|\Z)"),
)


#: substrings (lower case) one of which a text must hold for a pattern to be tried: a plain substring test costs
#: nothing, some of these regular expressions cost 30 us a line; a pattern without a gate is always tried
_GATES: dict[str, tuple[str, ...]] = {
    "Slack webhook": ("hooks.slack.com",), "Slack-style webhook path": ("/services/",),
    "webhook URL": ("hook",), "JSON Web Token": ("eyj",), "Hugging Face token": ("hf_",),
    "GitHub fine-grained token": ("github_pat_",), "GitHub token": ("gh",), "Weights & Biases key": ("wandb",),
    "Azure connection string key": ("accountkey", "sharedaccess", "sig="), "URL password": ("://",),
    "URL token": ("://",), "Authorization header": ("authoriz", "bearer"), "private key block": ("private key",),
    "AWSKeyDetector": ("a3t", "abia", "acca", "akia", "asia", "aws"), "ArtifactoryDetector": ("akc", "ap"),
    "AzureStorageKeyDetector": ("accountkey",), "BasicAuthDetector": ("://",), "CloudantDetector": ("key", "pw", "pass", "token", "cloudant.com"),
    "DiscordBotTokenDetector": (".",), "GitHubTokenDetector": ("gh",), "GitLabTokenDetector": ("gl", "gr1348941"),
    "IbmCloudIamDetector": ("key", "pw", "pass", "token"), "IbmCosHmacDetector": ("secret",),
    "JwtTokenDetector": ("eyj",), "MailchimpDetector": ("-us",), "NpmDetector": ("_authtoken",),
    "OpenAIDetector": ("t3blbkfj",), "PrivateKeyDetector": ("private key", "putty"), "PypiTokenDetector": ("pypi-",),
    "SendGridDetector": ("sg.",), "SlackDetector": ("xox", "hooks.slack.com"), "SoftlayerDetector": ("key", "pw", "pass", "token", "softlayer.com"),
    "SquareOAuthDetector": ("sq0csp-",), "StripeDetector": ("k_live_",), "TelegramBotTokenDetector": (":",),
    "TwilioKeyDetector": ("ac", "sk"),
}


@lru_cache(maxsize=1)
def _value_patterns() -> tuple[tuple[str, re.Pattern[str], tuple[str, ...]], ...]:
    """Our patterns, then detect-secrets' own (its RegexBasedDetector plugins' deny lists), compiled once, each
    with its gate."""
    patterns = [(name, re.compile(rx), _GATES.get(name, ())) for name, rx in _OWN_PATTERNS]
    patterns += [(f"detect-secrets {name}", rx, _GATES.get(name, ())) for name, rx in detect_secrets_patterns()]
    return tuple(patterns)


def detect_secrets_patterns() -> list[tuple[str, re.Pattern[str]]]:
    """(plugin class name, compiled regex) for every regex-based detect-secrets plugin we use; [] when it is
    not installed (then our own patterns and the name rules still apply). Importing detect-secrets and its plugins
    (requests, urllib3) is a fifth of a short command's CPU, in every command that writes a document: the patterns'
    sources are kept in the fact cache (factcache.py), keyed by the installed detect-secrets and this module."""
    from . import factcache

    kept = factcache.remembered("detect_secrets_patterns", {}, _detect_secrets_sources,
                                dists=("detect-secrets",), code=("secrets.py",),
                                keep=lambda got: bool(got.get("patterns")))
    try:
        return [(name, re.compile(source, flags)) for name, source, flags in kept.get("patterns") or []]
    except (TypeError, ValueError, re.error):   # an entry that is not what we wrote: ask detect-secrets itself
        return _detect_secrets_compiled()


def _detect_secrets_sources() -> dict[str, list[list[Any]]]:
    """[plugin class name, regex source, flags] for every regex-based detect-secrets plugin we use."""
    return {"patterns": [[name, rx.pattern, rx.flags] for name, rx in _detect_secrets_compiled()]}


def _detect_secrets_compiled() -> list[tuple[str, re.Pattern[str]]]:
    try:
        from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
        from detect_secrets.plugins.base import RegexBasedDetector
    except ImportError:  # pragma: no cover - a dependency; a broken install still masks by name and our patterns
        return []
    found = []
    for cls in sorted(get_mapping_from_secret_type_to_class().values(), key=lambda c: c.__name__):
        if not issubclass(cls, RegexBasedDetector) or cls.__name__ in _DS_EXCLUDED:
            continue
        for rx in cls().denylist:
            found.append((cls.__name__, rx if isinstance(rx, re.Pattern) else re.compile(rx)))
    return found


def _mask_span(match: re.Match[str]) -> tuple[int, int]:
    """The span of a match to replace: our patterns name the secret part (group ``secret``); detect-secrets'
    groups are sometimes the secret and sometimes a prefix (``(ghp|gho)_...``), so all of its match goes."""
    if "secret" in match.re.groupindex and match.group("secret"):
        return match.span("secret")
    return match.span()


#: every value pattern needs one of these to match (a credential is a long run of token characters, a URL with
#: userinfo, a key block, or an Authorization header): strings without any are not scanned 45 times
_MAYBE = re.compile(r"[A-Za-z0-9+/_=.-]{16,}|://|BEGIN|PuTTY|(?i:bearer|authoriz)")


def _mask_values(text: str) -> str:
    if not _MAYBE.search(text):
        return text
    lower = text.lower()
    for _name, rx, gates in _value_patterns():
        if gates and not any(g in lower for g in gates):
            continue
        pieces, last = [], 0
        for match in rx.finditer(text):
            start, end = _mask_span(match)
            if start < last or start == end or MASK in text[start:end]:
                continue
            pieces.append(text[last:start])
            pieces.append(MASK)
            last = end
        if pieces:
            pieces.append(text[last:])
            text = "".join(pieces)
            lower = text.lower()
    return text


# NAME=value, NAME: value, "NAME": "value", NAME='value' and --name value / --name=value in free text; an unquoted
# value runs on over commas (api_key=FIRST,SECOND: a list of keys is all secret) up to an item that is itself an
# assignment (api_key=X,other=Y leaves other=Y to be judged by its own name)
_ASSIGN = re.compile(
    r"""(?P<name>(?<![\w.-])-{0,2}[A-Za-z_][\w.-]*)(?P<q>["']?)(?P<sep>[ \t]*[=:][ \t]*)"""
    r"""(?P<value>"[^"\n]*"|'[^'\n]*'|[^\s,;&"'}\])]+(?:,(?![^\s,;&"'}\])=:]*[=:])[^\s,;&"'}\])]+)*)"""
)
_FLAG = re.compile(r"""(?P<name>(?<![\w-])--?[A-Za-z_][\w.-]*)(?P<sep>[ \t]+)(?P<value>"[^"\n]*"|'[^'\n]*'|[^\s"'-][^\s]*)""")


def _assign_repl(match: re.Match[str]) -> str:
    name, value = match.group("name"), match.group("value")
    if (not is_secret_name(name) or value.strip("\"'") in ("", MASK) or value.startswith("//")
            or value.lower() in ("bearer", "basic", "token")):
        return match.group(0)
    quote = value[0] if value[:1] in "\"'" and len(value) > 1 and value[-1] == value[0] else ""
    return f"{name}{match.group('q')}{match.group('sep')}{quote}{MASK}{quote}"


def _flag_repl(match: re.Match[str]) -> str:
    name, value = match.group("name"), match.group("value")
    if not name.startswith("--") or not is_secret_name(name) or value == MASK:
        return match.group(0)
    quote = value[0] if value[:1] in "\"'" and len(value) > 1 and value[-1] == value[0] else ""
    return f"{name}{match.group('sep')}{quote}{MASK}{quote}"


@lru_cache(maxsize=1 << 16)
def mask_text(text: str) -> str:
    """``text`` with every secret masked: values after secret names, and credential-looking values."""
    if not text or len(text) < 6:
        return text
    text = _mask_values(text)
    text = _ASSIGN.sub(_assign_repl, text)
    return _FLAG.sub(_flag_repl, text)


def _is_secret_flag(item: Any) -> bool:
    return isinstance(item, str) and item.startswith("-") and "=" not in item and is_secret_name(item)


def mask(value: Any, key: str | None = None) -> Any:
    """A copy of a JSON value with secrets masked: values under secret names (mapping keys, the element after a
    secret flag in an argv list) and credential-looking values anywhere."""
    if isinstance(value, dict):
        return {k: mask(v, k if isinstance(k, str) else None) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        out = [mask(v, key) for v in value]
        for i in range(1, len(value)):  # an argv list: ["--hf_token", "hf_..."]
            if _is_secret_flag(value[i - 1]) and isinstance(value[i], str) and not value[i].startswith("-"):
                out[i] = MASK
        return out
    if isinstance(value, str):
        if key is not None and value and is_secret_name(key):
            return MASK
        return mask_text(value)
    return value


def leaks(artifact: str, planted: Iterable[str]) -> list[str]:
    """The planted secret values that still appear in ``artifact`` (a test's and a reviewer's helper)."""
    return [p for p in planted if p and p in artifact]


__all__ = ["MASK", "detect_secrets_patterns", "is_secret_name", "leaks", "mask", "mask_text"]
