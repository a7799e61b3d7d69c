"""The in-process API: lint (and fix) files on disk.

`lint_paths(["train.py"])` is what the CLI, the benchmark and the tests call. Each
file is read safely (source.py), linted or fixed (engine.py), and written back
atomically only when its fixes re-parse and the file did not change meanwhile.
"""

from __future__ import annotations

import contextlib
import gc
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Optional, Sequence

from optax_lint.core.config import Settings, load_settings
from optax_lint.core.diagnostics import FileResult, Finding
from optax_lint.core.meta import IO_ERROR, SYNTAX_ERROR, meta_finding
from optax_lint.core.source import (
    NOTEBOOK_SIZE_FACTOR,
    SourceError,
    SourceFile,
    encode_text,
    read_source,
    write_source,
)
from optax_lint.engine import prefilter
from optax_lint.engine.large import LARGE_FILE_BYTES
from optax_lint.engine.skipped import lint_skipped
from optax_lint.run.budget import FileTimeout, file_budget, file_seconds, timed_out, uninterrupted
from optax_lint.run.cache import FixMarker as _Marker
from optax_lint.run.options import RunOptions
from optax_lint.run.per_file import (
    declared_context,
    fixed_findings,
    read_failure,
    verify_gate,
)


@dataclass
class Outcome:
    results: list[FileResult] = field(default_factory=list)
    sources: dict[str, str] = field(default_factory=dict)  # path -> final text, for code frames
    internal_errors: int = 0
    fixed: int = 0
    verification: list = field(default_factory=list)  # verify.pipeline_report.PipelineReport, with --verify

    @property
    def findings(self) -> list[Finding]:
        return sorted((f for r in self.results for f in r.findings), key=lambda f: f.sort_key)


def display_path(path: Path) -> str:
    text = str(path)
    return text[2:] if text.startswith("./") else text


def lint_file(
    path: Path,
    settings: Settings,
    options: RunOptions,
    source: Optional[SourceFile] = None,
    read: Optional[Callable[[Path], SourceFile]] = None,
    project_files=None,
) -> tuple[FileResult, Optional[str], int]:
    """(result, text for code frames, internal error count) for one file. `source`: the
    file already read by the caller (the cache's check); `read` replaces reading it
    from disk (stdin); `project_files`: the run's ProjectFiles (facts/project/files.py).
    A file that outlasts options.file_timeout is reported as OPX900 (run/budget.py);
    with --verify the worker's own timeouts bound the slow part, and no budget is set."""
    seconds = file_seconds(options.file_timeout, _size(path, source)) if options.verify_worker is None else 0
    try:
        with file_budget(seconds):
            return _lint_file(path, settings, options, source, read, project_files)
    except FileTimeout:
        result = FileResult(display_path(path))
        result.findings = [timed_out(result.path, seconds)]
        return result, None, 1


