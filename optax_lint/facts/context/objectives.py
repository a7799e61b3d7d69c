"""What the optimizer minimises, where a library names it: a PPO-family learner
(PPO, GRPO, GSPO, DAPO, Dr. GRPO, RLOO; tunix's `GRPOLearner`, `PPOLearner`, ...).

Those objectives clip the probability ratio between the new and the old policy, so a
single update can move the policy only a bounded distance whatever the optimizer's
early moment estimates do: the early-step instability a warmup guards against is
bounded by the objective itself."""

from __future__ import annotations

import re
from typing import Optional

import libcst as cst

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
