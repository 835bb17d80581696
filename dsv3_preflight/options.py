"""Profile and selection options, declared once for the CLI and for pytest."""
from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from typing import Any

from .profile import BUILTIN_PROFILES, FIELDS


def profile_option_specs() -> list[tuple[str, dict[str, Any]]]:
    """(flag, kwargs) pairs for argparse and pytest's addoption alike."""
    specs: list[tuple[str, dict[str, Any]]] = [
        ("--profile", {"dest": "profile_name", "default": None, "metavar": "NAME",
                       "help": f"built-in profile ({', '.join(BUILTIN_PROFILES)}; default dsv3)"}),
        ("--config", {"dest": "config_path", "default": None, "metavar": "TOML", "help": "profile TOML file"}),
    ]
    for field in FIELDS:
        env = f" [env {', '.join(field.env)}]" if field.env else ""
        specs.append((
            f"--{field.name.replace('_', '-')}",
            {"dest": f"profile_{field.name}", "default": None, "metavar": field.metavar or field.name.upper(),
             "help": f"{field.help}{env}"},
        ))
    return specs


def selection_option_specs() -> list[tuple[str, dict[str, Any]]]:
    return [
        ("--only", {"action": "append", "default": [], "metavar": "CHECK", "help": "run only these checks (name or prefix.*; repeatable)"}),
        ("--skip", {"action": "append", "default": [], "metavar": "CHECK", "help": "skip these checks (reported as skipped; repeatable)"}),
        ("--tags", {"action": "append", "default": [], "metavar": "TAG", "help": "run only checks with one of these tags"}),
        ("--checks-dir", {"action": "append", "default": [], "metavar": "DIR", "help": "also load the checks in DIR (repeatable)"}),
    ]


def add_profile_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("profile (CLI > environment > --config TOML > built-in profile > defaults)")
    for flag, kwargs in profile_option_specs():
        group.add_argument(flag, **kwargs)


def add_selection_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("selection")
    for flag, kwargs in selection_option_specs():
        group.add_argument(flag, **kwargs)


def cli_profile_values(get: Callable[[str], Any]) -> dict[str, Any]:
    """The profile values given as options, by field name (None when not given)."""
    return {field.name: get(f"profile_{field.name}") for field in FIELDS}


def split_commas(values: list[str]) -> list[str]:
    return [v.strip() for item in values for v in item.split(",") if v.strip()]


def resolve_from_options(get: Callable[[str], Any], environ: Mapping[str, str],
                         training: Mapping[str, tuple[Any, str]] | None = None):
    """The profile; ``training``: values `launch` read from the training command (they win)."""
    from .profile import resolve_profile

    return resolve_profile(
        cli=cli_profile_values(get), environ=environ, config_path=get("config_path"), profile_name=get("profile_name"),
        training=training,
    )
