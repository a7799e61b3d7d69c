"""--baseline FILE / --update-baseline: adopt optax-lint on a codebase with findings.

`--update-baseline` records today's findings; later runs with `--baseline` report
only findings that are not recorded, so CI fails on new problems only. A finding is
matched on its line-shift-proof key (fingerprints.py: rule, file, normalized source
line, occurrence), never on its line number, so editing code above it keeps it
matched. Paths are stored relative to the baseline file's folder, so the file works
from any working directory.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Mapping

from optax_lint.core.diagnostics import FileResult, Finding
from optax_lint.core.fingerprints import Key, finding_keys
from optax_lint.core.source import SourceError, read_source

VERSION = 1
MAX_BYTES = 64 * 1024 * 1024  # tens of thousands of findings


class BaselineError(Exception):
    pass


def _path_mapper(baseline: Path):
    base = os.path.dirname(os.path.abspath(baseline))

    def stored(path: str) -> str:
        return Path(os.path.relpath(os.path.abspath(path), base)).as_posix()

    return stored


def _keys(findings: list[Finding], sources: Mapping[str, str], baseline: Path):
    return finding_keys(findings, sources, _path_mapper(baseline))


def _mode_of(path: Path) -> int:
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        return 0o644


def write(baseline: Path, findings: list[Finding], sources: Mapping[str, str]) -> int:
    """Record `findings`; returns how many. Sorted output keeps the file's diffs small."""
    entries = []
    for finding, key in _keys(findings, sources, baseline):
        entries.append({**key.to_dict(), "line": finding.span.line, "message": finding.message})
    entries.sort(key=lambda e: (e["path"], e["line"], e["code"], e["index"]))
    payload = {
        "optax-lint-baseline": VERSION,
        "note": "Findings recorded by `optax-lint --update-baseline`; matched on code, path, snippet and index (line and message are informative).",
        "findings": entries,
    }
    data = json.dumps(payload, indent=2, ensure_ascii=False) + "\n"
    try:
        # A temp file of its own beside the target, renamed over it: a reader (or a
        # concurrent run) sees the old baseline or the new one, never half of one.
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(baseline)), prefix=f".{baseline.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(data)
            os.chmod(tmp, _mode_of(baseline))  # mkstemp made it 0600; the file is meant to be committed
            os.replace(tmp, baseline)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    except OSError as exc:
        raise BaselineError(f"{baseline}: cannot write the baseline: {exc.strerror or exc}") from exc
    return len(entries)


def load(baseline: Path) -> set[Key]:
    try:
        source = read_source(baseline, max_bytes=MAX_BYTES)
    except SourceError as exc:
        hint = " (create it with --update-baseline)" if exc.kind == "not-found" else ""
        raise BaselineError(f"{baseline}: {exc}{hint}") from exc
    try:
        payload = json.loads(source.text)
        if payload.get("optax-lint-baseline") != VERSION:
            raise ValueError(f"not an optax-lint baseline of version {VERSION}")
        return {
            Key(str(e["code"]), str(e["path"]), str(e["snippet"]), int(e["index"]))
            for e in payload["findings"]
        }
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
        raise BaselineError(f"{baseline}: not a valid baseline file ({exc}); regenerate it with --update-baseline") from exc


def drop_known(results: list[FileResult], sources: Mapping[str, str], baseline: Path, known: set[Key]) -> int:
    """Remove the findings recorded in the baseline from `results`; returns how many."""
    findings = [f for r in results for f in r.findings]
    matched = {id(f) for f, key in _keys(findings, sources, baseline) if key in known}
    for result in results:
        result.findings = [f for f in result.findings if id(f) not in matched]
    return len(matched)
