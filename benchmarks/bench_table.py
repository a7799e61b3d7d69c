#!/usr/bin/env python3
"""The performance table of issue 12, measured in one run on one corpus.

    python benchmarks/bench_table.py [--files 1200] [--optax-share 0.15] [--peer-sample 60]
                                     [--corpus DIR] [--no-peers] [--json OUT]

Rows (wall and CPU seconds, lines/s, and the ratio per line to row 2, the libcst parse):
  1  ast.parse of every file                      the physical floor
  2  libcst.parse_module of every file            the floor for a libcst tool
  2b libcst.parse_module of the optax-using files the floor for row 3b
  3  optax-lint cold, --jobs 1 (empty cache)       the whole corpus
  3b optax-lint cold, --jobs 1, optax-using files only
  4  optax-lint cold, all cores
  5  optax-lint warm, nothing changed
  6  optax-lint warm, one file touched
  7  Fixit 2 default rules / TorchFix default rules on a sample of optax-using files, in a
     separate venv this script creates (pip install fixit torchfix); TorchFix skips files
     that do not mention torch, so its copies get an `import torch` line first; the
     libcst parse of the same sample is measured alongside
  8  `optax-lint --version`, and a lint of one ~300-line file (no cache; and with the
     rule-table cache warm, as a pre-commit run after the first)
Also: peak RSS of the CLI process and of its largest worker, and which of
jax/optax/flax/orbax a one-file lint imports (none may be).

Every CLI row is a real `python -m optax_lint` subprocess with bytecode caching on, as an
installed tool runs. It is one run per row (median of --repeat runs): on a shared
machine, read the CPU column and the ratios rather than absolute wall times.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(ROOT), str(HERE)]

FORBIDDEN = ("jax", "optax", "flax", "orbax")
TARGETS = {"cold_optax_x_floor": 1.3, "whole_repo_speedup": 5.0, "warm_share": 0.05, "version_s": 0.15,
           "small_file_s": 0.5, "fixit_per_line": 10.0, "worker_mib": 300.0}

# Runs the CLI in-process and records its own and its workers' peak RSS.
_WRAPPER = r"""
import json, os, resource, runpy, sys
sys.argv = ["optax-lint", *sys.argv[1:]]
try:
    runpy.run_module("optax_lint", run_name="__main__")
except SystemExit:
    pass
finally:
    # VmHWM, not ru_maxrss: a child's ru_maxrss starts from its parent's size at fork
    # (here the benchmark process, holding the corpus), and survives exec.
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    try:
        with open("/proc/self/status") as status:
            peak = next(int(l.split()[1]) for l in status if l.startswith("VmHWM:"))
    except (OSError, StopIteration, ValueError):
        pass
    with open(os.environ["BENCH_RSS"], "w") as f:
        json.dump({"self_kib": peak,
                   "workers_kib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss,
                   "modules": sorted(sys.modules)}, f)