def _size(path: Path, source: Optional[SourceFile]) -> int:
    if source is not None:
        return len(source.text)
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def _lint_file(path, settings, options, source, read, project_files) -> tuple[FileResult, Optional[str], int]:
    shown = display_path(path)
    codes = settings.codes_for_path(path)
    result = FileResult(shown)
    if path.suffix.lower() == ".ipynb":
        from optax_lint.run.notebook_file import lint_notebook_file

        return lint_notebook_file(path, shown, codes, settings, options, read=read, project_files=project_files)
    try:
        if source is None:
            source = read(path) if read else read_source(path, max_bytes=options.max_file_bytes)
    except SourceError as exc:
        return read_failure(result, exc, codes), None, 0
    if options.verify_worker is None and not prefilter.active_codes(source.text, codes):
        # No selected family can fire: a syntax check, without libcst, the facts or a rule.
        result.findings = lint_skipped(source.text, shown, codes)
        return result, source.text, 0
    from optax_lint.engine import (
        lint as engine,  # libcst (~0.25 s): a run the cache answers never needs it
    )

    options_by_code = settings.rule_options
    declared = declared_context(path, settings, options)
    root = str(settings.root)
    if not (options.fix or options.diff):
        run = engine.lint_text(
            source.text, shown, codes, options_by_code, show_traceback=options.show_traceback, context=declared, root=root,
            project_files=project_files, large_file_bytes=None if options.with_edits else LARGE_FILE_BYTES,
            release=not options.with_edits,  # no fix will be computed: free the tree at once
        )
        if options.with_edits:
            engine.attach_edits(source.text, run)
        result.findings = run.findings
        if options.verify_worker is not None and run.module is not None:
            from optax_lint.verify.report import verify_text

            result.verification = verify_text(source.text, shown, options.verify_worker, context=declared, root=root)
        return result, source.text, run.internal_errors
    fixed = engine.fix_text(
        source.text, shown, codes, options_by_code, unsafe=options.unsafe_fixes, show_traceback=options.show_traceback,
        context=declared, root=root,
        gate=verify_gate(options, shown), project_files=project_files,
    )
    result.findings = fixed_findings(fixed, shown)
    text = source.text
    if fixed.text != source.text:
        result.fixed = fixed.applied
        if options.diff:
            import difflib  # --diff only

            result.diff = "".join(
                difflib.unified_diff(
                    source.text.splitlines(keepends=True), fixed.text.splitlines(keepends=True),
                    fromfile=f"a/{shown}", tofile=f"b/{shown}",
                )
            )
        else:
            try:
                if options.write:
                    with uninterrupted():
                        write_source(source, fixed.text)
                else:
                    encode_text(source, fixed.text)  # the caller outputs it: it must encode
                text = fixed.text
                result.applied_fixes = fixed.fixed
            except SourceError as exc:
                result.fixed = 0
                result.findings = engine.lint_text(
                    source.text, shown, codes, options_by_code, context=declared, root=root, project_files=project_files
                ).findings
                result.findings.append(meta_finding(IO_ERROR, shown, f"not fixed: {exc}"))
    if options.verify_worker is not None and not any(f.code in (IO_ERROR, SYNTAX_ERROR) for f in result.findings):
        from optax_lint.verify.report import verify_text

        # The evidence is of the fixed chains: what --fix writes, or what --diff proposes.
        result.verification = verify_text(fixed.text, shown, options.verify_worker, context=declared, root=root)
    return result, text, fixed.internal_errors + len(fixed.dropped)


def _lint_recorded(path: Path, settings: Settings, options: RunOptions, files):
    if options.fix or options.diff:
        # Fix rounds parse the file again and again, each round's facts kept for its
        # fixes: the collector must be free to run between them.
        return _lint_one(path, settings, options, files)
    with _one_collection():
        return _lint_one(path, settings, options, files)


def _lint_one(path: Path, settings: Settings, options: RunOptions, files):
    """lint_file, plus what the cache needs to store the result: the stat and digest of
    the text that was linted, and what else the lint read (core/readlog.py, recorded by
    the run's ProjectFiles `files`). The record is None when the result must not be
    cached: a fix was applied (or diffed), a read or internal error, --verify evidence."""
    if options.cache_dir is None:
        return (*lint_file(path, settings, options, project_files=files), None)
    notebook = path.suffix.lower() == ".ipynb"
    try:
        st = os.stat(path)
        checked = time.time_ns()
        source = read_source(path, max_bytes=options.max_file_bytes * (NOTEBOOK_SIZE_FACTOR if notebook else 1))
    except (OSError, SourceError):
        return (*lint_file(path, settings, options, project_files=files), None)
    with files.recording() as log:
        if notebook:  # the very bytes the cache records, not a second read
            result, text, internal = lint_file(path, settings, options, read=lambda _: source, project_files=files)
        else:
            result, text, internal = lint_file(path, settings, options, source, project_files=files)
    if internal or result.error or result.fixed or result.diff or result.verification:
        return result, text, internal, None
    return result, text, internal, (st, source.digest, checked, log)


