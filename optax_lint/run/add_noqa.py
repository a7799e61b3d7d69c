"""--add-noqa on disk: each file with findings gets its `# noqa: OPXnnn` comments
(engine/noqa_add.py), written back as the fixer writes (atomically, in the file's own
encoding, BOM, line endings and mode), and only if the file still holds the text that
was linted."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from optax_lint.core import meta
from optax_lint.core.diagnostics import Finding
from optax_lint.core.source import SourceChanged, SourceError, read_source, write_source
from optax_lint.engine.noqa_add import add_codes

# The engine's own findings are about the file, not a line a comment could silence.
_NOT_SUPPRESSIBLE = {meta.SYNTAX_ERROR, meta.UNUSED_NOQA, meta.IO_ERROR, meta.INTERNAL_ERROR}


@dataclass
class NoqaOutcome:
    added: int = 0  # lines that gained a directive (or a code in one), as ruff counts
    refused: list[tuple[Finding, str]] = field(default_factory=list)  # findings left unsuppressed, and why


def add_noqa(findings: list[Finding], sources: Mapping[str, str], max_bytes: int) -> NoqaOutcome:
    """Suppress `findings` where they start; `sources`: the text each path was linted from."""
    outcome = NoqaOutcome()
    by_path: dict[str, list[Finding]] = defaultdict(list)
    for finding in findings:
        if finding.code in _NOT_SUPPRESSIBLE:
            outcome.refused.append((finding, f"a noqa comment cannot silence {finding.code} ({finding.name})"))
        elif finding.cell is not None:
            outcome.refused.append((finding, "--add-noqa does not edit notebooks; add the comment in the cell"))
        else:
            by_path[finding.path].append(finding)
    for path, items in by_path.items():
        wanted: dict[int, set[str]] = defaultdict(set)
        for finding in items:
            wanted[finding.span.line].add(finding.code)
        try:
            source = read_source(Path(path), max_bytes=max_bytes)
            if source.text != sources.get(path):
                raise SourceChanged("the file changed since it was linted; not edited")
            text, added, refused = add_codes(source.text, wanted)
            if added:
                write_source(source, text)
        except SourceError as exc:
            outcome.refused.extend((f, str(exc)) for f in items)
            continue
        outcome.added += added
        outcome.refused.extend((f, refused[f.span.line]) for f in items if f.span.line in refused)
    return outcome
