"""Linting and fixing one source text: parse, extract facts, run rules, apply noqa,
apply fixes until they converge. Reading and writing files lives in `api.py`."""

from __future__ import annotations

import traceback
from dataclasses import dataclass, field
from typing import Callable, Iterable, Optional

import libcst as cst

from optax_lint.core.catalogue import load_catalogue
from optax_lint.core.diagnostics import Edit, Finding, Span
from optax_lint.core.meta import INTERNAL_ERROR, SYNTAX_ERROR, UNUSED_NOQA, meta_finding
from optax_lint.engine import noqa as suppressions
from optax_lint.engine import prefilter
from optax_lint.engine.filters import drop_intended, judge_by_purpose, silenced_in_file
from optax_lint.engine.indentation import expanded_indentation
from optax_lint.engine.large import flagged_text
from optax_lint.engine.skipped import lint_skipped, unused_noqa
from optax_lint.facts.module import ModuleFacts
from optax_lint.rules import registry
from optax_lint.rules.base import Context
from optax_lint.syntax.parsing import (
    CpythonParse,
    better_syntax_error,
    cpython_parse,
    parse,
)
from optax_lint.syntax.edits import CodeMemo
from optax_lint.syntax.positions import Positions

MAX_FIX_ROUNDS = 10
# Deeper nesting than this risks the C stack in parsers and our own recursion.
_RECURSION_GUARD = "too deeply nested"



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
    refused: list[tuple[Finding, str]] = field(default_factory=list)  # fixes a gate (--verify) rejected
    fixed: list[Finding] = field(default_factory=list)  # the findings whose fix was applied, in order (--show-fixes)


def _internal_message(where: str, exc: BaseException, show_traceback: bool) -> str:
    """`internal error in OPX101 (name): KeyError: 'x'.` then the traceback, or a request for it."""
    head = f"internal error {where}: {type(exc).__name__}: {exc}."
    if show_traceback:
        return head + "\n" + traceback.format_exc().rstrip()
    return head + " Please report it with the output of --show-traceback."


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
    project_files=None,
    tree=None,
    release: bool = False,
    displayed: frozenset = frozenset(),
) -> tuple[list[Finding], int]:
    """`tree`: CPython's parse of `text`, when the caller has it (source positions);
    `release`: the findings are final (no fix or edit will be computed from them), so
    the facts are released at the end (ModuleFacts.release); `displayed`: in a
    notebook, the lines that end a cell's last statement (its value is shown)."""
    catalogue = load_catalogue()
    try:
        facts = ModuleFacts(module, path, declared_context=context, root=root, text=text, project_files=project_files)
    except RecursionError:  # the walker recurses into nested scopes (lambdas, defs)
        return [meta_finding(INTERNAL_ERROR, path, "gave up: the file is too deeply nested to analyse")], 1
    except Exception as exc:  # the shared extraction failing must not stop the run
        return [meta_finding(INTERNAL_ERROR, path, _internal_message("while extracting facts", exc, show_traceback))], 1
    positions = Positions(module, text, tree, raw=facts.raw)
    facts.positions = positions  # shared with the run context's locations (still lazy)
    facts.displayed = displayed
    findings: list[Finding] = []
    internal = 0
    for code in sorted(codes):
        if code not in registry.family_packages() or silenced_in_file(catalogue[code], facts):
            continue
        rule_cls = registry.rule_class(code)  # imported here, on first use
        ctx = Context(facts, catalogue[code], options.get(code, {}), positions)
        try:
            rule_cls().check(ctx)
        except RecursionError:
            internal += 1
            findings.append(meta_finding(INTERNAL_ERROR, path, f"{code} gave up: the file is too deeply nested to analyse"))
            continue
        except Exception as exc:  # one rule failing must not stop the others
            internal += 1
            where = f"in {code} ({catalogue[code].name})"
            findings.append(meta_finding(INTERNAL_ERROR, path, _internal_message(where, exc, show_traceback)))
            continue
        findings.extend(ctx.findings)
    findings = _distinct(judge_by_purpose(drop_intended(findings, facts, catalogue), facts, catalogue))
    if release:
        facts.release()
        positions.release()
    return findings, internal


def _distinct(findings: list[Finding]) -> list[Finding]:
    """One finding per (code, line, message): two extraction paths reaching the same
    node (a pipeline followed through two names) must not report it twice."""
    seen: set[tuple] = set()
    out = []
    for finding in findings:
        key = (finding.code, finding.path, finding.span.line, finding.message)
        if key not in seen:
            seen.add(key)
            out.append(finding)
    return out