# A worker process of the pool keeps the project files it reads for the rest of the run
# (set up by the pool's initializer), as the in-process run does.
_worker_files = None


def _start_worker() -> None:
    global _worker_files
    from optax_lint.facts.project.files import ProjectFiles

    _worker_files = ProjectFiles()


def _worker(args):
    path, settings, options = args
    result, text, internal, record = _lint_recorded(path, settings, options, _worker_files)
    for finding in [*result.findings, *result.applied_fixes]:
        finding.node = None  # libcst nodes and fix closures do not cross processes
        if finding.fix is not None:
            finding.fix.apply = _Marker(bool(finding.fix.apply))
    # Text only serves code frames of findings: do not ship the others back.
    return result, text if result.findings else None, internal, record


# A process pool pays ~0.1 s to start and each worker re-imports or forks; below this
# much source, linting in-process is faster (a pre-commit run touches a handful of files).
POOL_MIN_FILES = 8
POOL_MIN_BYTES = 256 * 1024


def _use_pool(jobs: int, paths: list[Path]) -> bool:
    if jobs <= 1 or len(paths) < POOL_MIN_FILES:
        return False
    total = 0
    for path in paths:
        try:
            total += os.stat(path).st_size
        except OSError:
            continue
        if total >= POOL_MIN_BYTES:
            return True
    return False


def _open_cache(settings: Settings, options: RunOptions):
    if options.cache_dir is None or options.verify_worker is not None:
        return None
    from optax_lint.run.cache import ResultCache, settings_key

    return ResultCache(options.cache_dir, settings_key(settings, options))


def _cached(cache, path: Path, settings: Settings, options: RunOptions):
    """(result, text, 0) from the cache, or None. With --fix or --diff, only a file
    with nothing to fix is answered from the cache: the others are fixed for real."""
    from optax_lint.run.cache import file_key

    shown = display_path(path)
    fkey = file_key(shown, settings.codes_for_path(path), declared_context(path, settings, options))
    hit = cache.lookup(path, fkey)
    if hit is None:
        return None, fkey
    result, _ = hit
    if (options.fix or options.diff) and any(f.fixable(options.unsafe_fixes) for f in result.findings):
        return None, fkey
    text = None
    if result.findings:  # code frames need the text (a notebook's, its cells)
        notebook = path.suffix.lower() == ".ipynb"
        try:
            text = read_source(path, max_bytes=options.max_file_bytes * (NOTEBOOK_SIZE_FACTOR if notebook else 1)).text
        except SourceError:
            return None, fkey
        if notebook:
            from optax_lint.run.notebook_file import cached_cell_sources

            cells = cached_cell_sources(text, options.max_file_bytes)
            if cells is None:
                return None, fkey
            result.cell_sources = cells
    return (result, text, 0), fkey


# Python's cyclic GC runs a young collection every 700 allocations, and each file's
# parse allocates millions of nodes; every so often a full collection then walks the
# whole heap, which the run keeps large (the project modules read across files). Over
# the real corpus that was 37% of a lint's CPU time (12 s of gen-2 walks on 563 files).
# Collections every 50,000 allocations keep it at the young objects' cost; the cycles
# a file's facts form are still collected, later.
GC_THRESHOLDS = (50_000, 50, 100)


@contextlib.contextmanager
def _fewer_collections():
    before = gc.get_threshold()
    gc.set_threshold(*GC_THRESHOLDS)
    try:
        yield
    finally:
        gc.set_threshold(*before)


