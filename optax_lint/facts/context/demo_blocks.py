"""`__main__` blocks that only demonstrate a module: a trainer library whose
`if __name__ == "__main__":` hands its own `train()` arrays of random numbers (or a
synthetic set) to show the pieces fit together.

The file is a training library, so its purpose reads as a training run; but the
optimizer the block builds trains nothing that matters, and advice about how to train
(a schedule's length, a warmup) has nothing to say about it. Defect rules still judge
the block: only the training-run rules ask this. A block that loads data, or hands the
training call anything not drawn at random, is a run and keeps the advice.
"""

from __future__ import annotations

import libcst as cst

from optax_lint.facts.context.purpose import fed_made_up_data, handed_an_optimizer


def made_up_demos(facts) -> tuple[tuple[int, int], ...]:
    """Line ranges (first, last) of the module's `__main__` blocks whose training call is
    handed data drawn at random or generated once (see purpose.fed_made_up_data)."""
    out = []
    for stmt in facts.raw.module.body:
        if not _main_guard(stmt):
            continue
        handed = [r for r in facts.raw.calls if r.scope is facts.raw.module_scope and facts.raw.statement_inside(r.statement, stmt)
                  and handed_an_optimizer(facts, r)]
        if handed and all(fed_made_up_data(facts, r.node) for r in handed):
            span = facts.source_positions.span(stmt)
            out.append((span.line, span.end_line))
    return tuple(out)


def _main_guard(stmt: cst.CSTNode) -> bool:
    """`if __name__ == "__main__":` (either side of the comparison)."""
    if not isinstance(stmt, cst.If) or not isinstance(stmt.test, cst.Comparison) or len(stmt.test.comparisons) != 1:
        return False
    target = stmt.test.comparisons[0]
    if not isinstance(target.operator, cst.Equal):
        return False
    sides = (stmt.test.left, target.comparator)
    names = [s.value for s in sides if isinstance(s, cst.Name)]
    strings = [s.evaluated_value for s in sides if isinstance(s, cst.SimpleString)]
    return names == ["__name__"] and strings == ["__main__"]
