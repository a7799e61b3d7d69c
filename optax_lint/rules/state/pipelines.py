"""The pipeline an update call runs, and whether a transformation is built under a
condition."""

from __future__ import annotations

from typing import Optional

from optax_lint.facts.pipelines.build import Pipeline, TxNode
from optax_lint.facts.state.access import StateFacts


def under_condition(node: TxNode) -> bool:
    current: Optional[TxNode] = node
    while current is not None:
        if current.conditional:
            return True
        current = current.parent
    return False


def update_pipeline(sf: StateFacts, site) -> Optional[Pipeline]:
    if site.receiver is None:
        return None
    return sf.tx_of(site.receiver, site.record.scope) or site.pipeline
