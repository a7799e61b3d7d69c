"""Gradient accumulation (the `grad_accum` field): `optax.MultiSteps(opt,
every_k_schedule=k)`, 1 when the file builds and uses its optimizer without it; and
the optimizers a file chooses from a config string, which nothing can follow."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from optax_lint.facts.context.evidence import Evidence, code_text, last_name, shortened
from optax_lint.facts.context.run_context import ContextValue
from optax_lint.facts.project.found import Found
from optax_lint.syntax.names import qualified_name
from optax_lint.syntax.values import Unknown, value_of


def _multisteps(inf: Evidence) -> list:
    return [r for name, records in inf.facts.calls_by_name.items() if name.rsplit(".", 1)[-1] == "MultiSteps" and name.startswith("optax") for r in records]


def infer_grad_accum(inf: Evidence, context) -> Optional[ContextValue]:
    records = _multisteps(inf)
    if not records:
        facts = inf.facts
        if facts.pipelines and (facts.update_sites or facts.consumers) and not not_analysable(facts):
            return ContextValue(1, "inferred", None, "medium", "no optax.MultiSteps in this file", locate=lambda: facts.display_path)
        inf.note("grad_accum", "no MultiSteps here, but the optimizer is not built and used in this file")
        return None
    values = []
    for record in records:
        expr = None
        for arg in record.node.args:
            if arg.keyword is not None and arg.keyword.value == "every_k_schedule":
                expr = arg.value
        positional = [a for a in record.node.args if a.keyword is None and not a.star]
        if expr is None and len(positional) > 1:
            expr = positional[1].value
        found = inf.ev.eval(expr, record.scope) if expr is not None else Unknown("no every_k_schedule")
        if not isinstance(found, Found) or not isinstance(found.value, int) or isinstance(found.value, bool) or found.value < 1:
            inf.note("grad_accum", f"MultiSteps every_k_schedule is not a known integer ({shortened(code_text(record.node))})")
            return None
        values.append((found, record))
    distinct = {f.value for f, _ in values}
    if len(distinct) != 1:
        inf.note("grad_accum", "several MultiSteps with different k: " + ", ".join(map(str, sorted(distinct))))
        return None
    found, record = values[0]
    detail = f"optax.MultiSteps(every_k_schedule={found.value})"
    if found.detail:
        detail += f" from {found.detail}"
    return ContextValue(found.value, "inferred", None, found.confidence, detail, locate=inf.here(record.node).location)


def not_analysable(facts) -> list[tuple[cst.CSTNode, str]]:
    """Optimizers chosen from a config string: getattr(optax, config.optimizer), ..."""
    out = []
    for record in facts.raw.calls:
        func = record.node.func
        args = [a for a in record.node.args if a.keyword is None]
        if isinstance(func, cst.Name) and func.value == "getattr" and len(args) >= 2:
            if qualified_name(args[0].value, record.scope) in ("optax", "optax.contrib", "optax.transforms"):
                if not isinstance(value_of(args[1].value, record.scope), str):
                    out.append((record.node, f"optimizer chosen from a config string: {code_text(record.node)}"))
        elif isinstance(func, cst.Call) and last_name(func.func) == "attrgetter" and args:
            if qualified_name(args[0].value, record.scope) in ("optax", "optax.contrib"):
                out.append((record.node, f"optimizer chosen from a config string: {code_text(record.node)}"))
    return out
