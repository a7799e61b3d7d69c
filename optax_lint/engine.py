"""Linting and fixing one source text: parse, extract facts, run rules, apply noqa,
apply fixes until they converge. Reading and writing files lives in `api.py`."""

from __future__ import annotations

import ast
import re
import traceback
import warnings
from dataclasses import dataclass, field
from typing import Iterable, Optional

import libcst as cst

from . import suppressions
from .catalogue import RuleSpec, load_catalogue
from .diagnostics import Applicability, Edit, Finding, Severity, Span
from .extract.facts import ModuleFacts
from .positions import Positions
from .rules import REGISTRY
from .rules.base import Context

# Only files that mention one of these can hold anything a rule looks at; the rest
# are checked for syntax errors with CPython's own parser (~0.06x the libcst parse).
_RELEVANT = re.compile(r"optax|jax|flax|orbax")
MAX_FIX_ROUNDS = 10
# Deeper nesting than this risks the C stack in parsers and our own recursion.
_RECURSION_GUARD = "too deeply nested"

SYNTAX_ERROR = "OPX001"
UNUSED_NOQA = "OPX002"
IO_ERROR = "OPX003"
INTERNAL_ERROR = "OPX900"


@dataclass
class LintRun:
    findings: list[Finding]
    module: Optional[cst.Module]
    internal_errors: int = 0


@dataclass
class FixRun:
    text: str
    applied: int
    findings: list[Finding]
    dropped: list[Finding] = field(default_factory=list)
    internal_errors: int = 0


def meta_finding(code: str, path: str, message: str, line: int = 1, column: int = 1, end_column: Optional[int] = None) -> Finding:
    spec = load_catalogue()[code]
    return Finding(
        code=code,
        name=spec.name,
        severity=spec.severity,
        message=message,
        path=path,
        span=Span(line, column, line, end_column if end_column is not None else column),
    )


def parse(text: str, path: str) -> tuple[Optional[cst.Module], Optional[Finding]]:
    try:
        return cst.parse_module(text), None
    except cst.ParserSyntaxError as exc:
        message = str(exc.message if hasattr(exc, "message") else exc).strip().splitlines()[0]
        return None, meta_finding(SYNTAX_ERROR, path, f"SyntaxError: {message}", exc.raw_line, exc.raw_column + 1)
    except RecursionError:
        return None, meta_finding(SYNTAX_ERROR, path, "SyntaxError: the file is too deeply nested to parse")
    except (MemoryError, ValueError, TypeError) as exc:
        return None, meta_finding(SYNTAX_ERROR, path, f"SyntaxError: cannot parse: {exc}")


