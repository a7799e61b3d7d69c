"""The protocol's numbers (rules/protocol.toml) and the warmup arithmetic that the
schedule rules and `optax-lint recommend` share, so both compute the same range."""

from __future__ import annotations

import math
from typing import Any, Optional

from optax_lint.core.catalogue import load_table


def table() -> dict:
    return load_table("protocol")


def warmup_value(key: str) -> Any:
    return table()["warmup"][key]


def warmup_range(steps: Optional[int], transformer: bool, lo_frac: float, hi_frac: float, tf_min: int) -> tuple[float, float]:
    """The protocol's warmup range: 1-5% of the run, at least 2000 steps on a Transformer."""
    lo = math.ceil(lo_frac * steps) if steps is not None else 0
    hi = math.floor(hi_frac * steps) if steps is not None else math.inf
    if transformer and tf_min > lo:
        lo = tf_min
        if hi < lo:
            hi = math.inf  # the two rules of thumb conflict on shorter runs: only the minimum holds
    return lo, hi


def suggested_warmup(steps: int, transformer: bool, lo_frac: Optional[float] = None, hi_frac: Optional[float] = None,
                     tf_min: Optional[int] = None) -> int:
    """A warmup inside the range: the target fraction (2%) of the run, raised to the
    range's low end, and never above the high end or the 10% cap of short runs, except
    that a Transformer's minimum wins when it still leaves most of the run to decay (so
    OPX301's fix never builds a warmup that OPX302 would report)."""
    lo_frac = warmup_value("min_fraction") if lo_frac is None else lo_frac
    hi_frac = warmup_value("max_fraction") if hi_frac is None else hi_frac
    tf_min = warmup_value("transformer_min_steps") if tf_min is None else tf_min
    lo, hi = warmup_range(steps, transformer, lo_frac, hi_frac, tf_min)
    target = round(warmup_value("target_fraction") * steps)
    cap = round(warmup_value("short_run_cap_fraction") * steps)
    warmup = min(max(target, lo), hi, cap)
    if lo <= steps / 4:
        warmup = max(warmup, lo)
    return max(1, int(warmup))
