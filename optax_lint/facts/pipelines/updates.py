"""Update sites: where gradients become parameter changes.

`tx.update(grads, state[, params])` linked back to the pipeline `tx` was built from,
`optax.apply_updates(params, updates)`, flax `state.apply_gradients(grads=...)`,
nnx `optimizer.update(model, grads)`, and the consumers that receive a pipeline
(`TrainState.create(tx=...)`, `nnx.Optimizer(model, tx, ...)`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import libcst as cst

from optax_lint.syntax.arguments import call_arg, named_arg
from optax_lint.syntax.names import lookup
from optax_lint.syntax.walker import CallRecord, Scope

TRAIN_STATE_CREATE = (
    "flax.training.train_state.TrainState.create",
)
NNX_OPTIMIZER = ("flax.nnx.Optimizer", "flax.nnx.optimizer.Optimizer", "flax.nnx.ModelAndOptimizer")
# Progress bars whose `update(task, advance=1)` / `update(n, ...)` takes two arguments,
# like an optimizer's update: their receivers are no optimizer.
PROGRESS_BARS = frozenset({
    "rich.progress.Progress", "tqdm.tqdm", "tqdm.auto.tqdm", "tqdm.notebook.tqdm", "tqdm.rich.tqdm",
    "tqdm.std.tqdm", "enlighten.Counter", "enlighten.get_manager",
})


def is_progress_bar(facts, receiver: cst.BaseExpression, scope: Scope) -> bool:
    """`progress` bound (only) to `Progress()` / `tqdm(...)`, by assignment or `with ... as`."""
    if not isinstance(receiver, cst.Name):
        return False
    _, bindings = lookup(receiver.value, scope)
    return bool(bindings) and all(
        b.kind in ("assign", "with") and isinstance(b.value, cst.Call)
        and facts.canonical(b.value.func, b.scope) in PROGRESS_BARS
        for b in bindings
    )


@dataclass(eq=False)
class UpdateSite:
    kind: str  # update | apply_gradients | apply_updates | nnx_update
    record: CallRecord
    receiver: Optional[cst.BaseExpression]  # `tx` in tx.update(...)
    pipeline: object = None  # Pipeline, when the receiver could be linked

    @property
    def call(self) -> cst.Call:
        return self.record.node

    def arg(self, position: int, keyword: str) -> Optional[cst.Arg]:
        return call_arg(self.call, position, keyword)

    def has_keyword(self, keyword: str) -> bool:
        return named_arg(self.call, keyword) is not None

    @property
    def has_star(self) -> bool:
        return any(a.star for a in self.call.args)


@dataclass(eq=False)
class Consumer:
    kind: str  # train_state | nnx_optimizer
    record: CallRecord
    tx_arg: Optional[cst.Arg]
    pipeline: object = None
