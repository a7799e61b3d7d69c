#!/usr/bin/env python3
"""Crash-freedom and fix-safety check of optax-lint on real code (a script, not a CI test).

    python benchmarks/corpus_check.py DIR [DIR ...] [--jobs N] [--json OUT] [--keep]

For every .py file under the given directories (e.g. the site-packages of jax, flax,
optax and orbax), with every rule enabled:
  1. lint      the files in place (nothing is written) and count internal errors
               (OPX900: a rule or the extraction raised; must be 0);
  2. fix       a copy with `--fix --unsafe-fixes`; every file the fixes changed must
               still parse (libcst and CPython) and compile if its original compiled;
               a fix the engine refused to write (it would not re-parse) is reported too;
  3. refix     the fixed copy again: nothing may change (fix(fix(x)) == fix(x));
and summarise the findings per rule, the slowest files and the time of each phase.
Exit status 0 only when there are no internal errors, broken, refused or
non-converging fixes.
"""

from __future__ import annotations

import argparse
import ast
import collections
import json
import os
import shutil
import sys
import tempfile
import time
import traceback
import warnings
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from optax_lint.core.config import load_settings  # noqa: E402
from optax_lint.run import api  # noqa: E402


def collect(dirs: list[Path]) -> list[tuple[Path, str]]:
    """(absolute path, name in the copy) of every regular .py file, sorted."""
    out = []
    for base in dirs:
        base = base.resolve()
        for path in sorted(base.rglob("*.py")):
            if path.is_file() and not path.is_symlink():
                out.append((path, f"{base.name}/{path.relative_to(base).as_posix()}"))
    return out


def _settings():
    return load_settings(start=Path(tempfile.gettempdir()), overrides={"select": ["OPX"]})


_SETTINGS = None


def _one(job: tuple[str, bool]) -> dict:
    """Lint (or fix, writing the file) one path; never raises."""
    global _SETTINGS
    if _SETTINGS is None:
        _SETTINGS = _settings()
    path, fix = job
    options = api.RunOptions(fix=fix, unsafe_fixes=fix, show_traceback=True, jobs=1)
    start = time.perf_counter()
    try:
        result, _, internal = api.lint_file(Path(path), _SETTINGS, options)
    except BaseException as exc:  # a crash the engine did not catch: the worst outcome
        return {"path": path, "crash": "".join(traceback.format_exception(exc)), "seconds": time.perf_counter() - start,
                "findings": [], "internal": 1, "fixed": 0}
    return {
        "path": path,
        "seconds": time.perf_counter() - start,
        "internal": internal,
        "fixed": result.fixed,
        "findings": [(f.code, f.name, f.span.line, f.span.column, f.message) for f in result.findings],
    }


def run_all(paths: list[str], fix: bool, jobs: int) -> list[dict]:
    jobs_list = [(p, fix) for p in paths]
    if jobs <= 1:
        return [_one(j) for j in jobs_list]
    # big files first, so the pool does not end waiting on one of them
    jobs_list.sort(key=lambda j: -os.path.getsize(j[0]))
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(_one, jobs_list, chunksize=4))


