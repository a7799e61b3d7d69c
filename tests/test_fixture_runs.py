"""Fixtures that run: every fixture marked `# runs: <outcome>` is executed on CPU (8
simulated devices, for the pmap ones) before `--fix`, after `--fix` and after
`--fix --unsafe-fixes` (fixes applied to temporary copies, every rule selected), and:

- the original gives its declared outcome (`ok`, or `raises <Exception>` for a defect
  that raises: update without params, an unbound axis, a removed API);
- a good fixture still runs after either fix;
- a bad fixture runs after `--fix --unsafe-fixes`; after `--fix` alone it runs or, when
  the repairing fix is unsafe, fails as it did before (a safe fix never breaks it more).

A fixture that cannot run standalone says why: `# cannot-run: <reason>`, from ALLOWED_REASONS.
The runs share interpreters: tests/fixture_driver.py runs a batch in one process, each
fixture under runpy in a fresh namespace; two batches run in parallel.

A bad fixture whose defect is numeric (it runs as written, and its rule has a property
`--verify` measures: clip after the optimizer, decay after the negation, a chain that
climbs, ...) is verified too: `--verify`'s machinery builds its chains under JAX before
and after `--fix --unsafe-fixes`, and the property must hold on the fixed file. That
runs in one more interpreter (the verification worker), next to the two batches.

fixtures/RUNS.md is the report (each runnable fixture with its three outcomes and the
`--verify` verdict, the counts); it is checked against this run and rewritten with
OPTAX_LINT_UPDATE_SNAPSHOTS=1.
"""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from optax_lint.core.catalogue import load_catalogue
from optax_lint.engine import lint as engine
from optax_lint.verify.report import RULE_CHECKS, verify_text
from optax_lint.verify.runner import Worker, cache_dir

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
DRIVER = Path(__file__).resolve().parent / "fixture_driver.py"
REPORT = FIXTURES / "RUNS.md"
UPDATE = os.environ.get("OPTAX_LINT_UPDATE_SNAPSHOTS") == "1"
ALLOWED_REASONS = ("needs a dataset", "needs a model download", "needs an accelerator")
PER_FIXTURE_SECONDS = 120
BATCHES = 2
_RUNS = re.compile(r"^# runs: (ok|raises [A-Za-z_][A-Za-z0-9_]*)\s*$")
_CANNOT = re.compile(r"^# cannot-run: (.+?)\s*$")

# Fixed fixtures that still do not run, each with the reason (a finding about the fix,
# kept visible here rather than hidden by unmarking the fixture): path -> why.
EXPECTED_FAILURES: dict[str, str] = {}


def _header(path: Path) -> tuple[str, str]:
    """("runs", outcome) | ("cannot-run", reason) | ("", "") from the first lines."""
    for line in path.read_text(encoding="utf-8").splitlines()[:3]:
        if m := _RUNS.match(line):
            return "runs", m.group(1)
        if m := _CANNOT.match(line):
            return "cannot-run", m.group(1)
    return "", ""


def _all_fixtures() -> list[Path]:
    return sorted(p for p in FIXTURES.glob("OPX*/*.py") if not p.name.endswith(".fixed.py"))


def _runnable() -> list[Path]:
    return [p for p in _all_fixtures() if _header(p)[0] == "runs"]


def _name(path: Path) -> str:
    return f"{path.parent.name}/{path.name}"


@functools.lru_cache(maxsize=1)
def _codes() -> frozenset[str]:
    return frozenset(load_catalogue())


def _fixed(text: str, path: Path, unsafe: bool) -> str:
    return engine.fix_text(text, str(path), set(_codes()), unsafe=unsafe).text


def _chunks(paths: list[Path]) -> list[list[Path]]:
    """BATCHES lists of copies, the variants of one fixture together and in order (as
    written, --fix, --unsafe-fixes): a variant whose jitted code the fixes left alone
    then reuses the compilation of the one before it."""
    groups: dict[str, list[Path]] = {}
    for path in paths:
        groups.setdefault(f"{path.parent.name}/{path.name}", []).append(path)
    chunks: list[list[Path]] = [[] for _ in range(BATCHES)]
    for i, name in enumerate(sorted(groups)):
        chunks[i % BATCHES].extend(groups[name])
    return chunks


