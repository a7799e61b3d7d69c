"""Where the catalogue keeps a rule silent: the policy fields of rules/OPXnnn.toml,
applied to the facts about the file (facts/context/purpose.py, facts/intended.py).

- `speaks_about` says what the rule judges, against the file's purpose (what the code
  is for, with its evidence):
  - "training-runs": advice about how to train (OPX108, OPX2xx, most of OPX3xx). Not
    run unless the code is a training run (an optimizer stepped repeatedly outside
    tests, benchmarks and toy demos) or the user declares its run context. When that
    the code trains is inferred from a weak signal (a name alone), or the model it
    cites is known by its class name alone, the finding is advice (info) and says
    what was inferred from where. Inside a file that trains, its test functions (and
    the module-level helpers only they call) are still tests: no finding there; nor in
    an optimizer that is only a parameter's default the module never runs with.
  - "optimizer-code" (the default, a defect): reported wherever the defect is real,
    except inside a test function that never steps an optimizer (it builds one only
    to look at its state).
  - "any-code": reported everywhere (API currency, meta findings).
- `silent_in_code_written_to_fail` (true unless a rule says otherwise): no finding
  inside `with self.assertRaises(...)` / `pytest.raises(...)` or the part of a `test*`
  function before such a block, where a test calls optax wrongly on purpose. OPX900
  sets it false: an internal error is reported wherever it happens.
- `silent_in_version_guards`: no finding under `if hasattr(...)`, in a `try:` whose
  handler catches AttributeError / ImportError, or in either branch of an `if` that
  checks the installed library's version or a signature, where code reaches for an
  API that may be gone, knowingly.
"""

from __future__ import annotations

from typing import Optional

from optax_lint.core.catalogue import RuleSpec
from optax_lint.core.diagnostics import Severity
from optax_lint.facts.context.purpose import test_or_benchmark_path

TRAINING_RUNS = "training-runs"
OPTIMIZER_CODE = "optimizer-code"


def silenced_in_file(spec: Optional[RuleSpec], facts) -> bool:
    """The rule is not run on this file: advice about training, and the file is no training run."""
    return spec is not None and spec.speaks_about == TRAINING_RUNS and not facts.purpose.trains


def judge_by_purpose(findings: list, facts, catalogue: dict[str, RuleSpec]) -> list:
    """Drops defect findings inside tests that never step an optimizer; makes advice
    that rests on a weak signal info, saying what was inferred from where."""
    if not findings:
        return findings
    out = []
    for finding in findings:
        spec = catalogue.get(finding.code)
        about = spec.speaks_about if spec is not None else None
        line = finding.span.line
        if about == OPTIMIZER_CODE and any(start <= line <= end for start, end in facts.unstepped_tests):
            continue
        if about == TRAINING_RUNS and any(start <= line <= end for start, end in facts.test_code):
            continue  # a test (or a helper only tests call) is no training run
        if about == TRAINING_RUNS and any(start <= line <= end for start, end in facts.placeholder_defaults):
            continue  # a library's default optimizer, which its callers replace
        if about == TRAINING_RUNS and any(start <= line <= end for start, end in facts.made_up_demos):
            continue  # a library's `__main__` demo on random data
        if about == TRAINING_RUNS and finding.severity is not Severity.INFO:
            weak = _weak_signal(finding, facts)
            if weak:
                finding.severity = Severity.INFO
                finding.message += f" (advice only: {weak})"
        out.append(finding)
    return out


def _weak_signal(finding, facts) -> str:
    purpose = facts.purpose
    if purpose.weak:
        return f"whether this is a training run rests on a weak signal: {purpose.evidence}" + (
            f" ({purpose.location})" if purpose.location else "")
    entry = facts.run_context.values.get("arch")  # only when a rule asked for it
    where = entry.location if entry is not None else None
    if not where or where not in finding.message:  # the finding does not rest on the model
        return ""
    if entry.by_name:
        return f"the model is known as a {entry.value} by its class name alone ({entry.detail})"
    if test_or_benchmark_path(where.rsplit(":", 1)[0]):
        return f"the model is defined in a test or benchmark ({where})"
    return ""


def drop_intended(findings: list, facts, catalogue: dict[str, RuleSpec]) -> list:
    """The findings that do not sit where their rule is silent: code written to fail,
    or version-guarded code."""
    if not findings or facts.positions is None:
        return findings
    raising, guarded = facts.intended_blocks
    if not raising and not guarded:
        return findings

    def inside(line: int, ranges) -> bool:
        return any(start <= line <= end for start, end in ranges)

    out = []
    for finding in findings:
        line = finding.span.line
        spec = catalogue.get(finding.code)
        if spec is not None and not spec.silent_in_code_written_to_fail:
            out.append(finding)
            continue
        if inside(line, raising):
            continue
        if spec is not None and spec.silent_in_version_guards and inside(line, guarded):
            continue
        out.append(finding)
    return out
