"""What the optimizer minimises, where a library names it: a PPO-family learner
(PPO, GRPO, GSPO, DAPO, Dr. GRPO, RLOO; tunix's `GRPOLearner`, `PPOLearner`, ...), or
where the file writes it: PPO's clipped surrogate (`rlax.clipped_surrogate_pg_loss`,
the ratio clipped to [1 - eps, 1 + eps]).

Those objectives clip the probability ratio between the new and the old policy, so a
single update can move the policy only a bounded distance whatever the optimizer's
early moment estimates do: the early-step instability a warmup guards against is
bounded by the objective itself."""

from __future__ import annotations

import re
from typing import Optional

import libcst as cst

from optax_lint.facts.context.evidence import code_text

# Learner and trainer classes of clipped policy-gradient objectives.
_CLIPPED_POLICY_GRADIENT = re.compile(
    r"^(Agentic)?(PPO|GRPO|GSPO|DAPO|DrGRPO|RLOO)\w*(Learner|Trainer)$", re.IGNORECASE
)


def clipped_policy_gradient_learner(facts) -> Optional[cst.Call]:
    """The call that builds an imported PPO-family learner, or None. Only imported
    classes count: a file's own PPO has its own loss, which this does not read."""
    for name, records in facts.calls_by_name.items():
        if "." in name and _CLIPPED_POLICY_GRADIENT.match(name.rsplit(".", 1)[-1]):
            return records[0].node
    return None


def clipped_surrogate(facts) -> Optional[cst.Call]:
    """The call that clips the policy ratio in the file's own PPO loss, or None:
    `rlax.clipped_surrogate_pg_loss(...)`, or `jnp.clip(ratio, 1 - eps, 1 + eps)` (the
    bounds one minus and one plus the same expression)."""
    for name, records in facts.calls_by_name.items():
        last = name.rsplit(".", 1)[-1]
        if last == "clipped_surrogate_pg_loss":
            return records[0].node
        if last != "clip":
            continue
        for record in records:
            args = [a.value for a in record.node.args if a.keyword is None]
            if len(args) == 3 and _one_minus_plus(args[1], args[2]):
                return record.node
    return None


def _one(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, (cst.Integer, cst.Float)) and float(expr.value) == 1.0


def _one_minus_plus(low: cst.BaseExpression, high: cst.BaseExpression) -> bool:
    """`1 - eps` and `1 + eps` with the same `eps`."""
    if not (isinstance(low, cst.BinaryOperation) and isinstance(high, cst.BinaryOperation)):
        return False
    if not (isinstance(low.operator, cst.Subtract) and isinstance(high.operator, cst.Add)):
        return False
    if not (_one(low.left) and _one(high.left)):
        return False
    return code_text(low.right) == code_text(high.right)
