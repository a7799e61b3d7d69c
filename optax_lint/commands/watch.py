"""`optax-lint --watch`: lint, then lint again what changed, until interrupted.

File events come from watchfiles (the operating system's notifications; the optional
`optax-lint[watch]` extra), imported only here. After each batch of changes the paths
are discovered again (new files, deleted ones), only the files that changed or
appeared are linted again, and the whole report is printed anew, as ruff's --watch
prints it. A changed pyproject.toml or optax-lint.toml reloads the settings and lints
everything again (the result cache answers for the files that did not change).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable

import click

from optax_lint.commands.common import fail

if TYPE_CHECKING:
    from optax_lint.commands.check_run import CheckRun
    from optax_lint.core.config import Settings
    from optax_lint.core.diagnostics import FileResult
    from optax_lint.run.api import Outcome

LINTED_SUFFIXES = (".py", ".pyi", ".ipynb")
SETTINGS_FILES = ("pyproject.toml", "optax-lint.toml")  # core.config's STANDALONE_NAME and PYPROJECT_NAME
# How long one wait for events lasts: the first wait returns after it, so the watcher is
# in place before the first report says it is watching; later ones just loop.
WAIT_MS = 200


def check_available() -> None:
    try:
        import watchfiles  # noqa: F401
    except ImportError:
        fail("--watch needs the watchfiles package; install it with `pip install watchfiles` (or the optax-lint[watch] extra)")


def watch_loop(run: CheckRun, load: Callable[[], Settings]) -> int:
    """Report, then report again after each change; 0 when interrupted (Ctrl-C)."""
    import watchfiles

    from optax_lint.core.config import ConfigError
    from optax_lint.facts.context.run_context import ContextError

    class Relevant(watchfiles.DefaultFilter):
        """Python files, notebooks and the settings files; not the cache nor temp files."""

        ignore_dirs = (*watchfiles.DefaultFilter.ignore_dirs, ".optax_lint_cache")

        def __call__(self, change, path: str) -> bool:
            name = os.path.basename(path)
            return super().__call__(change, path) and (name.endswith(LINTED_SUFFIXES) or name in SETTINGS_FILES or name == ".gitignore")

    _say("Starting linter in watch mode...")
    events = watchfiles.watch(*_roots(run.paths), watch_filter=Relevant(), rust_timeout=WAIT_MS, yield_on_timeout=True)
    try:
        next(events)  # the watcher is in place from here on: no change after the first lint is missed
        results = _Results(run)
        results.lint_all()
        _report(run, results)
        for changes in events:
            changed = {os.path.abspath(path) for _, path in changes}
            if not changed:
                continue
            if any(os.path.basename(path) in SETTINGS_FILES for path in changed):
                try:
                    run.settings = load()
                except (ConfigError, ContextError) as exc:
                    click.echo(f"optax-lint: error: {exc}", err=True)  # keep watching with the last good settings
                    continue
                click.clear()
                _say("Settings changed: linting everything again...")
                results.lint_all()
            elif results.lint_changed(changed):
                click.clear()
                _say(f"File change detected: {', '.join(sorted(os.path.relpath(p) for p in changed))}")
            else:
                continue  # a file outside what is linted (excluded, or not under PATHS)
            _report(run, results)
    except KeyboardInterrupt:
        pass
    finally:
        events.close()
    return 0


def _roots(paths: tuple[str, ...]) -> list[str]:
    """The folders to watch: each directory named, and the folder of each file named (a
    file replaced by an editor's atomic save is a new file: its folder sees it)."""
    roots = set()
    for path in paths or (".",):
        folder = path if os.path.isdir(path) else os.path.dirname(os.path.abspath(path))
        if os.path.isdir(folder):
            roots.add(os.path.abspath(folder))
    # A folder inside another one is watched through it.
    return sorted(r for r in roots if not any(r != o and r.startswith(o.rstrip(os.sep) + os.sep) for o in roots)) or [os.getcwd()]


def _say(message: str) -> None:
    click.echo(f"[{time.strftime('%H:%M:%S')}] {message}")


def _report(run: CheckRun, results: _Results) -> None:
    code = run.report(results.outcome(), results.problems, results.missing)
    failing = "findings fail the run" if code == 1 else "usage or internal error" if code == 2 else "nothing fails the run"
    _say(f"Checked {len(results.by_path)} file{'s' if len(results.by_path) != 1 else ''} ({failing}). Watching for file changes.")
    results.reported()


class _Results:
    """The latest result of each linted file, keyed by its absolute path."""

    def __init__(self, run: CheckRun) -> None:
        self.run = run
        self.by_path: dict[str, tuple[FileResult, dict[str, str]]] = {}
        self.problems: list = []
        self.missing: set[str] = set()
        self.internal_errors = 0
        self.fixed = 0

    def lint_all(self) -> None:
        found = self._discover()
        self.by_path.clear()
        self._lint(found)

    def lint_changed(self, changed: set[str]) -> bool:
        """Lint the files that changed or appeared, forget the deleted ones; False when
        nothing that is linted was touched."""
        known = set(self.by_path)
        found = self._discover()
        present = {os.path.abspath(f) for f in found}
        gone = known - present
        todo = [f for f in found if os.path.abspath(f) in changed or os.path.abspath(f) not in known]
        for path in gone:
            del self.by_path[path]
        self._lint(todo)
        return bool(todo or gone)

    def _discover(self) -> list[Path]:
        found, self.missing = self.run.discover()
        self.problems = found.problems
        return found.files

    def _lint(self, files: list[Path]) -> None:
        from optax_lint.run.api import display_path

        outcome = self.run.lint(files)
        shown = {result.path: result for result in outcome.results}
        for path in files:
            result = shown[display_path(path)]
            texts = {k: v for k, v in outcome.sources.items() if k == result.path or k.startswith(f"{result.path}:cell ")}
            self.by_path[os.path.abspath(path)] = (result, texts)
        self.internal_errors, self.fixed = outcome.internal_errors, outcome.fixed

    def outcome(self) -> Outcome:
        from optax_lint.run.api import Outcome

        merged = Outcome(internal_errors=self.internal_errors, fixed=self.fixed)
        for result, texts in sorted(self.by_path.values(), key=lambda item: item[0].path):
            merged.results.append(result)
            merged.sources.update(texts)
            merged.verification.extend(result.verification)
        return merged

    def reported(self) -> None:
        """What this batch fixed has been listed: the next report lists only its own."""
        for result, _ in self.by_path.values():
            result.applied_fixes = []
        self.fixed = 0
