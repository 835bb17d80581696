"""The regular expressions of an adapter_config.json, matched the way peft matches them, under a time bound.

peft matches ``target_modules`` (a string) with ``re.fullmatch(pattern, module)``, a ``rank_pattern`` /
``alpha_pattern`` key with ``re.match(rf"(.*\\.)?({key})$", module)`` and a ``modules_to_save`` entry with
``re.match(rf"(^|.*\\.){name}($|\\..*)", module)``. Python's ``re`` backtracks: ``(a|aa)+`` against a
44-character module name takes minutes. Here:

- the syntax is checked with ``re.compile`` itself, so a pattern is valid exactly when peft can compile it;
- matching runs on the ``regex`` package (the same syntax and semantics as ``re`` for every pattern ``re``
  compiles, already installed with transformers) with a ``timeout``: a pattern that needs more than
  :data:`MATCH_TIMEOUT_S` on one module name is reported as catastrophic, once, and never tried again.

Why ``regex`` and not RE2 (``google-re2``, which installs here): RE2 cannot backtrack, but it refuses
patterns peft accepts (backreferences, lookaround) and differs from ``re`` on others; ``regex`` gives
peft's own answer for every pattern that answers within the bound, and the bound for the rest. Without
``regex`` installed, a pattern is matched with ``re`` only when it has no nested or alternated repeat
(the shapes that backtrack exponentially); others are reported as not evaluated.
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

MATCH_TIMEOUT_S = 0.05
MAX_PATTERN_LEN = 4096


class PatternError(ValueError):
    """A pattern peft cannot use (invalid), or one too expensive to match (catastrophic backtracking)."""

    def __init__(self, message: str, *, catastrophic: bool = False, unevaluated: bool = False) -> None:
        super().__init__(message)
        self.catastrophic = catastrophic
        self.unevaluated = unevaluated


_SLOW: dict[str, str] = {}  # patterns that timed out once: never matched again


def _backtracks(pattern: str) -> bool:
    """True when the parsed pattern has a repeat holding another repeat or an alternation (the shapes that
    backtrack exponentially); used only when the regex package is missing."""
    sre_parse = _parser()
    repeats = {sre_parse.MAX_REPEAT, sre_parse.MIN_REPEAT, getattr(sre_parse, "POSSESSIVE_REPEAT", None)}

    def walk(items: Any, inside_repeat: bool) -> bool:
        for op, arg in items:
            if op in repeats:
                lo, hi, sub = arg
                if inside_repeat and hi != 1:
                    return True
                if walk(sub, inside_repeat or hi > 1):
                    return True
            elif op is sre_parse.BRANCH:
                if inside_repeat:
                    return True
                if any(walk(b, inside_repeat) for b in arg[1]):
                    return True
            elif op is sre_parse.SUBPATTERN:
                if walk(arg[-1], inside_repeat):
                    return True
            elif op in (sre_parse.ASSERT, sre_parse.ASSERT_NOT):
                if walk(arg[1], inside_repeat):
                    return True
        return False

    return walk(sre_parse.parse(pattern), False)


@lru_cache(maxsize=512)
def _compiled(pattern: str) -> tuple[Any, str]:
    """(compiled matcher, engine) for a valid pattern; PatternError naming what is wrong otherwise."""
    if len(pattern) > MAX_PATTERN_LEN:
        raise PatternError(f"is {len(pattern):,} characters long: not a module pattern")
    try:
        re.compile(pattern)
    except (re.error, RecursionError, OverflowError) as exc:
        raise PatternError(f"is not a valid regular expression: {exc}") from None
    try:
        import regex
    except ImportError:
        if _backtracks(pattern):
            raise PatternError("has a nested or alternated repeat and cannot be matched safely without the "
                               "`regex` package (pip install regex)", unevaluated=True) from None
        return re.compile(pattern), "re"
    return regex.compile(pattern, flags=regex.VERSION0), "regex"


def _parser() -> Any:
    """The standard library's regular expression parser (a private module: its node codes are untyped)."""
    try:
        from re import _parser as sre_parse  # type: ignore[attr-defined]  # private: typeshed does not list it
    except ImportError:  # pragma: no cover - Python 3.10
        import sre_parse
    return sre_parse


