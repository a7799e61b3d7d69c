"""What the commands share: the usage-error exit, option parsing, path discovery and
the cache location."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn, Optional

import click

if TYPE_CHECKING:
    from optax_lint.run.discovery import Discovery


def fail(message: str) -> NoReturn:
    click.echo(f"optax-lint: error: {message}", err=True)
    sys.exit(2)


def split_codes(values: tuple[str, ...]) -> Optional[list[str]]:
    if not values:
        return None
    out = []
    for value in values:
        out.extend(part.strip() for part in value.split(",") if part.strip())
    return out


def parse_size(text: str) -> int:
    """`8MB`, `512KB`, `1048576` -> bytes (KB/MB are 1024-based, as the messages print them)."""
    match = re.fullmatch(r"\s*(\d+)\s*(b|kb|k|mb|m)?\s*", text.lower())
    if not match or int(match.group(1)) == 0:
        fail(f"--max-file-size: expected a positive size such as 8MB or 512KB, got {text!r}")
    scale = {"kb": 1024, "k": 1024, "mb": 1024**2, "m": 1024**2}.get(match.group(2) or "b", 1)
    return int(match.group(1)) * scale


def discover(paths: tuple[str, ...], settings, from_stdin: bool = False) -> tuple[Discovery, set[str]]:
    """The files under `paths`, and the paths that do not exist (a usage error, exit 2,
    as in ruff). Warns on stderr when nothing to lint was found."""
    from optax_lint.run import discovery

    if from_stdin:
        return discovery.Discovery(), set()
    missing = {p for p in paths if not os.path.exists(p)}
    found = discovery.discover(
        list(paths) or ["."],
        root=settings.root,
        exclude=settings.exclude if settings.exclude is not None else discovery.DEFAULT_EXCLUDE,
        extend_exclude=settings.extend_exclude,
        force_exclude=settings.force_exclude,
        respect_gitignore=settings.respect_gitignore,
    )
    if not found.files and not found.problems:
        where = ", ".join(paths) if paths else "the current directory"
        click.echo(f"optax-lint: warning: no Python files found in {where}", err=True)
    return found, missing


def report_missing(missing: set[str]) -> None:
    for path in sorted(missing):
        click.echo(f"optax-lint: error: {path}: no such file or directory", err=True)


def default_cache_dir(settings) -> Path:
    """`.optax_lint_cache` beside the config file, or in the current directory without one."""
    from optax_lint.run.cache import CACHE_DIR_NAME

    return (settings.root if settings.config_path is not None else Path.cwd()) / CACHE_DIR_NAME