def parses(text: str) -> tuple[bool, bool, bool]:
    """(libcst parses, CPython parses, CPython compiles)."""
    import libcst as cst

    try:
        cst.parse_module(text)
        c = True
    except Exception:
        c = False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            ast.parse(text)
            a = True
        except Exception:
            a = False
        try:
            compile(text, "<fixed>", "exec", dont_inherit=True)
            k = True
        except Exception:
            k = False
    return c, a, k


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dirs", nargs="+", type=Path)
    parser.add_argument("--jobs", "-j", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--json", type=Path, help="also write the full report here")
    parser.add_argument("--keep", action="store_true", help="keep the fixed copy (its path is printed)")
    args = parser.parse_args(argv)

    files = collect(args.dirs)
    total_bytes = sum(p.stat().st_size for p, _ in files)
    total_lines = sum(p.read_bytes().count(b"\n") for p, _ in files)
    print(f"corpus: {len(files)} files, {total_lines:,} lines, {total_bytes / 1e6:.1f} MB from {', '.join(map(str, args.dirs))}")
    report: dict = {"files": len(files), "lines": total_lines, "bytes": total_bytes, "dirs": [str(d) for d in args.dirs]}

    # 1. lint in place
    t0 = time.perf_counter()
    linted = run_all([str(p) for p, _ in files], fix=False, jobs=args.jobs)
    report["lint_seconds"] = time.perf_counter() - t0
    crashes = [r for r in linted if "crash" in r]
    internal = [(r["path"], f[4]) for r in linted for f in r["findings"] if f[0] == "OPX900"]
    per_rule = collections.Counter()
    per_rule_files = collections.defaultdict(set)
    names = {}
    for r in linted:
        for code, name, *_ in r["findings"]:
            per_rule[code] += 1
            per_rule_files[code].add(r["path"])
            names[code] = name
    print(f"lint:   {report['lint_seconds']:.1f} s, {len(crashes)} crashes, {len(internal)} internal errors (OPX900)")

    # 2. fix a copy
    work = Path(tempfile.mkdtemp(prefix="optax-lint-corpus-"))
    copies = []
    for path, name in files:
        target = work / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
        copies.append(target)
    t0 = time.perf_counter()
    fixed = run_all([str(c) for c in copies], fix=True, jobs=args.jobs)
    report["fix_seconds"] = time.perf_counter() - t0
    changed, broken, refused = [], [], []
    for (orig, name), copy in zip(files, copies):
        before, after = orig.read_bytes(), copy.read_bytes()
        if before == after:
            continue
        changed.append(name)
        try:
            new_text = after.decode("utf-8")  # the corpus is UTF-8; other encodings: judged by bytes below
            old_text = before.decode("utf-8")
        except UnicodeDecodeError:
            new_text = old_text = None
        if new_text is None:
            continue
        c_old, a_old, k_old = parses(old_text)
        c_new, a_new, k_new = parses(new_text)
        if (c_old and not c_new) or (a_old and not a_new) or (k_old and not k_new):
            broken.append((name, f"libcst {c_new}, ast {a_new}, compile {k_new}"))
    for r in fixed:
        for f in r["findings"]:
            if f[0] == "OPX900" and "would not re-parse" in f[4]:
                refused.append((r["path"], f[4]))
    fix_crashes = [r for r in fixed if "crash" in r]
    fixes_applied = sum(r["fixed"] for r in fixed)
    print(f"fix:    {report['fix_seconds']:.1f} s, {fixes_applied} fixes in {len(changed)} files, "
          f"{len(broken)} broken, {len(refused)} refused (would not re-parse), {len(fix_crashes)} crashes")

    # 3. fix again: nothing may change
    snapshot = {c: c.read_bytes() for c in copies}
    t0 = time.perf_counter()
    refixed = run_all([str(c) for c in copies], fix=True, jobs=args.jobs)
    report["refix_seconds"] = time.perf_counter() - t0
    unstable = [str(c.relative_to(work)) for c in copies if c.read_bytes() != snapshot[c]]
    print(f"refix:  {report['refix_seconds']:.1f} s, {len(unstable)} files changed again (must be 0)")

    slowest = sorted(linted, key=lambda r: -r["seconds"])[:8]
    print("\nslowest files (lint):")
    for r in slowest:
        print(f"  {r['seconds']:7.2f} s  {os.path.getsize(r['path']) / 1024:8.0f} KB  {r['path']}")
    print("\nfindings per rule (lint pass):")
    for code in sorted(per_rule):
        print(f"  {code}  {names[code]:<40} {per_rule[code]:6d} findings in {len(per_rule_files[code]):5d} files")
    problems = [("crash", r["path"], r["crash"]) for r in crashes + fix_crashes + [r for r in refixed if "crash" in r]]
    problems += [("internal", p, m) for p, m in internal]
    problems += [("refused", p, m) for p, m in refused]
    problems += [("broken", p, m) for p, m in broken]
    problems += [("unstable", p, "") for p in unstable]
    if problems:
        print("\nproblems:")
        for kind, path, message in problems[:50]:
            print(f"  [{kind}] {path}: {message.splitlines()[0] if message else ''}")
            if kind in ("crash", "internal"):
                print(textwrap_indent(message))
    report.update(
        crashes=len(crashes) + len(fix_crashes), internal_errors=len(internal), changed_files=len(changed),
        fixes_applied=fixes_applied, broken_fixes=broken, refused_fixes=refused, unstable=unstable,
        findings_per_rule={c: {"name": names[c], "findings": per_rule[c], "files": len(per_rule_files[c])} for c in sorted(per_rule)},
        slowest=[(r["path"], round(r["seconds"], 2)) for r in slowest],
    )
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    if args.keep:
        print(f"\nfixed copy kept in {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    bad = report["crashes"] or internal or broken or refused or unstable
    print("\nOK: 0 internal errors, 0 broken fixes, fixes converge." if not bad else "\nFAILED: see problems above.")
    return 1 if bad else 0


def textwrap_indent(text: str, limit: int = 25) -> str:
    lines = text.rstrip().splitlines()[1:][-limit:]
    return "\n".join("      " + line for line in lines)


if __name__ == "__main__":
    sys.exit(main())
