"""Run several fixture scripts in this one interpreter (a batch of tests/test_fixture_runs.py).

    python tests/fixture_driver.py SECONDS FILE [FILE ...]

Each file runs as `__main__` (runpy) in a fresh module namespace, under its own alarm;
jax work is waited for before the next file starts. One JSON line per file on stdout:
{"path", "outcome": "ok" | "raises <ExceptionName>" | "timeout", "detail", "seconds"}. Sharing the
interpreter saves the ~2 s jax import per fixture; fixtures must not rely on global
state another one could leave behind (they take their values as literals).
"""

from __future__ import annotations

import contextlib
import io
import json
import runpy
import signal
import sys
import time
import traceback


class FixtureTimeout(BaseException):
    """Raised by the alarm: a BaseException so a fixture's `except Exception` cannot eat it."""


def _alarm(signum, frame):
    raise FixtureTimeout()


def run_one(path: str, seconds: int) -> dict:
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(seconds)
    outcome, detail = "ok", ""
    out = io.StringIO()
    sys.argv = [path]  # fixtures with an argparse main run on their defaults
    start = time.perf_counter()
    try:
        with contextlib.redirect_stdout(out):
            runpy.run_path(path, run_name="__main__")
            if "jax" in sys.modules:
                sys.modules["jax"].effects_barrier()  # block on anything still in flight
    except SystemExit as exc:
        if exc.code not in (None, 0):
            outcome, detail = "raises SystemExit", str(exc.code)
    except FixtureTimeout:
        outcome, detail = "timeout", f"over {seconds}s"
    except BaseException as exc:  # noqa: BLE001 - every failure is the fixture's outcome
        outcome = f"raises {type(exc).__name__}"
        detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()[-500:]
    finally:
        signal.alarm(0)
    return {"path": path, "outcome": outcome, "detail": detail,
            "seconds": round(time.perf_counter() - start, 2)}


def main(argv: list[str]) -> int:
    seconds = int(argv[0])
    for path in argv[1:]:
        print(json.dumps(run_one(path, seconds)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
