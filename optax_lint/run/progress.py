"""A progress bar on stderr, only where someone is watching a long run.

Shown when stderr is a terminal and there are at least `MIN_FILES` files; never on a
pipe or a redirect (CI logs), and never under pre-commit (which sets PRE_COMMIT=1 and
captures the output) or when OPTAX_LINT_NO_PROGRESS is set.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Callable, Iterator, Optional

MIN_FILES = 200


def wanted(total: int, stream=None) -> bool:
    stream = stream if stream is not None else sys.stderr
    if total < MIN_FILES or os.environ.get("PRE_COMMIT") or os.environ.get("OPTAX_LINT_NO_PROGRESS"):
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


@contextlib.contextmanager
def progress_bar(total: int, stream=None) -> Iterator[Optional[Callable[[int], None]]]:
    """Yields `advance(n)`, or None when no bar is shown."""
    if not wanted(total, stream):
        yield None
        return
    import click

    with click.progressbar(length=total, label="Linting", file=stream or sys.stderr, show_pos=True) as bar:
        yield bar.update