def _language(items: Any, limit: int) -> list[str] | None:
    """Every string a parsed (sub)pattern matches when that set is finite and small, else None."""
    sre = _parser()
    out = [""]
    for op, arg in items:
        choices: list[str] | None
        if op is sre.LITERAL:
            choices = [chr(arg)]
        elif op is sre.SUBPATTERN:
            choices = _language(arg[-1], limit)
        elif op is sre.BRANCH:
            choices = []
            for branch in arg[1]:
                sub = _language(branch, limit)
                if sub is None:
                    return None
                choices += sub
        elif op is sre.IN:
            chars: list[str] = []
            for kind, value in arg:
                if kind is sre.LITERAL:
                    chars.append(chr(value))
                elif kind is sre.RANGE and value[1] - value[0] < limit:
                    chars += [chr(c) for c in range(value[0], value[1] + 1)]
                else:
                    return None
            choices = chars
        elif op in (sre.MAX_REPEAT, sre.MIN_REPEAT) and arg[1] != sre.MAXREPEAT and arg[1] <= 4:
            sub = _language(arg[2], limit)
            if sub is None:
                return None
            choices = []
            for count in range(arg[0], arg[1] + 1):
                combos = [""]
                for _ in range(count):
                    combos = [a + b for a in combos for b in sub]
                    if len(combos) > limit:
                        return None
                choices += combos
        else:
            return None
        if choices is None:
            return None
        out = [a + b for a in out for b in choices]
        if len(out) > limit:
            return None
    return list(dict.fromkeys(out))


def finite_names(pattern: str, limit: int = 64) -> tuple[bool, list[str]] | None:
    """The module names a target_modules regex can select, when they are a short finite list.

    ``(False, names)`` when the whole pattern is finite (full module names); ``(True, names)`` for the
    common ``.*\\.(q_proj|v_proj)`` form (any path, then ``.`` and one of the names); None otherwise.
    """
    sre = _parser()
    try:
        items = list(sre.parse(pattern))
    except (re.error, RecursionError, OverflowError):
        return None
    whole = _language(items, limit)
    if whole is not None:
        return False, whole
    # .* (any repeat of anything), then a literal '.', then a finite rest
    if len(items) >= 2 and items[0][0] in (sre.MAX_REPEAT, sre.MIN_REPEAT) and items[1] == (sre.LITERAL, ord(".")):
        body = items[0][1][2]
        if list(body) == [(sre.ANY, None)] and items[0][1][1] == sre.MAXREPEAT:
            rest = _language(items[2:], limit)
            if rest is not None:
                return True, rest
    return None


def check(pattern: Any) -> None:
    """Raise PatternError when ``pattern`` is not a string peft can compile."""
    if not isinstance(pattern, str):
        raise PatternError(f"is a {type(pattern).__name__}, not a string")
    _compiled(pattern)


def _run(pattern: str, method: str, name: str) -> bool:
    return _matched(pattern, method, name) is not None


def _matched(pattern: str, method: str, name: str) -> Any:
    if pattern in _SLOW:
        raise PatternError(_SLOW[pattern], catastrophic=True)
    matcher, engine = _compiled(pattern)
    if engine == "re":
        return getattr(matcher, method)(name)
    try:
        return getattr(matcher, method)(name, timeout=MATCH_TIMEOUT_S)
    except TimeoutError:
        why = (f"needs more than {MATCH_TIMEOUT_S * 1000:.0f} ms to match the {len(name)}-character module name "
               f"{name!r}: catastrophic backtracking (peft's re would take minutes per module)")
        _SLOW[pattern] = why
        raise PatternError(why, catastrophic=True) from None


def fullmatch_any(pattern: str, names: Iterable[str]) -> list[str]:
    """The names ``pattern`` fully matches (peft's ``target_modules`` as a string)."""
    return [n for n in names if _run(pattern, "fullmatch", n)]


def pattern_key(keys: Iterable[str], module: str) -> str | None:
    """The first ``rank_pattern``/``alpha_pattern`` key matching ``module`` the way peft's get_pattern_key does."""
    for key in keys:
        if _run(rf"(.*\.)?({key})$", "match", module):
            return key
    return None


def check_pattern_key(key: str) -> None:
    """A rank_pattern/alpha_pattern key is valid when peft's wrapped pattern compiles."""
    check(rf"(.*\.)?({key})$")


def saved_module_match(name: str, module: str) -> bool:
    """peft's modules_to_save test: ``name`` is a path component of ``module`` (a regex, as peft writes it)."""
    return _run(rf"(^|.*\.){name}($|\..*)", "match", module)


def layer_index(layers_pattern: str, module: str) -> int | None:
    r"""The layer number peft reads from ``module`` for layers_to_transform with ``layers_pattern`` (its
    ``re.match(rf"(?:^|.*?\.){pattern}\.(?P<idx>\d+)\.", key)``), or None when the pattern finds none."""
    m = _matched(layer_pattern(layers_pattern), "match", module)
    return int(m.group("idx")) if m is not None else None


def layer_pattern(layers_pattern: str) -> str:
    """The regex peft builds from one ``layers_pattern`` entry (to check that it compiles)."""
    return rf"(?:^|.*?\.){layers_pattern}\.(?P<idx>\d+)\."
