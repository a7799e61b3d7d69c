"""A wall-clock budget per file: a file that takes too long becomes a diagnostic.

A pre-commit hook must never hang. Real training scripts lint in a second or two
(docs/security.md has the measured costs), so a file that outlasts the budget has hit
a bug: an analysis that does not end. The
budget turns it into an OPX900 finding on that file, and the run goes on with the
others.

The timer is SIGALRM's interval timer, so it works only in a process's main thread on
a POSIX system (the CLI's process and each of the pool's workers); elsewhere the
budget is not armed. The alarm raises `FileTimeout`, a BaseException, so that no
rule's or fact's `except Exception` swallows it. Writing a fixed file is never cut
short: inside `uninterrupted()` the alarm is ignored (what follows a write is only
the return of its result).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import Iterator

# Seconds per MB of source, and at least that for any file. Dense optax code costs
# about 17 s per MB to lint on a 2-core machine (tests/test_hardening.py), and a fix
# run lints a file a few times over.
DEFAULT_FILE_TIMEOUT = 120.0
_MB = 1024 * 1024


def file_seconds(timeout: float, size: int) -> float:
    """The budget of a file of `size` bytes: `timeout` per MB, and at least `timeout`
    (0: none)."""
    return timeout * max(1.0, size / _MB)


class FileTimeout(BaseException):
    """The budget of the file being linted ran out."""


_held = 0  # depth of uninterrupted() sections


def _ring(signum, frame) -> None:
    if not _held:
        raise FileTimeout


def _usable() -> bool:
    return hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()


@contextlib.contextmanager
def file_budget(seconds: float) -> Iterator[bool]:
    """Raise FileTimeout in the body after `seconds` (0 or less: no budget). Yields
    whether the budget is armed."""
    if seconds <= 0 or not _usable():
        yield False
        return
    previous = signal.signal(signal.SIGALRM, _ring)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield True
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@contextlib.contextmanager
def uninterrupted() -> Iterator[None]:
    """Ignore the alarm while the body runs (an atomic write)."""
    global _held
    _held += 1
    try:
        yield
    finally:
        _held -= 1


def timed_out(path: str, seconds: float):
    """The OPX900 finding for a file whose budget ran out, after putting libcst's node
    classes back: the alarm may have landed inside a parse's own clean-up
    (syntax.parsing.restore_node_classes)."""
    from optax_lint.core.meta import INTERNAL_ERROR, meta_finding
    from optax_lint.syntax.parsing import restore_node_classes

    restore_node_classes()
    return meta_finding(INTERNAL_ERROR, path, timed_out_message(seconds))


def timed_out_message(seconds: float) -> str:
    shown = f"{seconds:.1f}".rstrip("0").rstrip(".")
    return (
        f"gave up after {shown} s (--file-timeout): no script should take this long to lint, "
        "so this is a bug in optax-lint; the other files were linted. Please report it with this file, "
        "or raise --file-timeout (0: no limit)"
    )
