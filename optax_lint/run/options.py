"""What a run is asked to do: fix or not, jobs, the cache, --verify's worker, ..."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from optax_lint.run.budget import DEFAULT_FILE_TIMEOUT


@dataclass
class RunOptions:
    fix: bool = False
    unsafe_fixes: bool = False
    diff: bool = False  # compute fixes, write nothing, return a unified diff
    show_traceback: bool = False
    max_file_bytes: int = 8 * 1024 * 1024
    jobs: int = 1
    with_edits: bool = False  # compute fixes' text edits (JSON output)
    context: Optional[dict] = None  # run context declared on the command line: {field: value}
    write: bool = True  # False: --fix returns the fixed text instead of writing it (stdin)
    verify_worker: object = None  # a verify.runner.Worker: --verify (and gate fixes with --fix)
    cache_dir: Optional[Path] = None  # result cache folder (None: no cache); see cache.py
    progress: Optional[Callable[[int], None]] = None  # called with the number of files just finished
    file_timeout: float = DEFAULT_FILE_TIMEOUT  # seconds per file, then OPX900 (budget.py); 0: none
