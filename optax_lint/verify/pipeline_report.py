"""What `--verify` reports for one pipeline (or one weight-decay mask): where it is,
whether it could be verified, and the measured properties."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from optax_lint.core.diagnostics import Span

# The property each check measures, as the worker names it in its results.
_PROPERTY_OF_CHECK = {
    "clip": "a gradient of global norm 1e6 reaches the optimizer clipped",
    "decay": "with zero gradients, weights shrink",
    "descent": "steps on a convex quadratic",
    "multisteps": "inner schedule advances once per real update",
    "params": "update without params",
    "hyperparams": "hyperparams sit where the code reads them",
}


@dataclass
class PipelineReport:
    path: str
    name: str  # how the pipeline is spelled: `tx = optax.chain(...)` -> "tx"
    span: Span
    verifiable: bool
    reason: str = ""  # why not verifiable
    reason_span: Optional[Span] = None
    results: list[dict] = field(default_factory=list)
    schedules: dict = field(default_factory=dict)
    error: str = ""
    assumed: list[str] = field(default_factory=list)  # "args.lr = 0.0003, the default of --lr at train.py:9"

    def property(self, check: str) -> Optional[dict]:
        wanted = _PROPERTY_OF_CHECK[check]
        for result in self.results:
            if result["property"].endswith(wanted) or result["property"] == wanted:
                return result
        return None

    def to_dict(self) -> dict:
        return {
            "path": self.path,
            "pipeline": self.name,
            **self.span.to_dict(),
            "verifiable": self.verifiable,
            "reason": self.reason or None,
            "results": self.results,
            "schedules": self.schedules,
            "error": self.error or None,
            "assumed": self.assumed,
        }
