"""`optax-lint server`: a Language Server (pygls) for any editor that speaks LSP.

It publishes diagnostics when a Python document is opened, changed or saved, offers
each finding's fix as a quick fix (titled safe or unsafe) plus one "fix all safe
fixes" source action, and shows the rule's documentation on hover. Documents are
linted in-process from the editor's text (never from disk), with the configuration
found above the document's path, exactly as `optax-lint FILE` would.

pygls is an optional dependency (the `lsp` extra, see core/install.py); `run()` is the only
entry point the CLI calls, after checking that pygls imports.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from lsprotocol import types as lsp
from pygls import uris
from pygls.lsp.server import LanguageServer

from optax_lint import __version__
from optax_lint.core.catalogue import RULES_DOC_URL, load_catalogue, rule_doc_url
from optax_lint.core.diagnostics import Applicability, Finding, Severity, Span
from optax_lint.engine import lint as engine

# Where docs/rules.md is published; a client may pass {"docsUrl": ...} as
# initializationOptions to point codeDescription links at its own copy.
DOCS_URL = RULES_DOC_URL
SOURCE = "optax-lint"
FIX_ALL = "source.fixAll.optax-lint"

_SEVERITY = {
    Severity.ERROR: lsp.DiagnosticSeverity.Error,
    Severity.WARNING: lsp.DiagnosticSeverity.Warning,
    Severity.INFO: lsp.DiagnosticSeverity.Information,
}


def rule_url(code: str, docs_url: str = DOCS_URL) -> str:
    """The rule's section of docs/rules.md."""
    spec = load_catalogue().get(code)
    return rule_doc_url(spec, docs_url) if spec else docs_url


