"""What the user asks `optax-lint recommend` for, and the checks on it.

Every error names the flag to change: a recommendation built on a contradiction
would be confidently wrong, so it is refused (exit 2) instead.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Optional

from optax_lint.facts.context.run_context import ARCHS, ContextError, parse_value
from optax_lint.recommend.fmt import count_text

ISSUES = ("gradient-explosion", "gradient-noise", "slow-convergence", "overfitting", "unstable-early")
RECOMMEND_ARCHS = tuple(a for a in ARCHS if a != "unknown")


class RequestError(ValueError):
    """A missing or contradictory input; `str()` names the flag."""


@dataclass(frozen=True)
class Request:
    arch: Optional[str] = None
    params: Optional[int] = None
    steps: Optional[int] = None
    batch: Optional[int] = None  # per device
    devices: int = 1
    dataset_size: Optional[int] = None
    fine_tune: bool = False
    from_scratch: bool = False
    issues: tuple[str, ...] = ()
    memory_constrained: bool = False
    sparse_gradients: bool = False
    base_lr: Optional[float] = None  # the user's tuned rate ...
    base_batch: Optional[int] = None  # ... and the global batch it was tuned at
    device_memory_gb: float = 80.0  # what one device holds, for the memory verdict
    # where each value came from, for the trace (`--arch`, `train.py:12`, ...)
    sources: dict = field(default_factory=dict, compare=False)

    @property
    def effective_batch(self) -> int:
        return int(self.batch) * int(self.devices)

    def source(self, name: str) -> str:
        return self.sources.get(name, f"--{name.replace('_', '-')}")


def parse_count(flag: str, raw) -> Optional[int]:
    """`1.3e9`, `1.3B`, `50_000`, `50k` -> int; RequestError naming the flag otherwise."""
    if raw is None:
        return None
    try:
        return parse_value("params", raw)  # the context parser: positive whole numbers with suffixes
    except ContextError:
        raise RequestError(f"{flag}: expected a positive whole number (e.g. 50000, 5e4, 50k, 1.3B), got {raw!r}") from None


def parse_positive(flag: str, raw, example: str) -> Optional[float]:
    """`3e-4`, `80` -> float; RequestError naming the flag otherwise."""
    if raw is None:
        return None
    try:
        value = float(str(raw).strip())
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise RequestError(f"{flag}: expected a positive number (e.g. {example}), got {raw!r}")
    return value


def parse_arch(raw: Optional[str]) -> Optional[str]:
    if raw is None:
        return None
    try:
        arch = parse_value("arch", raw)
    except ContextError:
        arch = None
    if arch not in RECOMMEND_ARCHS:
        raise RequestError(f"--arch: expected one of {', '.join(RECOMMEND_ARCHS)}, got {raw!r}")
    return arch


def validate(request: Request) -> Request:
    """The request, checked: RequestError names the flag that is missing or contradicts another."""
    missing = [
        (flag, why)
        for name, flag, why in (
            ("arch", "--arch", "the architecture decides the clip value and the Transformer warmup minimum"),
            ("params", "--params", "the parameter count decides the large-model row and the optimizer-state memory"),
            ("steps", "--steps", "the training length decides the schedule and the warmup"),
            ("batch", "--batch", "the per-device batch decides LAMB above 8192 and the effective batch under pmap"),
        )
        if getattr(request, name) is None
    ]
    if missing:
        flag, why = missing[0]
        others = f" (also missing: {', '.join(f for f, _ in missing[1:])})" if len(missing) > 1 else ""
        raise RequestError(f"{flag} is required: {why}{others}")
    if request.devices is None or request.devices < 1:
        raise RequestError(f"--devices: expected a positive device count, got {request.devices!r}")
    for issue in request.issues:
        if issue not in ISSUES:
            raise RequestError(f"--issue: expected one of {', '.join(ISSUES)}, got {issue!r}")
    if (request.base_lr is None) != (request.base_batch is None):
        given, missing_flag = ("--base-lr", "--base-batch") if request.base_batch is None else ("--base-batch", "--base-lr")
        raise RequestError(f"{given} needs {missing_flag}: a learning rate is tied to the global batch it was tuned at "
                           "(--base-lr 3e-4 --base-batch 512)")
    if request.device_memory_gb is None or request.device_memory_gb <= 0:
        raise RequestError(f"--device-memory: expected a positive number of GB, got {request.device_memory_gb!r}")
    if request.fine_tune and request.from_scratch:
        raise RequestError(
            f"--fine-tune contradicts --from-scratch: fine-tuning starts from pretrained weights, and a "
            f"{count_text(request.params)}-parameter model trained from scratch needs the from-scratch rows "
            "(drop one of the two flags)"
        )
    if request.dataset_size is not None and request.effective_batch > request.dataset_size:
        raise RequestError(
            f"--batch {request.batch} x --devices {request.devices} = {request.effective_batch} examples per step "
            f"is larger than --dataset-size {request.dataset_size}"
        )
    return request
