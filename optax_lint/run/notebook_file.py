"""Linting a notebook file: the cells joined into one module, findings and fixes
mapped back to cells, the fixed sources spliced into the JSON text."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Optional

from optax_lint.core.diagnostics import FileResult
from optax_lint.core.source import SourceError, encode_text, write_source
from optax_lint.run.budget import uninterrupted
from optax_lint.notebook.format import NotebookError, replace_sources
from optax_lint.notebook.lint import (
    PYTHON_LANGUAGES,
    cell_gate,
    cell_problems,
    cells_diff,
    notebook_layout,
    read_notebook,
    to_cells,
    verify_cells,
)
from optax_lint.run.per_file import (
    declared_context,
    fixed_findings,
    read_failure,
    verify_gate,
)


def lint_notebook_file(path: Path, shown: str, codes: set[str], settings, options, read=None,
                       project_files=None) -> tuple[FileResult, Optional[str], int]:
    """lint_file for a notebook: same options, same result shape, findings per cell. The
    text returned is the notebook's JSON (fixed with --fix): code frames use the cells."""
    from optax_lint.core import meta
    from optax_lint.engine import lint as engine

    result = FileResult(shown)
    try:
        source = read_notebook(path, options.max_file_bytes, read)
        nb, layout = notebook_layout(source.text, options.max_file_bytes)
    except SourceError as exc:
        return read_failure(result, exc, codes), None, 0
    except NotebookError as exc:
        if exc.code in codes or exc.code == meta.IO_ERROR:
            result.findings.append(meta.meta_finding(exc.code, shown, exc.message, exc.line, exc.column))
        result.error = exc.message
        return result, source.text, 0
    if nb.language is not None and nb.language.lower() not in PYTHON_LANGUAGES:
        return result, source.text, 0  # an R or Julia notebook: nothing for us
    problems = cell_problems(layout, shown, codes)
    before = layout.sources(layout.text)
    result.cell_sources = before
    declared = declared_context(path, settings, options)
    common = dict(show_traceback=options.show_traceback, context=declared, root=str(settings.root), project_files=project_files,
                  displayed=layout.displayed)
    if not (options.fix or options.diff):
        cpython = (layout.tree, None, False) if layout.tree is not None else None  # the joined cells' parse, made once
        run = engine.lint_text(layout.text, shown, codes, settings.rule_options, release=not options.with_edits,
                               cpython=cpython, **common)
        if options.with_edits:
            engine.attach_edits(layout.text, run)
        result.findings = sorted(problems + to_cells(run.findings, layout, layout.text), key=lambda f: f.sort_key)
        if options.verify_worker is not None and run.module is not None:
            result.verification = verify_cells(layout, shown, options.verify_worker)
        return result, source.text, run.internal_errors
    layout.tree = None  # a fix parses each new text itself; no tree to copy
    original = copy.deepcopy(layout)  # `layout` follows the fixes; this one stays put
    fixed = engine.fix_text(
        layout.text, shown, codes, settings.rule_options, unsafe=options.unsafe_fixes,
        gate=cell_gate(layout, verify_gate(options, shown)), on_edits=layout.applied, **common,
    )
    to_cells(fixed.dropped, original, original.text)
    result.findings = problems + to_cells(fixed_findings(fixed, shown), layout, fixed.text)
    result.findings.sort(key=lambda f: f.sort_key)
    after = layout.sources(fixed.text)
    text = source.text
    if after != before:
        result.fixed = fixed.applied
        if options.diff:
            result.diff = cells_diff(shown, before, after)
            return result, text, fixed.internal_errors + len(fixed.dropped)
        new_text = replace_sources(nb, after)
        try:
            if getattr(options, "write", True):
                with uninterrupted():  # the file budget never cuts a write short
                    write_source(source, new_text)
            else:  # the caller outputs the fixed notebook (stdin)
                encode_text(source, new_text)
            result.cell_sources, text = after, new_text
            result.applied_fixes = to_cells(fixed.fixed, original, original.text)
        except SourceError as exc:
            result.fixed = 0
            run = engine.lint_text(original.text, shown, codes, settings.rule_options, context=declared, root=str(settings.root),
                                   project_files=project_files, displayed=original.displayed)
            result.findings = problems + to_cells(run.findings, original, original.text)
            result.findings.append(meta.meta_finding(meta.IO_ERROR, shown, f"not fixed: {exc}"))
    return result, text, fixed.internal_errors + len(fixed.dropped)


def cached_cell_sources(text: str, max_file_bytes: int) -> Optional[dict]:
    """Each cell's source, for the code frames of a notebook answered from the cache
    (its findings are stored, its cells are not); None if the text is not a notebook."""
    try:
        _, layout = notebook_layout(text, max_file_bytes)
    except (NotebookError, SourceError):
        return None
    return layout.sources(layout.text)
