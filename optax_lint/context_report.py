"""`optax-lint FILE --show-context`: the run context of each file, with provenance.

For every field: its value, where it came from (`file:line`, `declared in
pyproject.toml`, `declared on the command line`) and the confidence; for unknown
fields, why. Then the enabled rules that were skipped for want of a field (from each
rule's `needs_context` in the catalogue), optimizers that cannot be analysed (chosen
from a config string), and pragma entries that were ignored.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from optax_lint.facts.context.run_context import FIELDS, ContextValue, RunContext

_FIELD_W = 18
_VALUE_W = 14
_SOURCE_W = 30
_CONF_W = 8


def format_value(field: str, value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return f"{value:_}" if abs(value) >= 10_000 else str(value)
    return str(value)


def _row(field: str, value: str, source: str, confidence: str, detail: str) -> str:
    line = f"  {field:<{_FIELD_W}}{value:<{_VALUE_W}} {source:<{_SOURCE_W}} {confidence:<{_CONF_W}} {detail}"
    return line.rstrip()


def _lines(start: int, end: int) -> str:
    return f"line {start}" if start == end else f"lines {start}-{end}"


def render_context(path: str, context: RunContext, facts, codes: set[str], catalogue: dict) -> str:
    from optax_lint.facts.context.multisteps import not_analysable
    from optax_lint.facts.project.found import line_of

    lines = [path]
    purpose = facts.purpose
    strength = " (a weak signal: advice only)" if purpose.weak else ""
    lines.append(f"  {'purpose':<{_FIELD_W}}{purpose.describe()}{strength}")
    for start, end in facts.made_up_demos:
        lines.append(f"  {'':<{_FIELD_W}}but {_lines(start, end)}: a `__main__` demo on made-up data, no advice about training there")
    for start, end in facts.placeholder_defaults:
        lines.append(f"  {'':<{_FIELD_W}}but {_lines(start, end)}: a parameter's default optimizer the module never runs with, no advice about training there")
    for field in FIELDS:
        entry: Optional[ContextValue] = context.entry(field)
        if entry is None or entry.value is None:
            lines.append(_row(field, "unknown", "", "", context.note(field)))
            continue
        confidence = entry.confidence if entry.usable else "low (not used by rules)"
        detail = entry.detail
        if entry.usable is False and not detail:
            detail = context.note(field)
        lines.append(_row(field, format_value(field, entry.value), entry.where(), confidence, detail))
    from optax_lint.engine.filters import silenced_in_file

    silenced = sorted(c for c in codes if silenced_in_file(catalogue.get(c), facts))
    skipped = []
    for code in sorted(codes):
        spec = catalogue.get(code)
        if spec is None or not spec.needs_context or code in silenced:
            continue
        missing = context.missing(spec.needs_context)
        if missing:
            skipped.append(f"    {code} {spec.name}: needs {', '.join(missing)}")
    if skipped:
        lines.append("  skipped for want of context:")
        lines.extend(skipped)
    if silenced:
        lines.append(f"  not a training run: {', '.join(silenced)} stay silent unless the context is declared")
    blocked = not_analysable(facts)
    if blocked:
        lines.append("  not analysable:")
        for node, text in blocked:
            lines.append(f"    {path}:{line_of(facts, node)} {text}")
    pins = facts.declared_pins
    if pins:
        # The releases API-currency findings are judged against (OPX701-OPX704).
        shown = "; ".join(p.shown() for p in pins.values())
        lines.append(f"  library pins: {shown}: API changes after them are migration notes")
    if context.problems:
        lines.append("  ignored:")
        for location, message in context.problems:
            lines.append(f"    {location}: {message}")
    return "\n".join(lines) + "\n"


def show_context(paths: list[Path], settings, cli_values: Optional[dict], max_bytes: int = 8 * 1024 * 1024) -> str:
    import libcst as cst

    from optax_lint.core.catalogue import load_catalogue
    from optax_lint.core.source import SourceError, read_source
    from optax_lint.facts.context.run_context import declared_for
    from optax_lint.facts.module import ModuleFacts
    from optax_lint.facts.project.files import ProjectFiles
    from optax_lint.run.api import display_path

    catalogue = load_catalogue()
    files = ProjectFiles()  # a config module several files read is parsed once
    out = []
    for path in paths:
        shown = display_path(path)
        notebook = path.suffix.lower() == ".ipynb"
        if notebook:
            from optax_lint.notebook import SIZE_FACTOR, cell_locations, notebook_text
        try:
            source = read_source(path, max_bytes=max_bytes * (SIZE_FACTOR if notebook else 1))
        except SourceError as exc:
            out.append(f"{shown}\n  cannot read: {exc}\n")
            continue
        text = source.text
        if notebook:  # the code cells as one module
            text = notebook_text(text)
            if text is None:
                out.append(f"{shown}\n  cannot parse: not a Jupyter notebook (nbformat 4)\n")
                continue
        try:
            module = cst.parse_module(text)
        except Exception as exc:  # noqa: BLE001 - any parse failure is reported, not raised
            message = str(getattr(exc, "message", exc)).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            out.append(f"{shown}\n  cannot parse: {message}\n")
            continue
        declared = declared_for(path, settings, cli_values)
        facts = ModuleFacts(module, shown, declared_context=declared, root=str(settings.root), text=text, project_files=files)
        report = render_context(shown, facts.run_context, facts, settings.codes_for_path(path), catalogue)
        if notebook:
            report = cell_locations(source.text, shown, report)
        out.append(report)
    return "\n".join(out)
