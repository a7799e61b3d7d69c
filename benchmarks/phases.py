#!/usr/bin/env python3
"""Where a cold lint's CPU goes, phase by phase, on a real corpus, in one process.

    python benchmarks/phases.py --corpus /work/corpus/realworld [--json OUT]

`bench_real.py` says how far cold `-j 1` is from the libcst floor; this says what the
difference is made of, so a change to the pipeline can be aimed at a measured phase.
It runs `optax-lint --no-cache -j 1` on the corpus's `files.txt` in this process (as the
CLI does, from the corpus folder, so project modules are read across files) with timers
around the engine's own entry points, and prints each phase's exclusive CPU time (a
phase's time without the timed phases inside it: a rule's row leaves out the project
parse it triggers) and, in the same run, the floor: read + `libcst.parse_module` of the
listed files.

Phases: the libcst parse of the linted files and of project modules (config, model and
helper modules a linted file imports), CPython's `ast.parse`, the shared walker, the
facts computed on demand (API-currency references, the multi-device host walk, the
checkpoint facts), source positions of what is reported, each rule's `check`, and the
rest (reading, prefilter, noqa, notebooks' cell layout, reporting, start-up).

The timers add ~1-2% of their own. Run it by hand: timings do not belong in CI.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Callable

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]

from bench_real import parse_texts, quietly  # noqa: E402


class Phases:
    """Exclusive CPU time per phase: a nested timed call's time is taken out of the
    caller's row (a stack of child totals)."""

    def __init__(self) -> None:
        self.cpu: Counter = Counter()
        self.calls: Counter = Counter()
        self._stack: list[list] = []  # [key, time spent in timed callees]

    def current(self) -> str:
        return self._stack[-1][0] if self._stack else ""

    def wrap(self, key: "str | Callable[[], str]", fn: Callable) -> Callable:
        def timed(*args, **kwargs):
            name = key() if callable(key) else key
            start = time.process_time()
            self._stack.append([name, 0.0])
            try:
                return fn(*args, **kwargs)
            finally:
                spent = time.process_time() - start
                _, inner = self._stack.pop()
                self.cpu[name] += spent - inner
                self.calls[name] += 1
                if self._stack:
                    self._stack[-1][1] += spent

        timed.__wrapped__ = fn  # type: ignore[attr-defined]
        return timed

    def in_project(self) -> bool:
        return any(frame[0] == "project module facts" for frame in self._stack)


def install(phases: Phases) -> None:
    """Timers around the engine's entry points, patched where they are looked up."""
    import optax_lint.facts.module as module_facts
    import optax_lint.facts.project.files as project_files
    import optax_lint.syntax.parsing as parsing
    import optax_lint.syntax.positions as positions
    from optax_lint.facts import api_currency
    from optax_lint.facts.checkpoints import sites
    from optax_lint.facts.parallel import steps
    from optax_lint.rules import registry

    parsing.parse_module = phases.wrap(
        lambda: "libcst parse, project modules" if phases.in_project() else "libcst parse, linted files",
        parsing.parse_module)
    parsing.parse_ast = phases.wrap("ast.parse (syntax check, positions)", parsing.parse_ast)
    project_files._parse_module = phases.wrap("project module facts", project_files._parse_module)
    module_facts.collect = phases.wrap("walker (scopes, bindings, calls)", module_facts.collect)
    api_currency.currency_references = phases.wrap("API-currency references", api_currency.currency_references)
    steps.walk_host = phases.wrap("multi-device host walk", steps.walk_host)
    sites.CheckpointFacts._collect = phases.wrap("checkpoint facts", sites.CheckpointFacts._collect)
    positions.Positions.span = phases.wrap("positions of what is reported", positions.Positions.span)

    rule_class = registry.rule_class

    def timed_rule_class(code: str):
        cls = rule_class(code)
        if not hasattr(vars(cls).get("check"), "__wrapped__"):  # inherited checks too, once per class
            cls.check = phases.wrap(f"rule {code}", cls.check)
        return cls

    registry.rule_class = timed_rule_class


def floor(corpus: Path, files: list[str]) -> float:
    import libcst

    texts = parse_texts(corpus, files)
    start = time.process_time()
    for text in texts:
        quietly(libcst.parse_module)(text)
    return time.process_time() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, required=True, help="a folder with files.txt listing its optax-using files")
    parser.add_argument("--json", type=Path, help="also write the table as JSON here")
    args = parser.parse_args()
    corpus = args.corpus.resolve()
    files = [line for line in (corpus / "files.txt").read_text(encoding="utf-8").splitlines() if line.strip()]  # a name may hold a space

    os.chdir(corpus)
    phases = Phases()
    install(phases)
    from optax_lint.cli import main as cli

    sys.argv = ["optax-lint", "--no-cache", "-j", "1", "-q", "--exit-zero", *files]
    start = time.process_time()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
        cli()
    total = time.process_time() - start
    base = floor(corpus, files)

    rest = total - sum(phases.cpu.values())
    rows = sorted(phases.cpu.items(), key=lambda kv: -kv[1])
    rules = [(k, v) for k, v in rows if k.startswith("rule ")]
    others = [(k, v) for k, v in rows if not k.startswith("rule ")]
    print(f"{len(files)} files; cold lint {total:.2f} s CPU; floor (read + libcst.parse_module of the listed files) "
          f"{base:.2f} s; ratio {total / base:.2f}x\n")
    print("| phase | CPU s | share | x floor | calls |\n|---|---:|---:|---:|---:|")
    for key, cpu in others:
        print(f"| {key} | {cpu:.2f} | {100 * cpu / total:.1f}% | {cpu / base:.3f} | {phases.calls[key]} |")
    rule_cpu = sum(v for _, v in rules)
    print(f"| rules' own checks ({len(rules)} rules) | {rule_cpu:.2f} | {100 * rule_cpu / total:.1f}% | {rule_cpu / base:.3f} | |")
    print(f"| the rest (read, prefilter, noqa, notebooks, reporting, start-up) | {rest:.2f} | {100 * rest / total:.1f}% | {rest / base:.3f} | |")
    print("\nRules over 1% of the run:")
    for key, cpu in rules:
        if cpu / total >= 0.01:
            print(f"  {key}: {cpu:.2f} s ({100 * cpu / total:.1f}%)")
    if args.json:
        args.json.write_text(json.dumps({"total_cpu": total, "floor_cpu": base, "rest_cpu": rest,
                                         "phases": {k: {"cpu": v, "calls": phases.calls[k]} for k, v in rows}},
                                        indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
