#!/usr/bin/env python3
"""Precision of optax-lint on the real-repository corpus (issue 20).

    python benchmarks/realworld/precision.py --corpus /work/corpus/realworld
    python benchmarks/realworld/precision.py --corpus DIR --check
    python benchmarks/realworld/precision.py --findings run.json   # judge a saved run

The corpus is rebuilt by `rebuild.py` from the commits pinned in PINS.tsv; it is other
people's code and is never committed. This script lints it the way a user would (the
CLI in a subprocess, JSON output, no cache) and matches every finding to a row of
`judged.tsv` (repo, path, line, code, verdict, reason). A row matches a finding of the
same repository, file and code at the same line, or failing that at the nearest line
within --tolerance lines (code above it moved); each row matches one finding at most.

Printed: per code, the findings, how many were judged TRUE / DEBATABLE / FALSE, how many
nobody judged, and the precision TRUE / judged (DEBATABLE counts as not true); then the
findings nobody judged, and the judged rows no finding matched any more (recall loss;
a lost TRUE row is flagged).

--check exits 1 when a code with >= 5 findings is under 90% precision, a code with
fewer has a FALSE finding, a finding at error severity is judged FALSE, or a finding is
unjudged (--allow-unjudged lets that pass).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
VERDICTS = ("TRUE", "DEBATABLE", "FALSE")
COLUMNS = ("repo", "path", "line", "code", "verdict", "reason")


@dataclass
class Row:
    repo: str
    path: str
    line: int
    code: str
    verdict: str
    reason: str


@dataclass
class Finding:
    repo: str
    path: str
    line: int
    code: str
    severity: str
    message: str
    row: Row | None = field(default=None)


def read_judged(path: Path) -> list[Row]:
    rows = []
    with path.open(encoding="utf-8", newline="") as fh:
        for n, rec in enumerate(csv.DictReader(fh, delimiter="\t", quoting=csv.QUOTE_NONE), start=2):
            verdict = rec["verdict"].strip().upper()
            if verdict not in VERDICTS:
                raise SystemExit(f"{path}:{n}: verdict {rec['verdict']!r} is not one of {', '.join(VERDICTS)}")
            rows.append(Row(rec["repo"], rec["path"], int(rec["line"]), rec["code"], verdict, rec["reason"]))
    return rows


def split_path(corpus_path: str) -> tuple[str, str]:
    """`owner+name/dir/file.py` (a path in the corpus) -> ("owner/name", "dir/file.py")."""
    folder, _, rest = corpus_path.replace(os.sep, "/").partition("/")
    return folder.replace("+", "/", 1), rest


def lint(corpus: Path, jobs: int, extend_select: str = "") -> list[dict]:
    files = [line for line in (corpus / "files.txt").read_text(encoding="utf-8").splitlines() if line.strip()]  # a name may hold a space
    extra = ["--extend-select", extend_select] if extend_select else []
    cmd = [sys.executable, "-m", "optax_lint", "--no-cache", "-j", str(jobs), "--exit-zero", "--output-format", "json", *extra, *files]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    proc = subprocess.run(cmd, cwd=corpus, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"optax-lint failed (exit {proc.returncode}):\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout)


def to_findings(raw: list[dict]) -> list[Finding]:
    out = []
    for rec in raw:
        repo, path = split_path(rec["path"])
        out.append(Finding(repo, path, int(rec["line"]), rec["code"], rec["severity"], rec["message"]))
    return out


def match(findings: list[Finding], rows: list[Row], tolerance: int) -> list[Row]:
    """Pair findings with judged rows (same repo, path, code); return the rows left over."""
    by_key: dict[tuple, list[Row]] = defaultdict(list)
    for row in rows:
        by_key[(row.repo, row.path, row.code)].append(row)
    found: dict[tuple, list[Finding]] = defaultdict(list)
    for f in findings:
        found[(f.repo, f.path, f.code)].append(f)
    left: list[Row] = []
    for key, judged in by_key.items():
        todo = list(found.get(key, []))
        free = list(judged)
        # exact lines first, then the nearest pairs, so a moved block does not steal a partner
        for f in list(todo):
            row = next((r for r in free if r.line == f.line), None)
            if row is not None:
                f.row = row
                free.remove(row)
                todo.remove(f)
        pairs = sorted((abs(f.line - r.line), i, j) for i, f in enumerate(todo) for j, r in enumerate(free))
        used_f, used_r = set(), set()
        for dist, i, j in pairs:
            if dist > tolerance or i in used_f or j in used_r:
                continue
            todo[i].row = free[j]
            used_f.add(i)
            used_r.add(j)
        left += [r for j, r in enumerate(free) if j not in used_r]
    return left


def table(findings: list[Finding]) -> dict[str, dict]:
    stats: dict[str, dict] = {}
    for f in findings:
        s = stats.setdefault(f.code, {"findings": 0, "TRUE": 0, "DEBATABLE": 0, "FALSE": 0, "unjudged": 0})
        s["findings"] += 1
        s[f.row.verdict if f.row else "unjudged"] += 1
    for s in stats.values():
        judged = s["TRUE"] + s["DEBATABLE"] + s["FALSE"]
        s["precision"] = s["TRUE"] / judged if judged else None
    return dict(sorted(stats.items()))


def problems(findings: list[Finding], stats: dict[str, dict], allow_unjudged: bool) -> list[str]:
    out = []
    for code, s in stats.items():
        if s["findings"] >= 5 and s["precision"] is not None and s["precision"] < 0.9:
            out.append(f"{code}: precision {s['precision']:.0%} on {s['findings']} findings (needs >= 90%)")
        if s["findings"] < 5 and s["FALSE"]:
            out.append(f"{code}: {s['FALSE']} FALSE of {s['findings']} findings (a code with < 5 findings needs none)")
        if s["unjudged"] and not allow_unjudged:
            out.append(f"{code}: {s['unjudged']} unjudged findings")
    for f in findings:
        if f.severity == "error" and f.row and f.row.verdict == "FALSE":
            out.append(f"{f.code} at error severity judged FALSE: {f.repo}/{f.path}:{f.line}")
    return out


def render(stats: dict[str, dict]) -> str:
    lines = ["| code | findings | TRUE | DEBATABLE | FALSE | unjudged | precision |", "|---|---:|---:|---:|---:|---:|---:|"]
    total = {"findings": 0, "TRUE": 0, "DEBATABLE": 0, "FALSE": 0, "unjudged": 0}
    for code, s in stats.items():
        p = "-" if s["precision"] is None else f"{s['precision']:.0%}"
        lines.append(f"| {code} | {s['findings']} | {s['TRUE']} | {s['DEBATABLE']} | {s['FALSE']} | {s['unjudged']} | {p} |")
        for k in total:
            total[k] += s[k]
    judged = total["TRUE"] + total["DEBATABLE"] + total["FALSE"]
    p = f"{total['TRUE'] / judged:.0%}" if judged else "-"
    lines.append(f"| all | {total['findings']} | {total['TRUE']} | {total['DEBATABLE']} | {total['FALSE']} | {total['unjudged']} | {p} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=HERE / "corpus", help="the rebuilt corpus (default: %(default)s)")
    parser.add_argument("--judged", type=Path, default=HERE / "judged.tsv")
    parser.add_argument("--findings", type=Path, help="read optax-lint JSON output from this file instead of linting")
    parser.add_argument("--save", type=Path, help="write the run's JSON output here (to rerun the matching quickly)")
    parser.add_argument("--jobs", "-j", type=int, default=1)
    parser.add_argument("--extend-select", default="", help="also run these opt-in rules (e.g. OPX611), comma-separated")
    parser.add_argument("--tolerance", type=int, default=20, help="most lines a judged finding may have moved (default: %(default)s)")
    parser.add_argument("--check", action="store_true", help="exit 1 when a precision goal is not met")
    parser.add_argument("--allow-unjudged", action="store_true", help="with --check, let unjudged findings pass")
    args = parser.parse_args(argv)

    raw = json.loads(args.findings.read_text(encoding="utf-8")) if args.findings else lint(args.corpus, args.jobs, args.extend_select)
    if args.save:
        args.save.write_text(json.dumps(raw), encoding="utf-8")
    findings = to_findings(raw)
    rows = read_judged(args.judged)
    # A corpus rebuilt without some repositories (rebuild.py --skip-missing) says which:
    # their judged findings are out of this run, not lost.
    missing_list = args.corpus / "missing.txt"
    absent = set(missing_list.read_text(encoding="utf-8").split()) if missing_list.is_file() else set()
    if absent:
        rows = [r for r in rows if r.repo not in absent]
        print(f"{len(absent)} pinned repositories are not in this corpus (missing.txt): their judged rows are set aside\n")
    lost = match(findings, rows, args.tolerance)
    stats = table(findings)

    print(render(stats))
    unjudged = [f for f in findings if f.row is None]
    if unjudged:
        print(f"\n{len(unjudged)} findings nobody judged (add them to {args.judged.name}):")
        for f in sorted(unjudged, key=lambda f: (f.repo, f.path, f.line, f.code)):
            print(f"  {f.repo}\t{f.path}\t{f.line}\t{f.code}\t{f.severity}\t{f.message[:120]}")
    if lost:
        true_lost = sum(r.verdict == "TRUE" for r in lost)
        print(f"\n{len(lost)} judged findings no longer reported ({true_lost} of them TRUE: recall lost):")
        for r in sorted(lost, key=lambda r: (r.verdict != "TRUE", r.repo, r.path, r.line)):
            flag = "LOST TRUE" if r.verdict == "TRUE" else r.verdict
            print(f"  {flag}\t{r.repo}/{r.path}:{r.line}\t{r.code}\t{r.reason}")
    if args.check:
        found = problems(findings, stats, args.allow_unjudged)
        if found:
            print("\ncheck failed:\n  " + "\n  ".join(found))
            return 1
        print("\ncheck passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
