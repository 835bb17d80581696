"""Masking secrets (tokens, keys, passwords) by name pattern, wherever they appear in a document."""
from __future__ import annotations

import re
from typing import Any

MASK = "***"
_SECRET_NAME = re.compile(
    r"(?i)(token|secret|passw(or)?d|pwd|credential|api[_-]?key|access[_-]?key|private[_-]?key|auth|cookie|(^|_)key$)"
)
# NAME=value, NAME: value, --name value, --name=value inside free text (command lines, log lines)
_WORD = (r"[\w.-]*(token|secret|passw(or)?d|credentials?|api[_-]?key|access[_-]?key([_-]?id)?|private[_-]?key"
         r"|[a-z0-9]_key)(?![\w])")
_VALUE = r"(?P<value>\"[^\"]*\"|'[^']*'|[^\s,;&]+)"
_INLINE = re.compile(
    rf"(?i)(?P<name>--{_WORD}|(?<![\w-]){_WORD})(?P<sep>\s*[=:]\s*)" + _VALUE
    + rf"|(?P<flag>--{_WORD})(?P<space>\s+)(?P<fvalue>\"[^\"]*\"|'[^']*'|[^\s-][^\s]*)"
)
# https://user:PASSWORD@host (proxies, git remotes, object stores) and "Authorization: Bearer TOKEN"
_URL_PASSWORD = re.compile(r"(?P<head>\b[a-z][a-z0-9+.-]*://[^\s:/@]+:)[^\s@/]+(?=@)", re.I)
_BEARER = re.compile(r"(?P<head>\bauthorization\s*[:=]\s*(bearer\s+|basic\s+|token\s+)?|\bbearer\s+)"
                     r"[A-Za-z0-9._~+/=-]{8,}", re.I)
_SECRET_FLAG = re.compile(rf"(?i)--{_WORD}")


def is_secret_name(name: str) -> bool:
    return bool(_SECRET_NAME.search(name))


def mask_text(text: str) -> str:
    """Mask the values after secret-looking names in free text."""
    def repl(m: re.Match) -> str:
        if m.group("flag"):
            return f"{m.group('flag')}{m.group('space')}{MASK}"
        return f"{m.group('name')}{m.group('sep')}{MASK}"

    text = _URL_PASSWORD.sub(lambda m: m.group("head") + MASK, text)
    text = _BEARER.sub(lambda m: m.group("head") + MASK, text)
    return _INLINE.sub(repl, text)


def mask(value: Any, key: str | None = None) -> Any:
    """A copy of a JSON value with secrets masked: values under secret-looking keys, and inline NAME=value."""
    if isinstance(value, dict):
        return {k: mask(v, k) for k, v in value.items()}
    if isinstance(value, list):
        # an argv list: the element after a bare secret flag (["--hf_token", "hf_..."]) is its value
        out = [mask(v, key) for v in value]
        for i in range(1, len(value)):
            if isinstance(value[i - 1], str) and _SECRET_FLAG.fullmatch(value[i - 1]) and isinstance(value[i], str):
                out[i] = MASK
        return out
    if isinstance(value, str):
        if key is not None and is_secret_name(key) and value:
            return MASK
        return mask_text(value)
    return value
