"""Identities for findings that survive line shifts.

A finding is known by its rule code, its file, the source line it sits on with the
whitespace normalized, and which occurrence of that triple it is in the file (0, 1,
...). Inserting lines above it changes none of these, unlike a line number. The
baseline (--baseline) matches on these keys; the gitlab and sarif reporters hash
them into fingerprints so CI systems track a finding across commits.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping, Optional

from optax_lint.core.diagnostics import Finding
from optax_lint.core.source import source_lines


@dataclass(frozen=True)
class Key:
    code: str
    path: str
    snippet: str
    index: int  # occurrence of (code, path, snippet) in the file, in source order

    def digest(self) -> str:
        raw = "\0".join((self.code, self.path, self.snippet, str(self.index)))
        return hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()

    def to_dict(self) -> dict:
        return {"code": self.code, "path": self.path, "snippet": self.snippet, "index": self.index}


def normalize(text: str) -> str:
    return " ".join(text.split())


def snippet(finding: Finding, lines: Optional[list[str]]) -> str:
    """The finding's first source line, whitespace-normalized; the message when the file
    has no readable text (an unreadable file, a path that does not exist)."""
    if lines and 1 <= finding.span.line <= len(lines):
        text = normalize(lines[finding.span.line - 1])
        if text:
            return text
    return normalize(finding.message)


def finding_keys(
    findings: Iterable[Finding],
    sources: Mapping[str, str],
    path_of: Callable[[str], str] = lambda path: path,
) -> list[tuple[Finding, Key]]:
    """Each finding (in source order) with its key; `path_of` maps displayed paths to the
    form stored in the key (e.g. relative to the baseline file)."""
    ordered = sorted(findings, key=lambda f: f.sort_key)
    lines_of: dict[str, Optional[list[str]]] = {}
    seen: Counter = Counter()
    out = []
    for finding in ordered:
        where = finding.source_key  # a notebook finding's line is a line of its cell
        if where not in lines_of:
            text = sources.get(where)
            lines_of[where] = source_lines(text) if text is not None else None
        base = (finding.code, path_of(finding.path), snippet(finding, lines_of[where]))
        out.append((finding, Key(*base, seen[base])))
        seen[base] += 1
    return out