"""


def env() -> dict:
    e = dict(os.environ)
    e.pop("PYTHONDONTWRITEBYTECODE", None)  # an installed tool has its .pyc files
    e["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + ([e["PYTHONPATH"]] if e.get("PYTHONPATH") else []))
    e["OPTAX_LINT_NO_PROGRESS"] = "1"
    return e


def lines_of(paths: list[Path]) -> int:
    return sum(p.read_bytes().count(b"\n") for p in paths)


def timed(fn) -> tuple[float, float]:
    c0, t0 = time.process_time(), time.perf_counter()
    fn()
    return time.perf_counter() - t0, time.process_time() - c0


def run_cmd(cmd: list[str], cwd: Path, rss_file: Optional[Path] = None) -> dict:
    """Wall and CPU (children rusage) of one subprocess run."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    e = env()
    if rss_file is not None:
        e["BENCH_RSS"] = str(rss_file)
    proc = subprocess.run(cmd, cwd=cwd, env=e, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = {"wall": wall, "cpu": r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime, "rc": proc.returncode,
           "stderr": proc.stderr[-600:]}
    if rss_file is not None and rss_file.exists():
        out.update(json.loads(rss_file.read_text()))
    return out


def lint_cmd(args: list[str]) -> list[str]:
    return [sys.executable, "-c", _WRAPPER, "--exit-zero", "-q", *args]


def median_run(cmd, cwd, repeat, before=None, rss_file=None) -> dict:
    runs = []
    for _ in range(repeat):
        if before:
            before()
        runs.append(run_cmd(cmd, cwd, rss_file))
    best = sorted(runs, key=lambda r: r["wall"])[len(runs) // 2]
    return best


# ---- peers ----------------------------------------------------------------------------


def peers_venv(path: Path) -> tuple[Optional[Path], str]:
    """A venv with fixit and torchfix, made once; (bin folder or None, note)."""
    bin_dir = path / "bin"
    if (bin_dir / "fixit").exists() and (bin_dir / "torchfix").exists():
        return bin_dir, "reused"
    try:
        subprocess.run([sys.executable, "-m", "venv", str(path)], check=True, capture_output=True, timeout=300)
        proc = subprocess.run([str(bin_dir / "pip"), "install", "-q", "fixit", "torchfix"], capture_output=True,
                              text=True, timeout=900)
    except (subprocess.SubprocessError, OSError) as exc:
        return None, f"could not create the peers venv: {exc}"
    if proc.returncode != 0 or not (bin_dir / "fixit").exists():
        return None, f"pip install fixit torchfix failed: {proc.stderr.strip()[-300:]}"
    return bin_dir, "created"


def peer_version(bin_dir: Path, package: str) -> str:
    proc = subprocess.run([str(bin_dir / "python"), "-c", f"import importlib.metadata as m; print(m.version('{package}'))"],
                          capture_output=True, text=True)
    return proc.stdout.strip() or "?"


# ---- the table ------------------------------------------------------------------------


def row(name: str, wall: float, cpu: Optional[float], lines: int, floor_per_line: float, note: str = "") -> dict:
    return {"row": name, "wall_s": wall, "cpu_s": cpu, "lines": lines, "lines_per_s": lines / wall if wall else 0.0,
            "x_parse": (wall / lines) / floor_per_line if lines else None, "note": note}


def print_table(report: dict) -> None:
    c = report["corpus"]
    print(f"corpus: {c['files']} files, {c['lines']:,} lines; {c['optax_files']} use optax ({c['optax_lines']:,} lines, "
          f"{100 * c['optax_lines'] / c['lines']:.0f}%); {report['cpus']} cores; load average at start {report['load'][0]:.1f}, "
          f"at end {report['load_end'][0]:.1f}")
    print(f"{'':3}{'row':<52}{'wall s':>8}{'cpu s':>8}{'lines':>9}{'lines/s':>10}{'x parse':>9}")
    for r in report["rows"]:
        cpu = f"{r['cpu_s']:.2f}" if r["cpu_s"] is not None else "-"
        ratio = f"{r['x_parse']:.2f}" if r["x_parse"] is not None else "-"
        print(f"{r['id']:<3}{r['row']:<52}{r['wall_s']:>8.2f}{cpu:>8}{r['lines']:>9,}{r['lines_per_s']:>10,.0f}{ratio:>9}"
              + (f"  {r['note']}" if r["note"] else ""))
    for note in report["notes"]:
        print(f"note: {note}")
    print("\ntargets:")
    for t in report["targets"]:
        print(f"  {'ok  ' if t['met'] else 'MISS'} {t['what']}: {t['value']}")


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=1200)
    ap.add_argument("--optax-share", type=float, default=0.15, help="share of generated files that use optax")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--corpus", help="a directory to measure instead of a generated corpus")
    ap.add_argument("--repeat", type=int, default=1, help="runs per CLI row (the median is kept)")
    ap.add_argument("--peer-sample", type=int, default=60, help="optax-using files given to Fixit and TorchFix")
    ap.add_argument("--peers-venv", default=str(Path(tempfile.gettempdir()) / "optax-lint-bench-peers"))
    ap.add_argument("--no-peers", action="store_true")
    ap.add_argument("--json", help="also write the report as JSON here")
    args = ap.parse_args(argv)

    report: dict = {"cpus": os.cpu_count(), "load": os.getloadavg(), "notes": [], "rows": [], "targets": []}
    with tempfile.TemporaryDirectory(prefix="optax-lint-table-") as tmp_name:
        tmp = Path(tmp_name)
        if args.corpus:
            corpus = Path(args.corpus).resolve()
        else:
            from make_corpus import generate

            corpus = tmp / "corpus"
            print(f"generating {args.files} files ...", file=sys.stderr)
            generate(corpus, args.files, args.seed, args.optax_share)
        files = sorted(p for p in corpus.rglob("*.py") if ".optax_lint_cache" not in p.parts)
        texts = {p: p.read_text(encoding="utf-8") for p in files}
        optax_files = [p for p in files if "optax" in texts[p]]
        n_lines, n_optax = lines_of(files), lines_of(optax_files)
        report["corpus"] = {"files": len(files), "lines": n_lines, "optax_files": len(optax_files), "optax_lines": n_optax,
                            "generated": not args.corpus}
        subprocess.run([sys.executable, "-m", "optax_lint", "--version"], env=env(), capture_output=True)  # write .pyc

        print("floors ...", file=sys.stderr)
        import libcst

        ast_t = timed(lambda: [ast.parse(texts[p]) for p in files])
        floor = timed(lambda: [libcst.parse_module(texts[p]) for p in files])
        floor_optax = timed(lambda: [libcst.parse_module(texts[p]) for p in optax_files])
        per_line = floor[0] / n_lines
        rows = report["rows"]
        rows.append({"id": "1", **row("ast.parse, every file", *ast_t, n_lines, per_line)})
        rows.append({"id": "2", **row("libcst.parse_module, every file", *floor, n_lines, per_line)})
        rows.append({"id": "2b", **row("libcst.parse_module, optax-using files", *floor_optax, n_optax, per_line)})

        cache_dir = tmp / "cache"
        rss = tmp / "rss.json"

        def wipe() -> None:
            shutil.rmtree(cache_dir, ignore_errors=True)

        print("optax-lint cold/warm ...", file=sys.stderr)
        base = ["--cache-dir", str(cache_dir)]
        cold1 = median_run(lint_cmd([*base, "--jobs", "1", "."]), corpus, args.repeat, wipe, rss)
        rel_optax = [str(p.relative_to(corpus)) for p in optax_files]
        cold1_optax = median_run(lint_cmd([*base, "--jobs", "1", *rel_optax]), corpus, args.repeat, wipe, rss)
        coldn = median_run(lint_cmd([*base, "--jobs", "0", "."]), corpus, args.repeat, wipe, rss)
        warm = median_run(lint_cmd([*base, "--jobs", "0", "."]), corpus, args.repeat, None, rss)
        touched = optax_files[0]

        def touch() -> None:
            with open(touched, "a", encoding="utf-8") as f:
                f.write("# touched\n")

        warm1 = median_run(lint_cmd([*base, "--jobs", "0", "."]), corpus, args.repeat, touch, rss)
        for r in (cold1, cold1_optax, coldn, warm, warm1):
            if r["rc"] != 0:
                report["notes"].append(f"a CLI run failed (exit {r['rc']}): {r['stderr']}")
        mib = lambda kib: kib / 1024  # noqa: E731  (ru_maxrss is KiB on Linux)
        rows.append({"id": "3", **row("optax-lint cold, --jobs 1", cold1["wall"], cold1["cpu"], n_lines, per_line,
                                      f"peak RSS {mib(cold1['self_kib']):.0f} MiB")})
        rows.append({"id": "3b", **row("optax-lint cold, --jobs 1, optax-using files", cold1_optax["wall"],
                                       cold1_optax["cpu"], n_optax, per_line)})
        rows.append({"id": "4", **row(f"optax-lint cold, all cores (--jobs 0 = {os.cpu_count()})", coldn["wall"],
                                      coldn["cpu"], n_lines, per_line,
                                      f"peak RSS main {mib(coldn['self_kib']):.0f} MiB, largest worker {mib(coldn['workers_kib']):.0f} MiB"
                                      " (ru_maxrss: counts what it inherited at fork)")})
        rows.append({"id": "5", **row("optax-lint warm, nothing changed", warm["wall"], warm["cpu"], n_lines, per_line)})
        rows.append({"id": "6", **row("optax-lint warm, one file touched", warm1["wall"], warm1["cpu"], n_lines, per_line)})

        fixit_row = None
        if args.no_peers:
            report["notes"].append("Fixit and TorchFix skipped (--no-peers)")
        else:
            print("peers ...", file=sys.stderr)
            bin_dir, how = peers_venv(Path(args.peers_venv))
            if bin_dir is None:
                report["notes"].append(f"Fixit and TorchFix skipped: {how}")
            else:
                step = max(1, len(optax_files) // max(1, args.peer_sample))
                sample = optax_files[::step][: args.peer_sample]
                plain_dir, torch_dir = tmp / "peer_plain", tmp / "peer_torch"
                for d in (plain_dir, torch_dir):
                    d.mkdir()
                for i, p in enumerate(sample):
                    (plain_dir / f"f{i:03d}.py").write_text(texts[p], encoding="utf-8")
                    (torch_dir / f"f{i:03d}.py").write_text("import torch\n" + texts[p], encoding="utf-8")
                s_lines = lines_of(list(plain_dir.glob("*.py")))
                s_texts = [p.read_text() for p in sorted(plain_dir.glob("*.py"))]
                s_floor = timed(lambda: [libcst.parse_module(t) for t in s_texts])
                ours = run_cmd(lint_cmd(["--no-cache", "--jobs", "1", "."]), plain_dir)
                fixit = run_cmd([str(bin_dir / "fixit"), "lint", "."], plain_dir)
                torchfix = run_cmd([str(bin_dir / "torchfix"), "--jobs", "1", "."], torch_dir)
                fv, tv = peer_version(bin_dir, "fixit"), peer_version(bin_dir, "torchfix")
                lv = peer_version(bin_dir, "libcst")
                rows.append({"id": "7", **row(f"sample: libcst.parse_module ({len(sample)} optax files)", *s_floor, s_lines,
                                              per_line)})
                rows.append({"id": "7", **row("sample: optax-lint --no-cache --jobs 1", ours["wall"], ours["cpu"], s_lines,
                                              per_line)})
                fixit_row = row(f"sample: Fixit {fv} default rules", fixit["wall"], fixit["cpu"], s_lines, per_line,
                                f"libcst {lv} in its venv; exit {fixit['rc']}")
                rows.append({"id": "7", **fixit_row})
                rows.append({"id": "7", **row(f"sample: TorchFix {tv} default rules, --jobs 1", torchfix["wall"],
                                              torchfix["cpu"], s_lines, per_line,
                                              f"copies with `import torch` first; exit {torchfix['rc']}")})
                report["peers"] = {"ours_cpu": ours["cpu"], "fixit_cpu": fixit["cpu"], "torchfix_cpu": torchfix["cpu"],
                                   "sample_lines": s_lines, "how": how}

        print("start-up ...", file=sys.stderr)
        version = [run_cmd([sys.executable, "-m", "optax_lint", "--version"], ROOT)["wall"] for _ in range(5)]
        bare = [run_cmd([sys.executable, "-c", "pass"], ROOT)["wall"] for _ in range(5)]
        libcst_import = [run_cmd([sys.executable, "-c", "import libcst"], ROOT)["wall"] for _ in range(3)]
        small_src = min(optax_files, key=lambda p: abs(texts[p].count("\n") - 300))
        small_dir = tmp / "small"
        small_dir.mkdir()
        small = small_dir / "train.py"
        small.write_text(texts[small_src], encoding="utf-8")
        small_lines = lines_of([small])
        nocache = [run_cmd(lint_cmd(["--no-cache", "train.py"]), small_dir, rss) for _ in range(3)]
        imported = sorted(m for m in FORBIDDEN if any(x == m or x.startswith(m + ".") for x in nocache[-1].get("modules", [])))

        def edit() -> None:
            with open(small, "a", encoding="utf-8") as f:
                f.write("# edited\n")

        tables = [median_run(lint_cmd(["train.py"]), small_dir, 1, edit) for _ in range(4)][1:]  # the 1st fills the cache
        med = lambda rs: statistics.median(r["wall"] for r in rs)  # noqa: E731
        medc = lambda rs: statistics.median(r["cpu"] for r in rs)  # noqa: E731
        rows.append({"id": "8", **row("optax-lint --version", statistics.median(version), None, 0, per_line,
                                      f"bare interpreter {statistics.median(bare):.3f} s")})
        rows.append({"id": "8", **row(f"one {small_lines}-line file, --no-cache", med(nocache), medc(nocache), small_lines,
                                      per_line, f"`import libcst` alone {statistics.median(libcst_import):.2f} s")})
        rows.append({"id": "8", **row(f"one {small_lines}-line file, edited, table cache warm", med(tables), medc(tables),
                                      small_lines, per_line, "a pre-commit run after the first")})
        report["load_end"] = os.getloadavg()
        report["one_file_imports_forbidden"] = imported

        t = report["targets"]
        r3b = cold1_optax["wall"] / floor_optax[0]
        t.append({"what": "cold --jobs 1 on optax-using files <= 1.3x their libcst parse",
                  "value": f"{r3b:.2f}x (CPU {cold1_optax['cpu'] / floor_optax[1]:.2f}x)", "met": r3b <= 1.3})
        speed = floor[0] / coldn["wall"]
        t.append({"what": "cold, whole repo, all cores: >= 5x faster than libcst-parsing every file",
                  "value": f"{speed:.1f}x (--jobs 1: {floor[0] / cold1['wall']:.1f}x)", "met": speed >= 5})
        share = warm["wall"] / coldn["wall"]
        t.append({"what": "warm, nothing changed: < 5% of cold (all cores)", "value": f"{100 * share:.1f}%",
                  "met": share < 0.05})
        t.append({"what": "--version < 0.15 s", "value": f"{statistics.median(version):.3f} s",
                  "met": statistics.median(version) < 0.15})
        t.append({"what": "one small file < 0.5 s wall", "value": f"{med(tables):.2f} s with the table cache, "
                  f"{med(nocache):.2f} s without", "met": med(tables) < 0.5})
        t.append({"what": "one-file lint imports none of jax/optax/flax/orbax", "value": ", ".join(imported) or "none",
                  "met": not imported})
        if fixit_row is not None:
            peers = report["peers"]
            per = (peers["fixit_cpu"] / peers["sample_lines"]) / (peers["ours_cpu"] / peers["sample_lines"])
            t.append({"what": ">= 10x faster than Fixit per line (CPU, same files)", "value": f"{per:.1f}x",
                      "met": per >= 10})
            tper = peers["torchfix_cpu"] / peers["ours_cpu"]
            t.append({"what": "TorchFix on the files it parses (CPU, for scale)", "value": f"{tper:.1f}x our CPU",
                      "met": True})
        worker = max(coldn.get("workers_kib", 0), cold1.get("self_kib", 0)) / 1024
        t.append({"what": "peak memory per worker < 300 MiB", "value": f"{worker:.0f} MiB", "met": worker < 300})

    print_table(report)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
