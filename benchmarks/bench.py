#!/usr/bin/env python3
"""Benchmark optax-lint against the libcst parse floor, in one process.

    python benchmarks/bench.py [--files 240] [--repeat 5] [--corpus DIR] [--json]

Passes over the same file list, interleaved (the order rotates every repetition,
so drift and warm-up effects fall on every pass alike):
  floor  read + libcst.parse_module of every file
  lint   optax_lint.run.api.lint_paths(paths)
  ast    read + ast.parse, for scale
  cli    `python -m optax_lint --exit-zero --quiet CORPUS` in a subprocess, end to end
         (start-up, imports, discovery, its own worker processes, reporting); only in
         the first --cli-repeat repetitions
Then the cold import of optax_lint.cli, and whether jax/optax get imported on the
lint path (they must not).

The headline is lint/floor, taken pair by pair within each repetition (median of
the ratios), which holds on a noisy machine where absolute times drift.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Optional

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(ROOT), str(HERE)]  # the checkout's optax_lint, and make_corpus beside this file

TARGET_RATIO = 1.5
FORBIDDEN = ("jax", "optax")  # must never be imported on the lint path


# ---- the corpus -----------------------------------------------------------------------


def corpus_files(root: Path) -> tuple[list[str], int]:
    """Sorted .py paths under root, and their total line count."""
    paths = sorted(str(p) for p in root.rglob("*.py"))
    lines = sum(Path(p).read_bytes().count(b"\n") for p in paths)
    return paths, lines


def optax_share(root: Path) -> Optional[dict]:
    """What make_corpus recorded about the corpus (None for a corpus from elsewhere)."""
    try:
        m = json.loads((root / "MANIFEST.json").read_text())
    except (OSError, ValueError):
        return None
    return {"optax_files": m.get("n_optax_files"), "optax_lines": m.get("optax_lines"), "seed": m.get("seed")}


# ---- the in-process passes ------------------------------------------------------------


def floor_pass(paths: list[str]) -> None:
    import libcst

    for p in paths:
        with open(p, encoding="utf-8") as f:
            libcst.parse_module(f.read())


def ast_pass(paths: list[str]) -> None:
    import ast

    for p in paths:
        with open(p, encoding="utf-8") as f:
            ast.parse(f.read(), filename=p)


def load_api() -> Any:
    """Import the linter's in-process API, or exit with a message that says what is missing."""
    try:
        import optax_lint.run.api as api
    except Exception as e:  # ImportError, or the package failing part-way through its imports
        sys.exit(f"bench.py: cannot import optax_lint.run.api ({type(e).__name__}: {e}).\n"
                 f"The linter's in-process API (optax_lint/run/api.py with lint_paths(paths)) is needed for the lint "
                 f"pass. Run with --floor-only to measure the parse floor alone.")
    if not callable(getattr(api, "lint_paths", None)):
        sys.exit("bench.py: optax_lint.run.api has no lint_paths(paths: list[str]) -> list[FileResult]. "
                 "Run with --floor-only to measure the parse floor alone.")
    return api


def _findings_of(result: Any) -> list:
    for attr in ("findings", "diagnostics", "violations"):
        value = getattr(result, attr, None)
        if value is not None:
            return list(value)
    if isinstance(result, dict):
        return list(result.get("findings", []))
    return []


def summarize_results(results: list) -> dict:
    """Counts of findings, files with findings, per-code counts and files with errors."""
    by_code: dict[str, int] = {}
    files_with, errors = 0, 0
    for r in results:
        found = _findings_of(r)
        files_with += bool(found)
        errors += bool(getattr(r, "error", None) or getattr(r, "parse_error", None))
        for f in found:
            code = str(getattr(f, "code", None) or (f.get("code") if isinstance(f, dict) else "?"))
            by_code[code] = by_code.get(code, 0) + 1
    return {"findings": sum(by_code.values()), "files_with_findings": files_with, "files_with_errors": errors,
            "results": len(results), "by_code": dict(sorted(by_code.items(), key=lambda kv: (-kv[1], kv[0])))}


