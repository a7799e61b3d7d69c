"""Where the catalogue keeps a rule silent: the policy fields of rules/OPXnnn.toml,
applied to the facts about the file (facts/file_role.py, facts/intended.py).

- `silent_in_tests`: the rule is advice about a training run; a test file is not one,
  unless the user declares its run context (command line, pragma or config). The
  rule is not run there.
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
from optax_lint.facts.file_role import is_test_file


def silenced_in_file(spec: Optional[RuleSpec], facts) -> bool:
    """The rule is not run on this file."""
    return spec is not None and spec.silent_in_tests and is_test_file(facts.path) and not facts.declares_context


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