def lint_text(
    text: str,
    path: str,
    codes: set[str],
    options: Optional[dict[str, dict]] = None,
    *,
    show_traceback: bool = False,
    context: Optional[dict] = None,
    root: Optional[str] = None,
    project_files=None,
    cpython: Optional[CpythonParse] = None,
    large_file_bytes: Optional[int] = None,
    release: bool = False,
    displayed: Optional[Callable[[str], frozenset]] = None,
) -> LintRun:
    """Findings for one source text. `project_files`: the run's ProjectFiles
    (facts/project/files.py), which keeps the project files read across the run;
    `cpython`: cpython_parse(text, path), when the caller has it; `large_file_bytes`:
    over this size, parse with libcst only the top-level statements the prefilter flags
    (large.py; for a plain lint only: the module returned is not the whole file)."""
    options = options or {}
    # Only rules whose family's triggers occur in the raw text can fire (prefilter.py);
    # a file with none is only checked for syntax errors (CPython's parser, ~0.06x libcst's).
    rule_codes = prefilter.active_codes(text, codes)
    if not rule_codes:
        return LintRun(lint_skipped(text, path, codes, cpython), None)
    # The syntax check's tree also gives the source positions (one CPython parse).
    tree, cpython_error, final = cpython or cpython_parse(text, path)
    parsed_text = text
    if large_file_bytes is not None and tree is not None and len(text) > large_file_bytes:
        reduced = flagged_text(text, tree, rule_codes)
        if reduced is not None:
            parsed_text, tree = reduced, None  # the positions re-parse the reduced text
    module, error = (None, cpython_error) if final else parse(parsed_text, path)
    expanded = None
    if module is None and tree is not None:
        # CPython accepted what libcst refused: a tab then spaces in the indentation.
        expanded = expanded_indentation(parsed_text)
        if expanded is not None:
            module, _ = parse(expanded.text, path)
            parsed_text, tree = expanded.text, None
    if module is None:
        error = error if final else better_syntax_error(cpython_error, error)
        return LintRun([error] if SYNTAX_ERROR in codes else [], None)
    findings, internal = run_rules(
        module, parsed_text, path, rule_codes, options, show_traceback=show_traceback, context=context, root=root,
        project_files=project_files, tree=tree, release=release,
        displayed=displayed(text) if displayed is not None else frozenset(),
    )
    if expanded is not None:
        findings = [expanded.finding(f) for f in findings]
    findings = apply_suppressions(text, path, findings, report_unused=UNUSED_NOQA in codes)
    findings.sort(key=lambda f: f.sort_key)
    # No module for an expanded file: the fix loop must not edit the text as written.
    return LintRun(findings, None if expanded is not None else module, internal)


def apply_suppressions(text: str, path: str, findings: list[Finding], *, report_unused: bool) -> list[Finding]:
    if not findings and not report_unused:
        return findings
    noqa = suppressions.parse(text)
    kept = [f for f in findings if f.code == INTERNAL_ERROR or not noqa.suppresses(f.code, f.span.line)]
    if report_unused:
        kept += unused_noqa(noqa, findings, path)
    return kept


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
    gate: Optional[Callable] = None,
    on_edits: Optional[Callable[[list[tuple[int, int, str]]], None]] = None,
    project_files=None,
    displayed: Optional[Callable[[str], frozenset]] = None,
) -> FixRun:
    """Apply fixes round by round until nothing changes (ruff's convergence loop).

    In each round every fixable finding's fix is applied on its own to the round's
    tree; its effect is reduced to one text edit (the span that changed), and all
    edits that do not overlap are applied together, like ruff's non-overlapping edit
    sets. Overlapping ones wait for the next round. A fix that would leave the file
    unparseable is dropped and reported; with a gate (--verify) a fix must also pass
    verification. `on_edits` sees each round's applied edits (notebooks track their
    cell boundaries with it).
    """
    applied = 0
    fixed: list[Finding] = []
    refused: list[tuple[Finding, str]] = []
    dropped: list[Finding] = []
    dropped_keys: set[tuple] = set()
    current = text
    last: Optional[tuple[str, CpythonParse]] = None

    def check(candidate: str) -> CpythonParse:
        """CPython's parse of a text; the last one is kept for the lint that follows it."""
        nonlocal last
        if last is None or last[0] is not candidate:
            last = (candidate, cpython_parse(candidate, path))
        return last[1]

    # A fix must also satisfy CPython's parser when the original did (libcst is laxer).
    cpython_ok = check(text)[1] is None

    def drop(finding: Finding) -> None:
        dropped_keys.add((finding.code, finding.message, finding.span.line))
        dropped.append(finding)

    run = None
    for _ in range(MAX_FIX_ROUNDS):
        run = lint_text(current, path, codes, options, show_traceback=show_traceback, context=context, root=root,
                        project_files=project_files, cpython=check(current), displayed=displayed)
        linted = current
        candidates = [
            f for f in run.findings
            if f.fixable(unsafe) and (f.code, f.message, f.span.line) not in dropped_keys
        ]
        if run.module is None or not candidates:
            break
        module = run.module
        memo = CodeMemo()
        edits: list[tuple[int, int, str]] = []
        owners: dict[int, Finding] = {}  # id of an edit -> the finding whose fix it is
        for finding in candidates:
            try:
                new_module = _apply_fix(finding, module, memo)
                new_code = _keep_final_cr(current, memo.code(new_module))
            except Exception:
                drop(finding)
                continue
            if new_code == current:
                continue
            try:
                # CPython's parse (~0.1x libcst's) judges each fix alone, on the top-level
                # statements it changed (each is syntax on its own: a whole-file parse per
                # candidate made --fix quadratic); libcst's and CPython's judge the round's
                # combined text below, and each fix alone only when that fails.
                if not cpython_ok:
                    cst.parse_module(new_code)
                elif not _statements_parse(memo, module, new_module, new_code, check, path):
                    raise SyntaxError("the fixed code does not parse with CPython")
            except Exception:
                drop(finding)
                continue
            if gate is not None:
                # --fix --verify: the fix must repair what the rule protects, measured.
                accepted, evidence = gate(finding, module, new_module)
                if not accepted:
                    dropped_keys.add((finding.code, finding.message, finding.span.line))
                    refused.append((finding, evidence))
                    continue
            edits.append(_text_edit(current, new_code))
            owners[id(edits[-1])] = finding
        chosen = _non_overlapping(edits)
        if not chosen:
            break
        combined = _apply_edits(current, chosen)
        # One fix that libcst already judged alone needs no second look.
        if (cpython_ok or len(chosen) > 1) and not _parses(combined, cpython_ok, check):
            if cpython_ok:
                # Each fix was checked by CPython on its statements only: find the ones
                # refused alone, by libcst or by CPython on the whole text (a statement
                # put before a `from __future__` import is syntax only on its own).
                alone = [edit for edit in chosen if _parses(_apply_edits(current, [edit]), True, check)]
                for edit in chosen:
                    if edit not in alone:
                        drop(owners[id(edit)])
                chosen = alone
            chosen = chosen[:1]  # edits that clash together go one per round
            if not chosen:
                continue
            combined = _apply_edits(current, chosen)
        applied += len(chosen)
        fixed.extend(owners[id(edit)] for edit in chosen)
        if on_edits is not None:
            on_edits(chosen)
        current = combined
    if run is not None and linted == current:  # nothing changed since the last lint: reuse it
        final = run
    else:
        final = lint_text(current, path, codes, options, show_traceback=show_traceback, context=context, root=root,
                          project_files=project_files, cpython=check(current), displayed=displayed)
    return FixRun(current, applied, final.findings, dropped, final.internal_errors, refused, fixed)