@contextlib.contextmanager
def _one_collection():
    """No cyclic collection while one file is linted, one young-generation collection
    after it. Collecting while a file's tree is alive traverses it again and again; its
    facts are released at the end (ModuleFacts.release) so reference counting frees
    the tree, and the collection after the file sweeps what little is left (measured
    on the real corpus: GC time 3.9 s -> 0.15 s of a cold lint, peak RSS of a 5 MB file
    unchanged). Not for fix runs (see _lint_recorded)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
            gc.collect(0)


def run(paths: Sequence[Path], settings: Settings, options: RunOptions) -> Outcome:
    with _fewer_collections():  # the pool's workers inherit it at fork
        return _run(paths, settings, options)


def _run(paths: Sequence[Path], settings: Settings, options: RunOptions) -> Outcome:
    outcome = Outcome()
    jobs = options.jobs if options.jobs > 0 else (os.cpu_count() or 1)
    cache = _open_cache(settings, options)
    if cache is None:
        options = _without_cache(options)
    paths = [Path(p) for p in paths]
    produced: list = [None] * len(paths)
    keys: dict[int, str] = {}
    todo: list[int] = []
    for i, path in enumerate(paths):
        if cache is not None:
            produced[i], keys[i] = _cached(cache, path, settings, options)
            if produced[i] is not None:
                if options.progress:
                    options.progress(1)
                continue
        todo.append(i)
    if todo:
        work = [paths[i] for i in todo]
        progress, options.progress = options.progress, None  # callbacks do not cross processes
        try:
            if _use_pool(jobs, work):
                fresh = _pooled(work, settings, options, jobs, progress)
            else:
                from optax_lint.facts.project.files import ProjectFiles

                files = ProjectFiles()  # project files read for run contexts, kept for the run
                fresh = []
                for path in work:
                    fresh.append(_lint_recorded(path, settings, options, files))
                    if progress:
                        progress(1)
        finally:
            options.progress = progress
        for i, (result, text, internal, record) in zip(todo, fresh):
            produced[i] = (result, text, internal)
            if cache is not None and record is not None:
                st, digest, checked, log = record
                cache.store(paths[i], keys[i], result.path, st, digest, checked, result.findings, log)
    if cache is not None:
        cache.save()
    for result, text, internal in sorted(produced, key=lambda item: item[0].path):
        outcome.results.append(result)
        if text is not None:
            outcome.sources[result.path] = text
        for number, cell_text in result.cell_sources.items():  # notebooks: code frames per cell
            outcome.sources[f"{result.path}:cell {number}"] = cell_text
        outcome.internal_errors += internal
        outcome.fixed += result.fixed
        outcome.verification.extend(getattr(result, "verification", []) or [])
    return outcome


def _without_cache(options: RunOptions) -> RunOptions:
    if options.cache_dir is None:
        return options
    from dataclasses import replace

    return replace(options, cache_dir=None)


def _pooled(work: list[Path], settings: Settings, options: RunOptions, jobs: int, progress) -> list:
    """Lint in worker processes; results in the order of `work`, whatever the worker count."""
    from concurrent.futures import ProcessPoolExecutor

    from optax_lint.core.optax_api import load_api
    from optax_lint.rules import registry

    # Imports and tables loaded before forking are inherited by the workers, not redone.
    load_api()
    for code in settings.enabled_codes():
        prefilter.active_codes("", {code})
    registry.load(settings.enabled_codes())

    items = [(path, settings, options) for path in work]
    # Small chunks keep both cores busy to the end; results arrive in order.
    chunksize = max(1, min(16, len(items) // (jobs * 8)))
    out = []
    with ProcessPoolExecutor(max_workers=jobs, initializer=_start_worker) as pool:
        for item in pool.map(_worker, items, chunksize=chunksize):
            out.append(item)
            if progress:
                progress(1)
    return out


def lint_paths(paths: Iterable[str], settings: Optional[Settings] = None, **options) -> list[FileResult]:
    """Lint files (no discovery, no writes unless fix=True) and return their results."""
    settings = settings or load_settings()
    return run([Path(p) for p in paths], settings, RunOptions(**options)).results