def quick_syntax_check(text: str, path: str) -> Optional[Finding]:
    """Syntax check for files no rule looks at: CPython's parser, confirmed by libcst
    (which knows newer syntax than the running interpreter may)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(text)
        return None
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        _, finding = parse(text, path)
        return finding


def run_rules(
    module: cst.Module,
    text: str,
    path: str,
    codes: Iterable[str],
    options: dict[str, dict],
    *,
    show_traceback: bool = False,
    context: Optional[dict] = None,
    root: Optional[str] = None,
) -> tuple[list[Finding], int]:
    catalogue = load_catalogue()
    facts = ModuleFacts(module, path, declared_context=context, root=root, text=text)
    positions = Positions(module)
    findings: list[Finding] = []
    internal = 0
    for code in sorted(codes):
        rule_cls = REGISTRY.get(code)
        if rule_cls is None:
            continue
        ctx = Context(facts, catalogue[code], options.get(code, {}), positions)
        try:
            rule_cls().check(ctx)
        except RecursionError:
            internal += 1
            findings.append(meta_finding(INTERNAL_ERROR, path, f"{code} gave up: the file is too deeply nested to analyse"))
            continue
        except Exception as exc:  # one rule failing must not stop the others
            internal += 1
            detail = traceback.format_exc() if show_traceback else f"{type(exc).__name__}: {exc}"
            findings.append(
                meta_finding(
                    INTERNAL_ERROR,
                    path,
                    f"internal error in {code} ({catalogue[code].name}): {detail}. "
                    + ("" if show_traceback else "Please report it with the output of --show-traceback."),
                )
            )
            continue
        findings.extend(ctx.findings)
    return findings, internal


def lint_text(
    text: str,
    path: str,
    codes: set[str],
    options: Optional[dict[str, dict]] = None,
    *,
    show_traceback: bool = False,
    context: Optional[dict] = None,
    root: Optional[str] = None,
) -> LintRun:
    options = options or {}
    rule_codes = {c for c in codes if c in REGISTRY}
    if not _RELEVANT.search(text):
        error = quick_syntax_check(text, path)
        findings = [error] if error is not None and SYNTAX_ERROR in codes else []
        if UNUSED_NOQA in codes and error is None:
            findings += _unused_noqa(suppressions.parse(text), [], path)
        return LintRun(findings, None)
    module, error = parse(text, path)
    if module is None:
        return LintRun([error] if SYNTAX_ERROR in codes else [], None)
    findings, internal = run_rules(
        module, text, path, rule_codes, options, show_traceback=show_traceback, context=context, root=root
    )
    findings = apply_suppressions(text, path, findings, report_unused=UNUSED_NOQA in codes)
    findings.sort(key=lambda f: f.sort_key)
    return LintRun(findings, module, internal)


def apply_suppressions(text: str, path: str, findings: list[Finding], *, report_unused: bool) -> list[Finding]:
    if not findings and not report_unused:
        return findings
    noqa = suppressions.parse(text)
    kept = [f for f in findings if f.code == INTERNAL_ERROR or not noqa.suppresses(f.code, f.span.line)]
    if report_unused:
        kept += _unused_noqa(noqa, findings, path)
    return kept


def _unused_noqa(noqa: suppressions.Suppressions, findings: list[Finding], path: str) -> list[Finding]:
    out = []
    catalogue = load_catalogue()
    for entry in noqa.lines.values():
        if entry.codes is None:
            continue  # a bare noqa may serve other tools
        ours = [c for c in entry.codes if c.startswith("OPX")]
        unused = [c for c in ours if c not in entry.used]
        if not unused:
            continue
        unknown = [c for c in unused if c not in catalogue]
        detail = ", ".join(unused) + (f" (unknown: {', '.join(unknown)})" if unknown else "")
        out.append(meta_finding(UNUSED_NOQA, path, f"Unused `noqa` directive for {detail}", entry.line, entry.column, entry.end_column))
    present = {f.code for f in findings}
    for line, column, end, codes in noqa.file_comments:
        if codes is None:
            continue
        unused = [c for c in codes if c.startswith("OPX") and c not in present]
        if unused:
            out.append(meta_finding(UNUSED_NOQA, path, f"Unused file-level `noqa` for {', '.join(unused)}", line, column, end))
    return out


def fix_text(
    text: str,
    path: str,
    codes: set[str],
    options: Optional[dict[str, dict]] = None,
    *,
    unsafe: bool = False,
    show_traceback: bool = False,
    context: Optional[dict] = None,
    root: Optional[str] = None,
) -> FixRun:
    """Apply fixes round by round until nothing changes (ruff's convergence loop).

    Within a round, fixes apply one after another to the evolving tree; a fix whose
    node was rebuilt by an earlier one is left for the next round. A fix that would
    leave the file unparseable is dropped and reported.
    """
    applied = 0
    dropped: list[Finding] = []
    dropped_keys: set[tuple] = set()
    current = text
    for _ in range(MAX_FIX_ROUNDS):
        run = lint_text(current, path, codes, options, show_traceback=show_traceback, context=context, root=root)
        candidates = [
            f for f in run.findings
            if f.fixable(unsafe) and (f.code, f.message, f.span.line) not in dropped_keys
        ]
        if run.module is None or not candidates:
            break
        module = run.module
        changed = False
        for finding in candidates:
            try:
                new_module = finding.fix.apply(module)
            except Exception:
                dropped_keys.add((finding.code, finding.message, finding.span.line))
                dropped.append(finding)
                continue
            if new_module is module:
                continue
            new_code = new_module.code
            if new_code == module.code:
                continue
            try:
                cst.parse_module(new_code)
            except Exception:
                dropped_keys.add((finding.code, finding.message, finding.span.line))
                dropped.append(finding)
                continue
            module = new_module
            applied += 1
            changed = True
        if not changed:
            break
        current = module.code
    final = lint_text(current, path, codes, options, show_traceback=show_traceback, context=context, root=root)
    return FixRun(current, applied, final.findings, dropped, final.internal_errors)


def attach_edits(text: str, run: LintRun) -> None:
    """Fill each fix's text edits (for JSON output): the minimal replaced span of the
    text, found by applying the fix alone and trimming the common prefix and suffix."""
    if run.module is None:
        return
    for finding in run.findings:
        fix = finding.fix
        if fix is None or not callable(fix.apply):
            continue
        try:
            new = fix.apply(run.module).code
        except Exception:
            continue
        if new == text:
            continue
        start = 0
        limit = min(len(text), len(new))
        while start < limit and text[start] == new[start]:
            start += 1
        end_old, end_new = len(text), len(new)
        while end_old > start and end_new > start and text[end_old - 1] == new[end_new - 1]:
            end_old -= 1
            end_new -= 1
        line, column = _line_col(text, start)
        end_line, end_column = _line_col(text, end_old)
        fix.edits = [Edit(Span(line, column, end_line, end_column), new[start:end_new])]


def _line_col(text: str, offset: int) -> tuple[int, int]:
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


def severity_of(code: str) -> Severity:
    return load_catalogue()[code].severity


def applicability_counts(findings: list[Finding]) -> dict[Applicability, int]:
    counts = {a: 0 for a in Applicability}
    for f in findings:
        if f.fix is not None:
            counts[f.fix.applicability] += 1
    return counts


def specs(codes: Iterable[str]) -> list[RuleSpec]:
    catalogue = load_catalogue()
    return [catalogue[c] for c in sorted(codes) if c in catalogue]
