"""`optax-lint - --stdin-filename train.py`: lint or fix text read from standard input,
the way editors and formatter pipelines call ruff.

Findings carry the given file name, config and per-file settings are resolved for it,
and with --fix the fixed text (in the input's own encoding, BOM and line endings) is
what goes to standard output; anything that stops a fix leaves the input unchanged.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import BinaryIO, Optional

from optax_lint.core.config import Settings
from optax_lint.core.source import SourceFile, encode_text, source_from_bytes
from optax_lint.run import api
from optax_lint.run.discovery import DEFAULT_EXCLUDE, is_excluded

STDIN_NAME = "-"


def read_stdin(stream: BinaryIO, max_bytes: int) -> bytes:
    """At most one byte past the bound, so a huge input is reported, not swallowed."""
    return stream.read(max_bytes + 1)


def force_excluded(filename: Optional[str], settings: Settings) -> bool:
    """--force-exclude applies to the stdin file name as to any named path."""
    if not (filename and settings.force_exclude):
        return False
    patterns = [*(settings.exclude if settings.exclude is not None else DEFAULT_EXCLUDE), *settings.extend_exclude]
    return is_excluded(filename, root=settings.root, patterns=patterns)


def run_stdin(data: bytes, filename: Optional[str], settings: Settings, options: api.RunOptions) -> tuple[api.Outcome, bytes]:
    """(the outcome, the output text as bytes: fixed with --fix, else the input)."""
    path = Path(filename) if filename else Path(STDIN_NAME)
    decoded: list[SourceFile] = []

    def read(p: Path) -> SourceFile:
        decoded.append(source_from_bytes(p, data, max_bytes=options.max_file_bytes))
        return decoded[0]

    result, text, internal = api.lint_file(path, settings, replace(options, write=False, jobs=1), read=read)
    outcome = api.Outcome(results=[result], internal_errors=internal, fixed=result.fixed)
    if text is not None:
        outcome.sources[result.path] = text
    output = data
    if decoded and text is not None and text != decoded[0].text:
        output = encode_text(decoded[0], text)  # lint_file checked that it encodes
    return outcome, output