def _run_batches(paths: list[Path]) -> dict[str, dict]:
    # XLA compilation is most of a fixture's run (a 20-step train step: ~5 s of ~8), so:
    # JAX's persistent compilation cache, next to --verify's (a rerun, or a variant whose
    # jitted code the fixes left alone, reuses it), and XLA's cheaper optimisation level
    # (outcomes are the same; about a fifth less CPU per fixture, measured).
    jax_cache = cache_dir().parent / "fixture-runs-compilation-cache"
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8", JAX_PLATFORMS="cpu",
               JAX_COMPILATION_CACHE_DIR=str(jax_cache), JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
               JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="0", JAX_DISABLE_MOST_OPTIMIZATIONS="1")
    env.pop("PYTHONPATH", None)  # the fixtures import jax/optax/flax only, never the linter
    chunks = _chunks(paths)

    def run(chunk: list[Path]) -> list[dict]:
        if not chunk:
            return []
        with tempfile.TemporaryDirectory() as cwd:
            done = subprocess.run(
                [sys.executable, str(DRIVER), str(PER_FIXTURE_SECONDS), *map(str, chunk)],
                capture_output=True, text=True, env=env, cwd=cwd,
                timeout=PER_FIXTURE_SECONDS * len(chunk) + 60)
        rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
        seen = {r["path"] for r in rows}
        # A crash of the interpreter itself (segfault, abort) loses the rest of the batch.
        rows += [{"path": str(p), "outcome": f"driver exited {done.returncode}", "detail": done.stderr[-500:]}
                 for p in chunk if str(p) not in seen]
        return rows

    with ThreadPoolExecutor(BATCHES) as pool:
        return {row["path"]: row for rows in pool.map(run, chunks) for row in rows}


def _numeric(fixture: Path) -> bool:
    """A bad fixture that runs as written and whose rule has a property --verify measures."""
    return (fixture.name.startswith("bad_") and _header(fixture)[1] == "ok"
            and fixture.parent.name in RULE_CHECKS)


def _verdict(reports, check: str) -> str:
    """The property over every pipeline that measured it: "holds", "fails" or "not measured"."""
    measured = [r.property(check) for r in reports if r.verifiable and not r.error]
    oks = [m.get("ok") for m in measured if m is not None]
    if not oks or None in oks:
        return "not measured"
    return "holds" if all(oks) else "fails"


def _verify_numeric(texts: dict[str, tuple[str, str]]) -> dict[str, dict[str, str]]:
    """fixture name -> {"property", "before", "after"}: the verdicts of --verify's check
    for the fixture's rule on the text as written and after --fix --unsafe-fixes."""
    out: dict[str, dict[str, str]] = {}
    if not texts:
        return out
    with Worker() as worker:
        for name, (before, after) in texts.items():
            check = RULE_CHECKS[name.split("/")[0]]
            verdicts = [_verdict(verify_text(text, name, worker), check) for text in (before, after)]
            out[name] = {"property": check, "before": verdicts[0], "after": verdicts[1]}
    return out


def _outcomes(base: Path) -> dict[str, dict[str, dict]]:
    """fixture name -> {"before"|"fix"|"unsafe": {"outcome", "detail"}}. A variant the
    fixes left unchanged is not run again: it has the outcome of the text it equals."""
    copies: dict[tuple[str, str], Path] = {}  # (name, text) -> the copy that runs it
    plan: dict[str, dict[str, Path]] = {}
    numeric: dict[str, tuple[str, str]] = {}
    for fixture in _runnable():
        name = _name(fixture)
        text = fixture.read_text(encoding="utf-8")
        unsafe = _fixed(text, fixture, True)
        if _numeric(fixture):
            numeric[name] = (text, unsafe)
        for variant, body in (("before", text), ("fix", _fixed(text, fixture, False)),
                              ("unsafe", unsafe)):
            copy = copies.get((name, body))
            if copy is None:
                copy = base / variant / fixture.parent.name / fixture.name
                copy.parent.mkdir(parents=True, exist_ok=True)
                copy.write_text(body, encoding="utf-8")
                copies[(name, body)] = copy
            plan.setdefault(name, {})[variant] = copy
    with ThreadPoolExecutor(1) as pool:  # the worker waits on its own process: no core held here
        verified = pool.submit(_verify_numeric, numeric)
        rows = _run_batches(list(copies.values()))
        checks = verified.result()
    return {name: {**{variant: rows[str(copy)] for variant, copy in variants.items()},
                   **({"verify": checks[name]} if name in checks else {})}
            for name, variants in plan.items()}


def test_headers_are_well_formed() -> None:
    for fixture in _all_fixtures():
        kind, value = _header(fixture)
        if kind == "cannot-run":
            assert value in ALLOWED_REASONS, f"{_name(fixture)}: reason {value!r} not in {ALLOWED_REASONS}"
    for name in EXPECTED_FAILURES:
        assert _header(FIXTURES / name)[0] == "runs", f"{name} is listed as an expected failure but not runnable"