class _Lines:
    """Converts 1-based (line, code point column) to LSP positions in the negotiated
    encoding: UTF-16 code units unless the client offered UTF-8 or UTF-32."""

    _CODECS = {"utf-8": ("utf-8", 1), "utf-16": ("utf-16-le", 2), "utf-32": ("utf-32-le", 4)}

    def __init__(self, text: str, encoding: str = "utf-16") -> None:
        self.lines = text.split("\n")
        self.codec, self.unit = self._CODECS.get(getattr(encoding, "value", encoding), self._CODECS["utf-16"])

    def position(self, line: int, column: int) -> lsp.Position:
        row = max(line - 1, 0)
        if row >= len(self.lines):
            row, column = len(self.lines) - 1, len(self.lines[-1]) + 1
        prefix = self.lines[row][: max(column - 1, 0)]
        return lsp.Position(line=row, character=len(prefix.encode(self.codec, "surrogatepass")) // self.unit)

    def range(self, span: Span) -> lsp.Range:
        return lsp.Range(start=self.position(span.line, span.column), end=self.position(span.end_line, span.end_column))


class DocumentLinter:
    """Lints one editor document's text (or a notebook's cells) with the settings that
    apply to its path."""

    def __init__(self, docs_url: str = DOCS_URL) -> None:
        from optax_lint.facts.project.files import ProjectFiles
        from optax_lint.run.budget import DEFAULT_FILE_TIMEOUT

        self.docs_url = docs_url
        self.config_error: Optional[str] = None
        # Project files (config modules) read for run contexts, kept while the server
        # runs: texts are keyed by mtime and size, so an edited file is read again.
        self.project_files = ProjectFiles(remember_probes=False)  # files come and go between requests
        self.file_timeout = DEFAULT_FILE_TIMEOUT  # seconds per MB of a document (run/budget.py)

    def _settings(self, path: Path):
        from optax_lint.core.config import (
            ConfigError,
            Settings,
            _default_rule_options,
            load_settings,
        )

        start = path.parent if path.parent.is_dir() else Path.cwd()
        try:
            self.config_error = None
            return load_settings(start=start)
        except ConfigError as exc:  # lint with the defaults and tell the user
            self.config_error = str(exc)
            catalogue = load_catalogue()
            default = sorted(code for code, spec in catalogue.items() if spec.default_enabled)
            return Settings(start, None, default, rule_options=_default_rule_options(catalogue), catalogue=catalogue)

    def _setup(self, uri: str, default_name: str):
        from optax_lint.run.discovery import is_excluded
        from optax_lint.run.options import RunOptions
        from optax_lint.run.per_file import declared_context

        path = Path(uris.to_fs_path(uri) or default_name)
        settings = self._settings(path)
        common = dict(
            context=declared_context(path, settings, RunOptions()), root=str(settings.root), project_files=self.project_files
        )
        patterns = [*(settings.exclude or []), *settings.extend_exclude]  # what the user excluded, as --force-exclude
        codes = set() if patterns and is_excluded(path, root=settings.root, patterns=patterns) else settings.codes_for_path(path)
        return path.name, codes, settings.rule_options, common

    def lint(self, uri: str, text: str, *, fix: bool = False) -> tuple[list[Finding], Optional[str]]:
        """(findings with their fix edits, fixed text when fix=True). An analysis that
        outlasts the file budget (run/budget.py) gives one OPX900 finding, not a frozen
        editor."""
        from optax_lint.run.budget import FileTimeout, file_budget, file_seconds, timed_out

        shown, codes, rule_options, common = self._setup(uri, "untitled.py")
        seconds = file_seconds(self.file_timeout, len(text))
        try:
            with file_budget(seconds):
                if fix:
                    fixed = engine.fix_text(text, shown, codes, rule_options, **common)
                    return fixed.findings, fixed.text
                run = engine.lint_text(text, shown, codes, rule_options, **common)
                engine.attach_edits(text, run)
                return run.findings, None
        except FileTimeout:
            return [timed_out(shown, seconds)], None

    def lint_notebook(self, uri: str, cells: list[tuple[int, str]]) -> list[Finding]:
        """Findings for a notebook's code cells, given as (cell number, text), each
        carrying its cell; fix edits that a notebook must refuse are dropped."""
        from optax_lint.notebook import cell_findings

        shown, codes, rule_options, common = self._setup(uri, "untitled.ipynb")
        return cell_findings(cells, shown, codes, rule_options, common)

    def fix_notebook(self, uri: str, cells: list[tuple[int, str]]) -> dict[int, str]:
        """{cell number: fixed text} for the cells the safe fixes change."""
        from optax_lint.notebook import fix_cells

        shown, codes, rule_options, common = self._setup(uri, "untitled.ipynb")
        return fix_cells(cells, shown, codes, rule_options, common)

    def diagnostic(self, finding: Finding, lines: _Lines, where) -> lsp.Diagnostic:
        """`where(cell)` gives (uri, lines) of the document a related span is in."""
        help_line = f"\nhelp: {finding.fix.title}" if finding.fix is not None and finding.fix.title else ""
        return lsp.Diagnostic(
            range=lines.range(finding.span),
            severity=_SEVERITY[finding.severity],
            code=finding.code,
            code_description=lsp.CodeDescription(href=rule_url(finding.code, self.docs_url)),
            source=SOURCE,
            message=finding.message + help_line,
            related_information=[
                lsp.DiagnosticRelatedInformation(location=lsp.Location(uri=uri, range=doc.range(r.span)), message=r.message)
                for r in finding.related for uri, doc in [where(r.cell)]
            ] or None,
        )


def _whole(lines: _Lines) -> lsp.Range:
    return lsp.Range(start=lsp.Position(line=0, character=0), end=lines.position(len(lines.lines), len(lines.lines[-1]) + 1))


def _is_python(uri: str, language_id: Optional[str]) -> bool:
    if uri.lower().endswith(".ipynb"):
        return False
    return not language_id or "python" in language_id.lower()


def _overlaps(a: lsp.Range, b: lsp.Range) -> bool:
    def key(p: lsp.Position) -> tuple[int, int]:
        return (p.line, p.character)

    return key(a.start) <= key(b.end) and key(b.start) <= key(a.end)


def quick_fix(finding: Finding, uri: str, lines: _Lines, diagnostic: lsp.Diagnostic) -> Optional[lsp.CodeAction]:
    """The finding's fix as a code action; None for display-only advice."""
    fix = finding.fix
    if fix is None or not fix.apply or not fix.edits or fix.applicability is Applicability.DISPLAY_ONLY:
        return None
    safe = fix.applicability is Applicability.SAFE
    edits = [lsp.TextEdit(range=lines.range(e.span), new_text=e.content) for e in fix.edits]
    return lsp.CodeAction(
        title=f"{fix.title} ({'safe' if safe else 'unsafe'} fix, {finding.code})",
        kind=lsp.CodeActionKind.QuickFix,
        diagnostics=[diagnostic],
        edit=lsp.WorkspaceEdit(changes={uri: edits}),
        is_preferred=safe,
    )


def hover_text(code: str) -> str:
    spec = load_catalogue()[code]
    return spec.render_doc()


def build_server() -> LanguageServer:
    server = LanguageServer(
        "optax-lint", __version__,
        notebook_document_sync=lsp.NotebookDocumentSyncOptions(
            notebook_selector=[lsp.NotebookDocumentFilterWithCells(cells=[lsp.NotebookCellLanguage(language="python")])],
        ),
    )
    linter = DocumentLinter()
    shown_errors: set[str] = set()

    def lines_of(text: str) -> _Lines:
        return _Lines(text, server.workspace.position_encoding or "utf-16")

    def code_cells(notebook: lsp.NotebookDocument) -> tuple[dict[int, str], list[tuple[int, str]]]:
        """({cell number: cell uri}, [(cell number, text)]) for the code cells; every cell counts."""
        uri_of: dict[int, str] = {}
        cells: list[tuple[int, str]] = []
        for number, cell in enumerate(notebook.cells, 1):
            if cell.kind == lsp.NotebookCellKind.Code:
                uri_of[number] = cell.document
                cells.append((number, server.workspace.get_text_document(cell.document).source))
        return uri_of, cells

    def notebook_results(notebook: lsp.NotebookDocument) -> dict[str, tuple[str, list[Finding]]]:
        """cell uri -> (cell text, its findings). Cells are numbered as in the file: all of them count."""
        uri_of, cells = code_cells(notebook)
        out = {uri_of[n]: (text, []) for n, text in cells}
        for finding in linter.lint_notebook(notebook.uri, cells):
            if finding.cell in uri_of:
                out[uri_of[finding.cell]][1].append(finding)
        return out

    def results(uri: str) -> tuple[str, list[Finding], Optional[lsp.NotebookDocument]]:
        """(document text, its findings in its own coordinates, its notebook if a cell)."""
        notebook = server.workspace.get_notebook_document(cell_uri=uri)
        if notebook is not None:
            text, findings = notebook_results(notebook).get(uri, ("", []))
            return text, findings, notebook
        document = server.workspace.get_text_document(uri)
        if not _is_python(uri, document.language_id):  # e.g. an .ipynb opened as JSON text
            return document.source, [], None
        return document.source, linter.lint(uri, document.source)[0], None

    def locator(uri: str, notebook: Optional[lsp.NotebookDocument]):
        """cell number (None outside a notebook) -> (uri, lines) of the document it names."""
        by_number = {n: c.document for n, c in enumerate(notebook.cells, 1)} if notebook is not None else {}

        def where(cell: Optional[int]) -> tuple[str, _Lines]:
            target = by_number.get(cell, uri)
            return target, lines_of(server.workspace.get_text_document(target).source)

        return where

    def send(ls: LanguageServer, uri: str, text: str, findings: list[Finding], notebook=None) -> None:
        lines, where = lines_of(text), locator(uri, notebook)
        diagnostics = [linter.diagnostic(f, lines, where) for f in findings]
        version = ls.workspace.get_text_document(uri).version
        ls.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=uri, version=version, diagnostics=diagnostics))
        if linter.config_error and linter.config_error not in shown_errors:  # once, not on every keystroke
            shown_errors.add(linter.config_error)
            ls.window_show_message(lsp.ShowMessageParams(type=lsp.MessageType.Warning, message=f"optax-lint: {linter.config_error}"))

    def publish(ls: LanguageServer, uri: str) -> None:
        notebook = ls.workspace.get_notebook_document(cell_uri=uri)
        if notebook is not None:
            publish_notebook(ls, notebook.uri)
            return
        text, findings, _ = results(uri)
        send(ls, uri, text, findings)

    def publish_notebook(ls: LanguageServer, notebook_uri: str) -> None:
        notebook = ls.workspace.get_notebook_document(notebook_uri=notebook_uri)
        if notebook is None:
            return
        for cell_uri, (text, findings) in notebook_results(notebook).items():
            send(ls, cell_uri, text, findings, notebook)

    @server.feature(lsp.INITIALIZE)
    def initialize(ls: LanguageServer, params: lsp.InitializeParams) -> None:
        options = params.initialization_options
        if isinstance(options, dict) and isinstance(options.get("docsUrl"), str):
            linter.docs_url = options["docsUrl"]

    for method in (lsp.TEXT_DOCUMENT_DID_OPEN, lsp.TEXT_DOCUMENT_DID_CHANGE, lsp.TEXT_DOCUMENT_DID_SAVE):
        server.feature(method)(lambda ls, params: publish(ls, params.text_document.uri))
    for method in (lsp.NOTEBOOK_DOCUMENT_DID_OPEN, lsp.NOTEBOOK_DOCUMENT_DID_CHANGE, lsp.NOTEBOOK_DOCUMENT_DID_SAVE):
        server.feature(method)(lambda ls, params: publish_notebook(ls, params.notebook_document.uri))

    @server.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: LanguageServer, params: lsp.DidCloseTextDocumentParams) -> None:
        ls.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=params.text_document.uri, diagnostics=[]))

    @server.feature(
        lsp.TEXT_DOCUMENT_CODE_ACTION,
        lsp.CodeActionOptions(code_action_kinds=[lsp.CodeActionKind.QuickFix, FIX_ALL], resolve_provider=False),
    )
    def code_action(ls: LanguageServer, params: lsp.CodeActionParams) -> list[lsp.CodeAction]:
        uri = params.text_document.uri
        text, findings, notebook = results(uri)
        lines = lines_of(text)
        actions = []
        wanted = params.context.only
        if wanted is None or lsp.CodeActionKind.QuickFix in wanted:
            for finding in findings:
                diagnostic = linter.diagnostic(finding, lines, locator(uri, notebook))
                if _overlaps(diagnostic.range, params.range):
                    action = quick_fix(finding, uri, lines, diagnostic)
                    if action is not None:
                        actions.append(action)
        fix_all = (wanted is None and actions) or (wanted and any(k in (FIX_ALL, lsp.CodeActionKind.SourceFixAll, lsp.CodeActionKind.Source) for k in wanted))
        if fix_all:
            if notebook is None:
                _, fixed = linter.lint(uri, text, fix=True)
                new_texts = {uri: (text, fixed)} if fixed is not None and fixed != text else {}
            else:  # the whole notebook: each changed cell replaced
                uri_of, cells = code_cells(notebook)
                old_text = dict(cells)
                new_texts = {uri_of[n]: (old_text[n], new) for n, new in linter.fix_notebook(notebook.uri, cells).items()}
            if new_texts:
                actions.append(lsp.CodeAction(
                    title="Apply all safe optax-lint fixes",
                    kind=FIX_ALL,
                    edit=lsp.WorkspaceEdit(changes={u: [lsp.TextEdit(range=_whole(lines_of(old)), new_text=new)] for u, (old, new) in new_texts.items()}),
                ))
        return actions

    @server.feature(lsp.TEXT_DOCUMENT_HOVER)
    def hover(ls: LanguageServer, params: lsp.HoverParams) -> Optional[lsp.Hover]:
        text, findings, _ = results(params.text_document.uri)
        lines = lines_of(text)
        here = lsp.Range(start=params.position, end=params.position)
        hits = [f for f in findings if _overlaps(lines.range(f.span), here)]
        if not hits:
            return None
        docs = [f"**{f.code}** {f.message}\n\n{hover_text(f.code)}" for f in hits]
        return lsp.Hover(contents=lsp.MarkupContent(kind=lsp.MarkupKind.Markdown, value="\n\n---\n\n".join(docs)), range=lines.range(hits[0].span))

    return server


def run() -> None:
    """Serve over stdio until the client says exit."""
    build_server().start_io()
