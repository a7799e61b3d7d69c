"""The data every part of optax-lint exchanges: findings, fixes, edits, locations.

Rules produce `Finding`s; reporters print them; the fixer applies their `Fix`es.
Positions are 1-based lines and 1-based columns (in characters), like ruff's output.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Callable, Optional


class Severity(str, enum.Enum):
    ERROR = "error"  # training crashes or is silently corrupted
    WARNING = "warning"  # departs from the protocol's recommendation
    INFO = "info"  # advice

    def __str__(self) -> str:  # pragma: no cover - trivial
        return self.value


class Applicability(str, enum.Enum):
    SAFE = "safe"  # does what the code evidently meant
    UNSAFE = "unsafe"  # changes hyperparameters or adds what the author did not write
    DISPLAY_ONLY = "display-only"  # shown as advice, never applied

    def __str__(self) -> str:  # pragma: no cover - trivial
        return self.value


@dataclass(frozen=True, order=True)
class Span:
    """A source range: 1-based line and column, end exclusive (ruff's convention)."""

    line: int
    column: int
    end_line: int
    end_column: int

    def to_dict(self) -> dict:
        return {
            "line": self.line,
            "column": self.column,
            "end_line": self.end_line,
            "end_column": self.end_column,
        }


@dataclass(frozen=True)
class Related:
    """A secondary location that explains a finding (where the chain was built, ...)."""

    message: str
    span: Span
    path: Optional[str] = None  # None: same file as the finding
    cell: Optional[int] = None  # notebooks: the cell the span's lines are in

    def to_dict(self) -> dict:
        d = {"message": self.message, **self.span.to_dict()}
        if self.path is not None:
            d["path"] = self.path
        if self.cell is not None:
            d["cell"] = self.cell
        return d


@dataclass(frozen=True)
class Edit:
    """A text edit: replace [start, end) with `content`. Derived from a fix for output."""

    span: Span
    content: str

    def to_dict(self) -> dict:
        return {"content": self.content, **self.span.to_dict()}


@dataclass
class Fix:
    """A fix is a function from one libcst Module to another.

    Keeping it a tree edit (not text) is what preserves the user's formatting and
    comments; the text `edits` are computed from it only when a reporter needs them.
    """

    title: str
    applicability: Applicability
    apply: Optional[Callable] = None  # Callable[[libcst.Module], libcst.Module]; None for display-only
    edits: list[Edit] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {
            "title": self.title,
            "applicability": self.applicability.value,
            "edits": [e.to_dict() for e in self.edits],
        }


@dataclass
class Finding:
    code: str
    name: str
    severity: Severity
    message: str
    path: str
    span: Span
    fix: Optional[Fix] = None
    related: list[Related] = field(default_factory=list)
    # What to do about it: the fix's title when there is one, else the rule's `help`.
    help: str = ""
    # Evidence from --verify, attached after linting (issue: verify).
    evidence: Optional[dict] = None
    # Notebooks: the cell number (1-based, counting every cell); span lines are within the cell.
    cell: Optional[int] = None
    # Internal: the libcst node the finding is anchored on, to compute span lazily.
    node: object = field(default=None, repr=False, compare=False)

    @property
    def sort_key(self):
        return (self.path, self.cell or 0, self.span.line, self.span.column, self.code)

    @property
    def location(self) -> str:
        """`path:line:col`, or `path:cell N:line:col` in a notebook (ruff's spelling)."""
        cell = f"cell {self.cell}:" if self.cell is not None else ""
        return f"{self.path}:{cell}{self.span.line}:{self.span.column}"

    @property
    def cell_note(self) -> str:
        """`cell N, line L: ` before the message where a format can only point at the
        .ipynb file (the span counts lines within the cell); empty outside notebooks."""
        return f"cell {self.cell}, line {self.span.line}: " if self.cell is not None else ""

    @property
    def source_key(self) -> str:
        """The key of the text its code frame is drawn from (a notebook cell's own text)."""
        return self.path if self.cell is None else f"{self.path}:cell {self.cell}"

    def fixable(self, unsafe: bool) -> bool:
        if self.fix is None or not self.fix.apply:
            return False
        if self.fix.applicability is Applicability.SAFE:
            return True
        return unsafe and self.fix.applicability is Applicability.UNSAFE

    @property
    def help_text(self) -> str:
        if self.fix is not None and self.fix.title:
            return self.fix.title
        return self.help

    def to_dict(self) -> dict:
        d = {
            "code": self.code,
            "name": self.name,
            "severity": self.severity.value,
            "message": self.message,
            "path": self.path,
            **self.span.to_dict(),
            "fix": self.fix.to_dict() if self.fix is not None else None,
            "help": self.help_text or None,
            "related": [r.to_dict() for r in self.related],
        }
        if self.evidence is not None:
            d["evidence"] = self.evidence
        if self.cell is not None:
            d["cell"] = self.cell
        return d


@dataclass
class FileResult:
    """What linting one file produced."""

    path: str
    findings: list[Finding] = field(default_factory=list)
    fixed: int = 0  # fixes applied (with --fix) or that would apply (with --diff)
    applied_fixes: list[Finding] = field(default_factory=list)  # with --fix: the findings fixed (--show-fixes)
    diff: Optional[str] = None  # unified diff (with --diff)
    error: Optional[str] = None  # a read/parse/internal problem already turned into a finding
    verification: list = field(default_factory=list)  # --verify reports (verify.pipeline_report.PipelineReport)
    cell_sources: dict = field(default_factory=dict)  # notebooks: cell number -> its source, for code frames
