"""`--fix --verify`: a fix to a pipeline is written only if the property its rule
protects fails before the fix and holds after it, measured under JAX."""

from __future__ import annotations

from typing import Callable

import libcst as cst

from optax_lint.core.diagnostics import Finding
from optax_lint.facts.module import ModuleFacts
from optax_lint.syntax.positions import Positions
from optax_lint.verify.report import verify_module

# Rules whose fixes change a pipeline, and the measured property each protects.
GATED = {"OPX101": "clip", "OPX102": "decay", "OPX103": "decay"}


def _contains(outer, inner) -> bool:
    return (outer.line, outer.column) <= (inner.line, inner.column) and (inner.end_line, inner.end_column) <= (outer.end_line, outer.end_column)


def _pipeline_index(facts: ModuleFacts, finding: Finding) -> int | None:
    positions = Positions(facts.module)
    for index, pipeline in enumerate(facts.pipelines):
        if _contains(positions.span(pipeline.call), finding.span):
            return index
    return None


def make_gate(worker, path: str) -> Callable[[Finding, cst.Module, cst.Module], tuple[bool, str]]:
    def gate(finding: Finding, before: cst.Module, after: cst.Module) -> tuple[bool, str]:
        check = GATED.get(finding.code)
        if check is None:
            return True, ""
        old = ModuleFacts(before, path)
        new = ModuleFacts(after, path)
        index = _pipeline_index(old, finding)
        if index is None or len(old.pipelines) != len(new.pipelines):
            return False, "could not find the same pipeline before and after the fix"
        was = verify_module(old, worker, only={index})[0]
        now = verify_module(new, worker, only={index})[0]
        if not was.verifiable:
            return True, f"not verifiable ({was.reason}); fix applied on static grounds"
        before_p, after_p = was.property(check), now.property(check)
        if before_p is None or after_p is None:
            return False, f"verification failed: {was.error or now.error or 'property not measured'}"
        summary = f"{after_p['property']}: before {before_p['measured']}; after {after_p['measured']}"
        if before_p.get("ok") is False and after_p.get("ok") is True:
            return True, summary
        return False, "fix refused by verification: " + summary

    return gate
