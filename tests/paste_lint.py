"""Is a remediation shell a person can paste? The rule the whole suite holds its fixes to.

A remediation passes when:
- ``bash -n`` accepts it (an open quote such as ``<head node's address>`` makes a paste run nothing);
- outside ``#`` comments it has no ``<placeholder>`` (bash reads ``<IPv4>/<prefix>`` as redirections, so
  ``bash -n`` alone lets it through) and no ``...``/``…`` standing for arguments the reader must guess:
  placeholders are ``${NAME:?what to put here}``, explanations are ``#`` comments.

Usage from any test: ``from paste_lint import paste_problems``; ``assert paste_problems(fix) == []``.
"""
from __future__ import annotations

import re
import shutil
import subprocess

_ANGLE = re.compile(r"<[A-Za-z][^<>\n]*>")
_ELLIPSIS = re.compile(r"(?<![.\w])(\.\.\.|…)(?![.\w])")


def _code_part(line: str) -> str:
    """The line without its trailing comment (a '#' outside quotes that starts a word)."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
            elif ch == "\\" and quote == '"':
                continue
        elif ch in ("'", '"'):
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i]
    return line


def _strip_quoted(code: str) -> str:
    return re.sub(r"'[^']*'|\"(?:\\.|[^\"\\])*\"", "''", code)


def paste_problems(text: str | None) -> list[str]:
    """Why ``text`` cannot be pasted into bash as it is; empty when it can."""
    if text is None:
        return []
    problems = []
    if shutil.which("bash"):
        proc = subprocess.run(["bash", "-n"], input=text, capture_output=True, text=True, timeout=10)
        if proc.returncode != 0:
            problems.append(f"bash -n: {proc.stderr.strip()}")
    in_heredoc = None
    for number, line in enumerate(text.splitlines(), 1):
        if in_heredoc:
            if line.strip() == in_heredoc:
                in_heredoc = None
            continue
        heredoc = re.search(r"<<-?\s*['\"]?(\w+)['\"]?", _code_part(line))
        code = _strip_quoted(_code_part(line))
        for m in _ANGLE.finditer(code):
            if heredoc and m.start() == code.find("<<"):
                continue
            problems.append(f"line {number}: placeholder {m.group(0)!r} outside a comment (use ${{NAME:?what}})")
        if _ELLIPSIS.search(code):
            problems.append(f"line {number}: '...' outside a comment stands for arguments nobody can paste")
        if heredoc:
            in_heredoc = heredoc.group(1)
    return problems