def measure(passes: dict[str, Callable[[], None]], repeat: int, before: dict[str, Callable[[], None]],
            limit: dict[str, int]) -> dict:
    """Run every pass `repeat` times (or `limit[name]`), interleaved; wall and CPU seconds per pass.

    Passes with a limit run in the first repetitions only, so their ratios to the floor
    still pair runs from the same repetition. They get no warm-up run.
    """
    names = list(passes)
    for name in names:  # untimed warm-up: page cache, lazy imports, first-call costs
        if name not in limit:
            before.get(name, lambda: None)()
            passes[name]()
    wall: dict[str, list[float]] = {n: [] for n in names}
    cpu: dict[str, list[float]] = {n: [] for n in names}
    for r in range(repeat):
        for name in names[r % len(names):] + names[: r % len(names)]:  # rotate the order
            if r >= limit.get(name, repeat):
                continue
            before.get(name, lambda: None)()
            gc.collect()
            c0, t0 = time.process_time(), time.perf_counter()
            passes[name]()
            wall[name].append(time.perf_counter() - t0)
            cpu[name].append(time.process_time() - c0)
    return {"wall": wall, "cpu": cpu}


# ---- subprocesses ---------------------------------------------------------------------


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    return env


def _run(cmd: list[str], cwd: Path) -> tuple[float, subprocess.CompletedProcess]:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=_env(), capture_output=True, text=True)
    return time.perf_counter() - t0, proc


def parse_importtime(stderr: str) -> dict[str, int]:
    """{module: cumulative microseconds} from `python -X importtime` output.

    Names keep their indentation: a name with no leading space was imported directly
    by the command; nested imports are indented under it.
    """
    out: dict[str, int] = {}
    for line in stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        parts = line[len("import time:"):].split("|")
        if len(parts) != 3 or not parts[1].strip().isdigit():
            continue  # the header line
        out[parts[2][1:].rstrip()] = int(parts[1])
    return out


def forbidden_in(modules: dict[str, int]) -> dict[str, bool]:
    names = [m.strip() for m in modules]
    return {top: any(m == top or m.startswith(top + ".") for m in names) for top in FORBIDDEN}


def cli_cmd(corpus: Path) -> list[str]:
    return [sys.executable, "-m", "optax_lint", "--exit-zero", "--quiet", str(corpus)]


def cli_pass(corpus: Path) -> tuple[Callable[[], None], dict]:
    """A timed pass running the CLI on the corpus; `info` collects exit status and child CPU."""
    info: dict[str, Any] = {"cmd": " ".join(cli_cmd(corpus)), "returncode": 0, "stderr_tail": "", "cpu": [],
                            "failed_runs": []}

    def run() -> None:
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        proc = subprocess.run(cli_cmd(corpus), cwd=corpus, env=_env(), stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True)
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)  # the CLI's CPU, its workers included
        info["cpu"].append(r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime)
        if proc.returncode != 0:  # its time means nothing; main() blanks it out
            info["returncode"], info["stderr_tail"] = proc.returncode, proc.stderr.strip()[-2000:]
            info["failed_runs"].append(len(info["cpu"]) - 1)

    return run, info


def cli_imports(corpus: Path) -> dict:
    """Which modules a real CLI lint run imports (one untimed run under -X importtime)."""
    _, traced = _run([sys.executable, "-X", "importtime", *cli_cmd(corpus)[1:]], corpus)
    mods = parse_importtime(traced.stderr)
    return {"imported": forbidden_in(mods), "modules_imported": len(mods)}


def measure_import(repeat: int = 3) -> dict:
    """Cold `import optax_lint.cli` in a fresh interpreter, against a bare interpreter start."""
    bare = [_run([sys.executable, "-c", "pass"], ROOT)[0] for _ in range(repeat)]
    walls, proc = [], None
    for _ in range(repeat):
        t, proc = _run([sys.executable, "-c", "import optax_lint.cli"], ROOT)
        walls.append(t)
        if proc.returncode != 0:
            return {"ok": False, "error": proc.stderr.strip()[-2000:]}
    _, traced = _run([sys.executable, "-X", "importtime", "-c", "import optax_lint.cli"], ROOT)
    mods = parse_importtime(traced.stderr)
    # Top-level entries (no indentation) are what `import optax_lint.cli` pulled in directly.
    top = sorted(((us, m) for m, us in mods.items() if not m.startswith(" ")), reverse=True)[:6]
    return {"ok": True, "wall_median": statistics.median(walls), "bare_interpreter_median": statistics.median(bare),
            "importtime_cli_s": mods.get("optax_lint.cli", 0) / 1e6, "imported": forbidden_in(mods),
            "slowest_top_level": [{"module": m.strip(), "s": us / 1e6} for us, m in top]}


