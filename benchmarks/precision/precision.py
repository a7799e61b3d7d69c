#!/usr/bin/env python3
"""Precision of optax-lint on its own judged corpus (issue 10).

    python benchmarks/precision/precision.py            # the table per code
    python benchmarks/precision/precision.py --check    # exit 1 on any regression
    python benchmarks/precision/precision.py --json     # the same as JSON

`corpus/` holds real-world-style training code (the shapes of the public JAX projects
the rules were tried on) and library-style near-misses (building blocks, tests of
transforms, a library's own modules). `judged.toml` holds every finding optax-lint has
produced on it, now or before a precision fix, with a verdict (true / false /
debatable) and the reason. Precision per code is true / (true + false + debatable):
a debatable finding is not counted as a hit.

A regression is a judged-false finding that comes back, a judged-true finding that
disappears, or a finding nobody judged yet (judge it in judged.toml).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
CORPUS = HERE / "corpus"
JUDGED = HERE / "judged.toml"
sys.path.insert(0, str(ROOT))

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

VERDICTS = ("true", "false", "debatable")


@dataclass(frozen=True)
class Judged:
    file: str
    line: int
    code: str
    verdict: str
    reason: str

    @property
    def key(self) -> tuple[str, int, str]:
        return (self.file, self.line, self.code)


def load_judged(path: Path = JUDGED) -> dict[tuple[str, int, str], Judged]:
    with open(path, "rb") as fh:
        data = tomllib.load(fh)
    out: dict[tuple[str, int, str], Judged] = {}
    for entry in data.get("finding", []):
        judged = Judged(entry["file"], int(entry["line"]), entry["code"], entry["verdict"], entry["reason"])
        if judged.verdict not in VERDICTS:
            raise ValueError(f"{judged.key}: verdict must be one of {VERDICTS}, got {judged.verdict!r}")
        if judged.key in out:
            raise ValueError(f"{judged.key} is judged twice")
        out[judged.key] = judged
    return out


def current_findings(corpus: Path = CORPUS) -> dict[tuple[str, int, str], str]:
    """(file relative to the corpus, line, code) -> message, every rule enabled."""
    from optax_lint.engine import lint as engine
    from optax_lint.rules import registry

    codes = set(registry.family_packages()) | {"OPX001"}
    out: dict[tuple[str, int, str], str] = {}
    for path in sorted(corpus.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        run = engine.lint_text(text, str(path), codes, root=str(corpus))
        for finding in run.findings:
            out[(path.relative_to(corpus).as_posix(), finding.span.line, finding.code)] = finding.message
    return out


@dataclass
class Report:
    rows: dict[str, dict[str, int]]  # code -> counts of the findings present now
    came_back: list[Judged]  # judged false, present again
    disappeared: list[Judged]  # judged true, gone
    unjudged: list[tuple[tuple[str, int, str], str]]

    @property
    def ok(self) -> bool:
        return not (self.came_back or self.disappeared or self.unjudged)


def evaluate(judged: dict, found: dict) -> Report:
    rows: dict[str, dict[str, int]] = {}
    for key in found:
        entry = judged.get(key)
        verdict = entry.verdict if entry is not None else "unjudged"
        row = rows.setdefault(key[2], {"true": 0, "false": 0, "debatable": 0, "unjudged": 0, "fixed_false": 0})
        row[verdict] += 1
    for entry in judged.values():
        if entry.verdict == "false" and entry.key not in found:
            rows.setdefault(entry.code, {"true": 0, "false": 0, "debatable": 0, "unjudged": 0, "fixed_false": 0})["fixed_false"] += 1
    came_back = [j for j in judged.values() if j.verdict == "false" and j.key in found]
    disappeared = [j for j in judged.values() if j.verdict == "true" and j.key not in found]
    unjudged = [(k, m) for k, m in sorted(found.items()) if k not in judged]
    return Report(rows, came_back, disappeared, unjudged)


def precision(row: dict[str, int]) -> float | None:
    total = row["true"] + row["false"] + row["debatable"] + row["unjudged"]
    return row["true"] / total if total else None


def table(report: Report) -> str:
    lines = ["| Code | Findings | True | False | Debatable | Precision | False findings removed |", "|---|---|---|---|---|---|---|"]
    totals = {"true": 0, "false": 0, "debatable": 0, "unjudged": 0, "fixed_false": 0}
    for code in sorted(report.rows):
        row = report.rows[code]
        for k in totals:
            totals[k] += row[k]
        found = row["true"] + row["false"] + row["debatable"] + row["unjudged"]
        p = precision(row)
        lines.append(f"| {code} | {found} | {row['true']} | {row['false']} | {row['debatable']} | {'-' if p is None else f'{p:.0%}'} | {row['fixed_false']} |")
    found = totals["true"] + totals["false"] + totals["debatable"] + totals["unjudged"]
    p = precision(totals)
    lines.append(f"| all | {found} | {totals['true']} | {totals['false']} | {totals['debatable']} | {'-' if p is None else f'{p:.0%}'} | {totals['fixed_false']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 on a regression or an unjudged finding")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    report = evaluate(load_judged(), current_findings())
    if args.json:
        print(json.dumps({"rows": report.rows, "came_back": [j.key for j in report.came_back],
                          "disappeared": [j.key for j in report.disappeared],
                          "unjudged": [k for k, _ in report.unjudged]}, indent=2))
    else:
        print(table(report))
        for j in report.came_back:
            print(f"CAME BACK (judged false): {j.file}:{j.line} {j.code}: {j.reason}")
        for j in report.disappeared:
            print(f"DISAPPEARED (judged true): {j.file}:{j.line} {j.code}: {j.reason}")
        for (file, line, code), message in report.unjudged:
            print(f"UNJUDGED: {file}:{line} {code} {message}")
    return 1 if args.check and not report.ok else 0


if __name__ == "__main__":
    raise SystemExit(main())
