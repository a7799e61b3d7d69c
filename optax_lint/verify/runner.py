"""The parent side of verification: one long-lived worker process per run.

The worker pays for `import jax` once (about 2 s); each chain then costs about half a
second, less with JAX's persistent compilation cache, which lives under the
optax-lint cache directory. Every request has a wall-clock timeout and the worker a
memory cap: a pathological chain kills the worker, not CI, and becomes a report.
"""

from __future__ import annotations

import importlib.util
import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

from optax_lint.core.catalogue import load_table
from optax_lint.core.install import install_hint

DEFAULT_TIMEOUT = 60.0  # seconds per request (the first one includes jax's import)
MEMORY_CAP = 6 * 1024**3  # bytes of data segment for the worker


class VerifyUnavailable(Exception):
    pass


def cache_dir() -> Path:
    base = os.environ.get("OPTAX_LINT_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "optax-lint"
    )
    path = Path(base) / "jax-compilation-cache"
    path.mkdir(parents=True, exist_ok=True)
    return path


def check_available(feature: str = "--verify") -> None:
    """Raise, naming the feature and what to install, when jax or optax is missing."""
    missing = [name for name in ("jax", "optax") if not module_available(name)]
    if missing:
        raise VerifyUnavailable(
            f"{feature} needs {' and '.join(missing)}, which optax-lint does not install by default; "
            f"install the verify extra {install_hint('verify')}"
        )


def module_available(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # a broken or half-removed installation
        return False


def _limit_memory() -> None:  # runs in the child before exec
    try:
        import resource

        resource.setrlimit(resource.RLIMIT_DATA, (MEMORY_CAP, MEMORY_CAP))
    except (ImportError, ValueError, OSError):
        pass


class Worker:
    def __init__(self, timeout: float = DEFAULT_TIMEOUT) -> None:
        check_available()
        self.timeout = timeout
        self.proc: Optional[subprocess.Popen] = None
        self._next_id = 0
        self.started_at = 0.0

    def _start(self) -> None:
        env = dict(os.environ)
        env["OPTAX_LINT_JAX_CACHE"] = str(cache_dir())
        env.setdefault("JAX_PLATFORMS", "cpu")
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        self.started_at = time.perf_counter()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "optax_lint.verify.worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=env,
            preexec_fn=_limit_memory if os.name == "posix" else None,
        )
        self.proc.stdin.write(json.dumps(load_table("optax_api")) + "\n")
        self.proc.stdin.flush()
        ready = self._read(self.timeout)
        if not ready or not ready.get("ready"):
            self.close()
            raise VerifyUnavailable("the verification worker did not start (is jax importable?)")

    def _read(self, timeout: float) -> Optional[dict]:
        assert self.proc is not None and self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            ready, _, _ = select.select([self.proc.stdout], [], [], remaining)
            if ready:
                line = self.proc.stdout.readline()
                if not line:
                    return None  # the worker died (crash or memory cap)
                return json.loads(line)

    def request(self, payload: dict, timeout: Optional[float] = None) -> dict:
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        self._next_id += 1
        payload = {**payload, "id": self._next_id}
        try:
            self.proc.stdin.write(json.dumps(payload) + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            self.close()
            return {"error": "the verification worker died"}
        response = self._read(timeout or self.timeout)
        if response is None:
            crashed = self.proc.poll() is not None
            self.close()
            if crashed:
                return {"error": "the verification worker crashed (out of memory or a fatal error in jax)"}
            return {"error": f"timed out after {timeout or self.timeout:g} s"}
        return response

    def close(self) -> None:
        if self.proc is not None:
            try:
                self.proc.kill()
                self.proc.wait(timeout=5)
            except Exception:
                pass
            self.proc = None

    def __enter__(self) -> "Worker":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
