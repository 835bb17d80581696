"""`dsv3-preflight version`"""
from __future__ import annotations

import platform

NAME = "version"
HELP = "print the tool's version (and Python's)"


def add_arguments(parser) -> None:
    pass


def run(args) -> int:
    from .. import __version__

    print(f"dsv3-preflight {__version__} (Python {platform.python_version()})")
    return 0
