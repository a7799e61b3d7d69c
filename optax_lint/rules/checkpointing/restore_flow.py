"""Where a restored value goes: the flow of the name a restore binds (OPX502, OPX503)."""

from __future__ import annotations

from typing import Optional

from optax_lint.facts.checkpoints.flow import Flow
from optax_lint.facts.checkpoints.sites import CheckpointFacts, RestoreSite


def restore_flow(ckpt: CheckpointFacts, restore: RestoreSite) -> Optional[Flow]:
    name = restore.result
    if name is None:
        return None
    return Flow(ckpt, restore.record.scope, {name: ()}, origins={name: restore.record.statement})