def _apply_fix(finding: Finding, module: cst.Module, memo: CodeMemo) -> cst.Module:
    apply = finding.fix.apply
    if getattr(apply, "shares_codegen", False):
        return apply(module, memo)  # a reflowed edit (every rule's fix) shares the round's codegen
    return apply(module)


def _statements_parse(memo: CodeMemo, module: cst.Module, new_module: cst.Module, new_code: str, check: Callable, path: str) -> bool:
    """CPython accepts the top-level statements a candidate fix changed (all of them when
    the fix rebuilt the module)."""
    changed = memo.changed_code(module, new_module)
    if not changed and new_module.body and len(new_module.body) != len(module.body):
        return check(new_code)[1] is None  # a statement removed: judge the whole text
    return all(cpython_parse(code, path)[1] is None for code in changed)


def _parses(text: str, with_cpython: bool, check: Callable) -> bool:
    """libcst parses `text` (and CPython, when `with_cpython`)."""
    try:
        cst.parse_module(text)
    except Exception:
        return False
    return not (with_cpython and check(text)[1] is not None)


def _keep_final_cr(old: str, new: str) -> str:
    """libcst 1.9 drops the final newline of a file whose line endings are a bare CR
    (`parse_module("x = 1\\r").code == "x = 1"`): put it back."""
    if old.endswith("\r") and new and not new.endswith(("\r", "\n")):
        return new + "\r"
    return new


def _text_edit(old: str, new: str) -> tuple[int, int, str]:
    """The single span of `old` that `new` replaces: (start, end, replacement)."""
    limit = min(len(old), len(new))
    start = _common_length(old, new, limit, lambda text, n: text[:n])
    suffix = _common_length(old, new, limit - start, lambda text, n: text[len(text) - n:])
    return start, len(old) - suffix, new[start:len(new) - suffix]


def _common_length(a: str, b: str, limit: int, part: Callable[[str, int], str]) -> int:
    """The longest n <= limit with part(a, n) == part(b, n), by bisection: string
    comparisons run in C, where a character loop over a 1 MB file takes a tenth of a
    second per fix."""
    lo, hi = 0, limit
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if part(a, mid) == part(b, mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def _non_overlapping(edits: list[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    chosen: list[tuple[int, int, str]] = []
    last_end = -1
    for edit in sorted(edits, key=lambda e: (e[0], e[1])):
        if edit[0] > last_end:
            chosen.append(edit)
            last_end = edit[1]
    return chosen


def _apply_edits(text: str, edits: list[tuple[int, int, str]]) -> str:
    out = []
    cursor = 0
    for start, end, replacement in edits:
        out.append(text[cursor:start])
        out.append(replacement)
        cursor = end
    out.append(text[cursor:])
    return "".join(out)


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
            new = _keep_final_cr(text, fix.apply(run.module).code)
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