def _problems(fixture: Path, runs: dict[str, dict]) -> list[str]:
    name = _name(fixture)
    declared = _header(fixture)[1]
    before, safe, unsafe = (runs[v]["outcome"] for v in ("before", "fix", "unsafe"))
    if before != declared:
        return [f"{name}: declared {declared!r}, ran {before!r}: {runs['before']['detail']}"]
    if name in EXPECTED_FAILURES:
        return [f"{name} runs after the fix now: drop it from EXPECTED_FAILURES"] if unsafe == "ok" else []
    if fixture.name.startswith("good_"):
        return [] if safe == unsafe == "ok" else [f"{name}: the fixes broke a good fixture: {runs}"]
    if unsafe != "ok":
        return [f"{name}: does not run after --fix --unsafe-fixes: {runs['unsafe']['detail']}"]
    if safe not in ("ok", before):
        return [f"{name}: --fix made it fail differently: {runs['fix']['detail']}"]
    # A chain --verify cannot build (one assembled with .append) is reported as not
    # measured; one it measured must hold after the fixes.
    check = runs.get("verify", {})
    if check and (check["after"] == "fails" or (check["after"] == "not measured" != check["before"])):
        return [f"{name}: --verify does not show {runs['verify']['property']!r} holding after the fix: {runs['verify']}"]
    return []


def test_fixtures_run_before_and_after_fix(tmp_path: Path) -> None:
    # One test, not one per fixture: under xdist every worker would otherwise run the
    # whole set again for its share of the parameters.
    outcomes = _outcomes(tmp_path)
    text = _report(outcomes)
    if UPDATE:
        REPORT.write_text(text, encoding="utf-8")
    problems = [p for fixture in _runnable() for p in _problems(fixture, outcomes[_name(fixture)])]
    assert not problems, "\n".join(problems)
    assert REPORT.exists() and REPORT.read_text(encoding="utf-8") == text, (
        "fixtures/RUNS.md is stale: OPTAX_LINT_UPDATE_SNAPSHOTS=1 pytest tests/test_fixture_runs.py")


def _report(outcomes: dict[str, dict[str, dict]]) -> str:
    fixtures = _all_fixtures()
    families: dict[str, list[str]] = {}
    for name in outcomes:
        families.setdefault(name.split("/")[0], []).append(name)
    cannot = [(p, _header(p)[1]) for p in fixtures if _header(p)[0] == "cannot-run"]
    raised = [n for n, r in outcomes.items() if r["before"]["outcome"] != "ok"]
    repaired = [n for n in raised if outcomes[n]["unsafe"]["outcome"] == "ok"]
    repaired_safe = [n for n in raised if outcomes[n]["fix"]["outcome"] == "ok"]
    numeric = [n for n, r in outcomes.items() if "verify" in r]
    shown = [n for n in numeric if outcomes[n]["verify"]["after"] == "holds"]
    failed_before = [n for n in shown if outcomes[n]["verify"]["before"] == "fails"]
    lines = [
        "# Fixtures that run",
        "",
        "Generated by tests/test_fixture_runs.py (`OPTAX_LINT_UPDATE_SNAPSHOTS=1 pytest "
        "tests/test_fixture_runs.py`); checked on every run. Each runnable fixture ran on CPU "
        "(8 simulated devices) as written, after `--fix`, and after `--fix --unsafe-fixes`.",
        "",
        f"- fixtures: {len(fixtures)}; runnable (`# runs:`): {len(outcomes)} in {len(families)} rule "
        f"directories; cannot run (`# cannot-run:`): {len(cannot)}; not yet marked: "
        f"{len(fixtures) - len(outcomes) - len(cannot)}",
        f"- raise as written: {len(raised)}; repaired by `--fix`: {len(repaired_safe)}; "
        f"by `--fix --unsafe-fixes`: {len(repaired)}",
        f"- numeric defects (run as written; their rule has a property `--verify` measures): "
        f"{len(numeric)}; numeric property shown by `--verify` on the fixed file: {len(shown)} "
        f"(failing before the fix: {len(failed_before)}; holding before too, so the measured "
        f"property does not separate that defect: {len(shown) - len(failed_before)}); not measured "
        f"(a chain `--verify` cannot build): {len(numeric) - len(shown)}",
        f"- still failing after `--fix --unsafe-fixes`: {len(EXPECTED_FAILURES)}"
        + "".join(f"\n  - {n}: {why}" for n, why in EXPECTED_FAILURES.items()),
        "",
        "| fixture | as written | `--fix` | `--fix --unsafe-fixes` | numeric property shown by `--verify` (before → after the fixes) |",
        "|---|---|---|---|---|",
    ]
    for name in sorted(outcomes):
        runs = outcomes[name]
        check = runs.get("verify")
        shown_text = f"{check['property']}: {check['before']} → {check['after']}" if check else ""
        lines.append(f"| {name} | {runs['before']['outcome']} | {runs['fix']['outcome']} | {runs['unsafe']['outcome']} | {shown_text} |")
    if cannot:
        lines += ["", "Cannot run standalone:", ""]
        lines += [f"- {_name(p)}: {why}" for p, why in cannot]
    return "\n".join(lines) + "\n"
