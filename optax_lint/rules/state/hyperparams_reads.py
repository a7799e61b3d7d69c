"""What a `.hyperparams` read reaches in the state's layout (OPX602, OPX603)."""

from __future__ import annotations

from typing import Optional

from optax_lint.facts.state.access import HyperparamsAccess, Layout, StateFacts


class AccessVerdict:
    def __init__(self, access: HyperparamsAccess, layout: Layout, reached: Optional[Layout], error: str) -> None:
        self.access = access
        self.layout = layout
        self.reached = reached
        self.error = error


def judge(sf: StateFacts, access: HyperparamsAccess) -> Optional[tuple[str, AccessVerdict]]:
    """('ok' | 'wrong' | 'none', verdict) for a `.hyperparams` read; None when unknown."""
    held = access.held
    if held is None or access.guarded:
        return None
    layout = sf.layout(held.pipeline)
    reached, error = layout.follow(held.path)
    verdict = AccessVerdict(access, layout, reached, error)
    if reached is None and not error:
        return None
    if reached is not None and reached.kind in ("inject", "unknown"):
        return ("ok", verdict) if reached.kind == "inject" else None
    if layout.injects():
        return "wrong", verdict
    if layout.complete:
        return "none", verdict
    return None
