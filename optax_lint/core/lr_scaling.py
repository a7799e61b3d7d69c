"""How a learning rate follows the global batch, and where it must stop.

The rule (rules/protocol.toml [lr_scaling]): a rate is tied to the global batch it was
tuned for; SGD-like optimizers scale linearly with the batch, adaptive ones by its
square root. The ceiling ([lr_ceiling]): for Adam-family optimizers on Transformers, the
peak rates GPT-3 published by model size. `optax-lint recommend` and OPX403's fix
(`device_scaled_code`) both decide with these functions, so they cannot disagree.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Optional

from optax_lint.core.protocol_table import table


def scaling_rule(optimizer: str) -> str:
    """'linear' or 'sqrt' for an optax optimizer name (unknown names: 'sqrt', the smaller increase)."""
    return "linear" if optimizer in table()["lr_scaling"]["linear"] else "sqrt"


def rule_reason(optimizer: str) -> str:
    """Why the rule applies, for the output."""
    known = optimizer in table()["lr_scaling"]["linear"] + table()["lr_scaling"]["sqrt"]
    if scaling_rule(optimizer) == "linear":
        return (f"{optimizer} is SGD-like: its step is the averaged gradient times the rate, so a batch k times larger "
                "takes k times the rate to move as far per example (linear scaling, Goyal et al. 2017)")
    if not known:
        return f"{optimizer} is not in the protocol's table: square-root scaling, the smaller of the two increases"
    return (f"{optimizer} is adaptive: it divides by the gradient's running scale, so a larger batch only lowers the "
            "noise, as 1/sqrt(batch) (square-root scaling, Malladi et al. 2022)")


def _round_down(value: float, digits: int = 3) -> float:
    """`value` to `digits` significant digits, never above it (a ceiling printed is a ceiling kept)."""
    exponent = math.floor(math.log10(value)) - (digits - 1)
    return round(math.floor(value / 10.0**exponent + 1e-9) * 10.0**exponent, -exponent)


@dataclass(frozen=True)
class Ceiling:
    value: float  # the exact interpolation rounded down to 3 significant digits
    how: str  # "interpolated in log space between 6.7B (1.2e-4) and 13B (1e-4)", "the 125M (6e-4) row, held below it", ...
    source: str  # the citation


def lr_ceiling(optimizer: str, arch: Optional[str], params: Optional[float]) -> Optional[Ceiling]:
    """The published stability ceiling for this optimizer and model, or None where none applies."""
    data = table()["lr_ceiling"]
    if optimizer not in data["optimizers"] or arch not in data["archs"] or not params:
        return None
    rows = sorted(data["rows"], key=lambda r: r["params"])

    def name(row: dict) -> str:
        return f"{_count(row['params'])} ({_rate(row['peak_learning_rate'])})"

    for row in rows:
        if params == row["params"]:
            return Ceiling(row["peak_learning_rate"], f"the {name(row)} row", data["source"])
    if params < rows[0]["params"]:
        return Ceiling(rows[0]["peak_learning_rate"], f"the {name(rows[0])} row, held below it", data["source"])
    if params > rows[-1]["params"]:
        return Ceiling(rows[-1]["peak_learning_rate"], f"the {name(rows[-1])} row, held above it", data["source"])
    lo, hi = next((a, b) for a, b in zip(rows, rows[1:]) if a["params"] < params < b["params"])
    t = math.log(params / lo["params"]) / math.log(hi["params"] / lo["params"])
    exact = math.exp((1 - t) * math.log(lo["peak_learning_rate"]) + t * math.log(hi["peak_learning_rate"]))
    return Ceiling(_round_down(exact), f"interpolated in log space between {name(lo)} and {name(hi)}", data["source"])


@dataclass(frozen=True)
class Scaled:
    base_lr: float
    base_batch: int  # the global batch base_lr was tuned for
    global_batch: int
    rule: str  # linear | sqrt
    up_only: bool  # a row's reference batch: the rate holds below it and is scaled only above it
    scaled: float  # after the batch rule
    ceiling: Optional[Ceiling]
    peak: float  # min(scaled, ceiling)

    @property
    def ratio(self) -> float:
        ratio = self.global_batch / self.base_batch
        return max(ratio, 1.0) if self.up_only else ratio

    @property
    def capped(self) -> bool:
        return self.ceiling is not None and self.ceiling.value < self.scaled


def scale_learning_rate(base_lr: float, base_batch: int, global_batch: int, optimizer: str, arch: Optional[str] = None,
                        params: Optional[float] = None, up_only: bool = False) -> Scaled:
    """`base_lr`, tuned at a global batch of `base_batch`, for a global batch of
    `global_batch`, never above the ceiling. Computed in the order the generated code
    writes it (`base * ratio ** 0.5`), so both give the same float."""
    rule = scaling_rule(optimizer)
    ratio = global_batch / base_batch
    if up_only:
        ratio = max(ratio, 1.0)
    scaled = base_lr * ratio if rule == "linear" else base_lr * ratio**0.5
    ceiling = lr_ceiling(optimizer, arch, params)
    peak = min(scaled, ceiling.value) if ceiling is not None else scaled
    return Scaled(base_lr, base_batch, global_batch, rule, up_only, scaled, ceiling, peak)


def device_scaled_code(lr_code: str, optimizer: str, device_count_code: str = "jax.device_count()",
                       arch: Optional[str] = None, params: Optional[float] = None) -> str:
    """The text OPX403's fix puts in place of a learning rate tuned on one device's batch,
    when the per-device batch stays fixed (the global batch grows with the device count):
    `lr * jax.device_count()` for SGD-like optimizers, `lr * jax.device_count() ** 0.5`
    for adaptive ones, inside `min(..., ceiling)` when a ceiling applies."""
    factor = device_count_code if scaling_rule(optimizer) == "linear" else f"{device_count_code} ** 0.5"
    if not re.fullmatch(r"[\w.]+(e[-+]?\d+)?", lr_code):  # a name or a number stays bare
        lr_code = f"({lr_code})"
    text = f"{lr_code} * {factor}"
    ceiling = lr_ceiling(optimizer, arch, params)
    return f"min({text}, {_rate(ceiling.value)})" if ceiling is not None else text


def _rate(value: float) -> str:
    mantissa, exponent = f"{value:.6e}".split("e")
    return f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)}"


def _count(value: float) -> str:
    for size, suffix in ((1e9, "B"), (1e6, "M")):
        if value >= size:
            return f"{value / size:.3g}{suffix}"
    return f"{value:,}"
