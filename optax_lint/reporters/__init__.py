"""Output reporters: turn lint results into text for a terminal, CI or a tool.

`render(results, fmt, sources=..., options=...)` is the only entry point the CLI
needs; each format lives in its own small module.
"""

from __future__ import annotations

import os
from typing import Callable, Mapping

from optax_lint.core.diagnostics import FileResult, Finding
from optax_lint.reporters import (
    concise,
    full,
    github,
    grouped,
    json,
    json_lines,
    pylint,
)
from optax_lint.reporters.options import ReportOptions

Formatter = Callable[[list[Finding], Mapping[str, str], ReportOptions], str]


def _on_use(module: str) -> Formatter:
    """The CI formats (xml.etree, fingerprints, the catalogue's docs, reviewdog's and
    Azure's conventions) load only when asked for: a pre-commit run never needs them."""

    def render(findings: list[Finding], sources: Mapping[str, str], options: ReportOptions) -> str:
        import importlib

        return importlib.import_module(f"{__name__}.{module}").render(findings, sources, options)

    return render


# In the order --help lists them (core.config.OUTPUT_FORMATS and commands.check's list match).
FORMATS: dict[str, Formatter] = {
    "full": full.render,
    "concise": concise.render,
    "grouped": grouped.render,
    "json": json.render,
    "json-lines": json_lines.render,
    "github": github.render,
    "sarif": _on_use("sarif"),
    "gitlab": _on_use("gitlab"),
    "junit": _on_use("junit"),
    "pylint": pylint.render,
    "rdjson": _on_use("rdjson"),
    "azure": _on_use("azure"),
}


def render(
    results: list[FileResult],
    fmt: str,
    *,
    sources: Mapping[str, str],
    options: ReportOptions,
) -> str:
    """All findings of `results`, sorted by (path, line, column, code), in format `fmt`."""
    try:
        formatter = FORMATS[fmt]
    except KeyError:
        raise ValueError(f"unknown output format {fmt!r} (choose from {', '.join(FORMATS)})") from None
    findings = sorted((f for r in results for f in r.findings), key=lambda f: f.sort_key)
    return formatter(findings, sources, options)


def use_color(stream) -> bool:
    """Colour only for a terminal; NO_COLOR (any value) always wins, FORCE_COLOR forces it on."""
    if "NO_COLOR" in os.environ:
        return False
    # FORCE_COLOR=0/false conventionally means "do not force" (Node, many CLIs).
    if os.environ.get("FORCE_COLOR", "0").strip().lower() not in ("0", "false"):
        return True
    isatty = getattr(stream, "isatty", None)
    if isatty is None:
        return False
    try:
        return bool(isatty())
    except (ValueError, OSError):  # closed or detached stream
        return False


__all__ = ["FORMATS", "ReportOptions", "render", "use_color"]