# ---- report ---------------------------------------------------------------------------


def _ratios(ts: list[float], floor: list[float]) -> list[float]:
    """Per-repetition ratios; run i of a pass pairs with run i of the floor. NaN = failed run."""
    return [t / f for t, f in zip(ts, floor) if t == t]


def summarize(times: dict, lines: int) -> dict:
    wall, cpu = times["wall"], times["cpu"]
    out: dict[str, Any] = {}
    for name, ts in wall.items():
        ok = [t for t in ts if t == t]
        if not ok:
            continue
        med = statistics.median(ok)
        out[name] = {"median_s": med, "min_s": min(ok), "max_s": max(ok), "runs_s": ok,
                     "cpu_median_s": statistics.median(c for t, c in zip(ts, cpu[name]) if t == t),
                     "lines_per_s": lines / med}
        if "floor" in wall:
            ratios = _ratios(ts, wall["floor"])
            cpu_ratios = _ratios([c if t == t else float("nan") for t, c in zip(ts, cpu[name])], cpu["floor"])
            out[name].update(ratio_to_floor=statistics.median(ratios), ratios=ratios,
                             cpu_ratio_to_floor=statistics.median(cpu_ratios), cpu_ratios=cpu_ratios)
    return out


def print_table(report: dict) -> None:
    c = report["corpus"]
    share = c.get("optax") or {}
    extra = f"; {share['optax_files']} use optax ({share['optax_lines']:,} lines)" if share.get("optax_files") else ""
    print(f"corpus: {c['files']} files, {c['lines']:,} lines{extra}")
    print(f"{report['repeat']} repetitions, interleaved; medians (wall clock)\n")
    print(f"{'pass':<26}{'median s':>10}{'min s':>9}{'lines/s':>11}{'x floor':>9}{'cpu x':>7}")
    labels = {"floor": "floor  libcst.parse_module", "lint": "lint   api.lint_paths", "ast": "ast    ast.parse (scale)",
              "cli": "cli    end to end"}
    for name, row in report["passes"].items():
        note = f"   {len(row['runs_s'])} ok runs; start-up, imports, workers" if name == "cli" else ""
        print(f"{labels.get(name, name):<26}{row['median_s']:>10.3f}{row['min_s']:>9.3f}"
              f"{row['lines_per_s']:>11,.0f}{row.get('ratio_to_floor', float('nan')):>9.2f}"
              f"{row.get('cpu_ratio_to_floor', float('nan')):>7.2f}{note}")
    cli = report.get("cli")
    if "lint" in report["passes"]:
        ratio = report["passes"]["lint"]["ratio_to_floor"]
        verdict = "within" if ratio <= report["target_ratio"] else "OVER"
        cpu_ratio = report["passes"]["lint"]["cpu_ratio_to_floor"]
        print(f"\nlint / floor = {ratio:.2f} wall, {cpu_ratio:.2f} CPU (medians of per-repetition ratios): "
              f"{verdict} the {report['target_ratio']}x target")
    if report.get("findings"):
        f = report["findings"]
        codes = ", ".join(f"{k} {v}" for k, v in list(f["by_code"].items())[:8])
        print(f"findings: {f['findings']} in {f['files_with_findings']} files" + (f" ({codes})" if codes else "")
              + (f"; {f['files_with_errors']} files with errors" if f["files_with_errors"] else ""))
    if cli:
        if cli["returncode"]:
            print(f"CLI FAILED in {len(cli['failed_runs'])} run(s), left out of the timings "
                  f"(exit {cli['returncode']}): {cli['stderr_tail'][-400:]}")
        bad = [m for m, hit in cli["imported"].items() if hit]
        print(f"CLI lint run imported jax/optax: {'YES: ' + ', '.join(bad) if bad else 'no'}; "
              f"CLI CPU {statistics.median(cli['cpu']):.1f}s median (its workers included)")
    imp = report.get("import")
    if imp:
        if not imp["ok"]:
            print(f"cold import of optax_lint.cli FAILED: {imp['error'][-400:]}")
        else:
            bad = [m for m, hit in imp["imported"].items() if hit]
            slow = ", ".join(f"{d['module']} {d['s']:.2f}s" for d in imp["slowest_top_level"][:4])
            print(f"cold `import optax_lint.cli`: {imp['wall_median']:.2f}s wall "
                  f"(bare interpreter {imp['bare_interpreter_median']:.2f}s), {imp['importtime_cli_s']:.2f}s by "
                  f"-X importtime; jax/optax imported: {'YES: ' + ', '.join(bad) if bad else 'no'}")
            print(f"  slowest top-level imports: {slow}")
    if report.get("in_process_imported"):
        bad = [m for m, hit in report["in_process_imported"].items() if hit]
        if bad:
            print(f"WARNING: importing optax_lint.run.api pulled in {', '.join(bad)}")


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=240, help="corpus size when generating (default 240)")
    ap.add_argument("--seed", type=int, default=0, help="corpus seed when generating")
    ap.add_argument("--repeat", type=int, default=5, help="timed repetitions of each in-process pass")
    ap.add_argument("--cli-repeat", type=int, default=3, help="timed CLI runs (0 to skip the CLI)")
    ap.add_argument("--corpus", help="lint this directory instead of generating one")
    ap.add_argument("--floor-only", action="store_true", help="measure floor and ast only (no linter needed)")
    ap.add_argument("--json", action="store_true", help="print the report as JSON instead of a table")
    ap.add_argument("--output", help="also write the JSON report to this file")
    ap.add_argument("--check", action="store_true", help="exit 1 if lint/floor exceeds the target, or jax/optax get imported")
    ap.add_argument("--target", type=float, default=TARGET_RATIO, help="target lint/floor ratio (default 1.5)")
    args = ap.parse_args(argv)

    api = None
    before_api = set(sys.modules)
    if not args.floor_only:
        api = load_api()  # fail before spending time on the corpus
    in_process = {m: any(k == m or k.startswith(m + ".") for k in set(sys.modules) - before_api) for m in FORBIDDEN}

    with tempfile.TemporaryDirectory(prefix="optax-lint-bench-") as tmp:
        if args.corpus:
            corpus = Path(args.corpus).resolve()
        else:
            from make_corpus import generate

            corpus = Path(tmp) / "corpus"
            generate(corpus, args.files, args.seed)
        paths, lines = corpus_files(corpus)
        if not paths:
            sys.exit(f"bench.py: no .py files under {corpus}")
        if not args.json:
            print(f"measuring {len(paths)} files from {corpus} ...", file=sys.stderr)

        passes: dict[str, Callable[[], None]] = {"floor": lambda: floor_pass(paths)}
        before: dict[str, Callable[[], None]] = {}
        last: dict[str, list] = {}
        if api is not None:
            def lint() -> None:
                results = api.lint_paths(paths)
                last["results"] = summarize_results(results)  # keep the counts, drop the objects
            passes["lint"] = lint
            if hasattr(api, "clear_caches"):
                before["lint"] = api.clear_caches
        passes["ast"] = lambda: ast_pass(paths)
        limit: dict[str, int] = {}
        cli_info: Optional[dict] = None
        if api is not None and args.cli_repeat > 0:
            passes["cli"], cli_info = cli_pass(corpus)
            limit["cli"] = min(args.cli_repeat, args.repeat)

        times = measure(passes, args.repeat, before, limit)
        if cli_info is not None:
            times["cpu"]["cli"] = cli_info["cpu"]
            for i in cli_info["failed_runs"]:
                times["wall"]["cli"][i] = float("nan")
        report: dict[str, Any] = {
            "corpus": {"dir": str(corpus) if args.corpus else "(generated, temporary)", "files": len(paths),
                       "lines": lines, "optax": optax_share(corpus), "generated": not args.corpus,
                       "seed": None if args.corpus else args.seed},
            "repeat": args.repeat, "target_ratio": args.target, "python": sys.version.split()[0],
            "cpus": os.cpu_count(), "passes": summarize(times, lines),
        }
        if api is not None:
            report["findings"] = last.get("results")
            report["in_process_imported"] = in_process
            report["clear_caches"] = "clear_caches" in before
            if cli_info is not None:
                report["cli"] = {**cli_info, **cli_imports(corpus)}
            report["import"] = measure_import()

    if args.output:
        Path(args.output).write_text(json.dumps(report, indent=1) + "\n")
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        print_table(report)
    if args.check and api is not None:
        failed = report["passes"]["lint"]["ratio_to_floor"] > args.target
        failed |= any(report["cli"]["imported"].values()) if "cli" in report else False
        failed |= any(report["import"].get("imported", {}).values())
        return 1 if failed else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
