"""The decision protocol run forwards: a checked Request in, a Recommendation out,
with one trace entry per table saying which row was chosen and why.

Every number comes from rules/protocol.toml, the table the lint rules read their
thresholds from; nothing here imports jax.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from typing import Optional

from ..protocol_table import suggested_warmup, table, warmup_range
from .fmt import count_text as _count, py_number as _n
from .request import Request


@dataclass(frozen=True)
class Decision:
    table: str  # "optimizer", "schedule", ...
    row: str  # the protocol row, as the protocol names it
    choice: str  # what was chosen
    why: str


@dataclass
class Recommendation:
    request: Request
    row: dict  # the optimizer row
    optimizer: str  # key of the optimizers table: adam, adamw, sgd, lamb, lars, adafactor
    base_lr: float  # per device
    peak_lr: float  # after pmap scaling (and the fine-tuning cap)
    lr_cap: Optional[float]
    momentum: Optional[float]
    weight_decay: Optional[float]
    decay_in_chain: bool  # add_decayed_weights before the optimizer (sgd), else the optimizer's own decay
    schedule_row: dict
    schedule_kind: str  # constant | warmup_constant | warmup_cosine | warmup_linear
    warmup_base: int  # before device scaling (0: no warmup)
    warmup: int
    warmup_cap: Optional[int]  # the range's top, when device scaling hits it
    end_value: Optional[float]
    clip_norm: Optional[float]
    clip_delta: Optional[float]
    trace: list[Decision] = field(default_factory=list)
    decay_follows_schedule: bool = False  # the decay is passed as the LR schedule x WEIGHT_DECAY (adafactor)

    @property
    def optimizer_info(self) -> dict:
        return table()["optimizers"][self.optimizer]

    @property
    def multi_device(self) -> bool:
        return self.request.devices > 1

    @property
    def chain_names(self) -> list[str]:
        """The chain's elements in order (the optimizer last)."""
        names = []
        if self.clip_norm is not None:
            names.append("clip_by_global_norm")
        if self.clip_delta is not None:
            names.append("clip")
        if self.weight_decay is not None and self.decay_in_chain:
            names.append("add_decayed_weights")
        return names + [self.optimizer]

    @property
    def lr_index(self) -> int:
        """Where the injected optimizer's state sits in the chain's state tuple."""
        return len(self.chain_names) - 1

    def schedule_value(self, step: int) -> float:
        """The learning rate at `step`, by optax's formulas (checked against optax by --verify)."""
        peak, w, total = self.peak_lr, self.warmup, self.request.steps
        if self.schedule_kind == "constant":
            return peak
        if step < w:
            return peak * step / w
        if self.schedule_kind == "warmup_constant":
            return peak
        t = min(step - w, total - w)
        span = total - w
        end = self.end_value or 0.0
        if self.schedule_kind == "warmup_cosine":
            alpha = end / peak if peak else 0.0
            return peak * ((1 - alpha) * 0.5 * (1 + math.cos(math.pi * t / span)) + alpha)
        return peak * (1 - t / span) + end * (t / span)  # warmup_linear: exactly `end` at the last step

    def sample_steps(self) -> list[int]:
        total, w = self.request.steps, self.warmup
        points = [0]
        if w:
            points += [w // 2, w]
        if self.schedule_kind in ("warmup_cosine", "warmup_linear"):
            points += [w + (total - w) // 2]
        points.append(total)
        return sorted(set(points))


def decide(request: Request, protocol: Optional[dict] = None, overridden: Optional[list[str]] = None) -> Recommendation:
    """`protocol`: the table with the project's rule options applied (see settings_overrides)."""
    t = protocol or table()
    th = t["thresholds"]
    trace: list[Decision] = []
    if overridden:
        trace.append(Decision("thresholds", "project config", ", ".join(overridden),
                              "the lint rules' options set in the project config move the recommender's thresholds with them"))
    arch, steps, devices = request.arch, request.steps, request.devices
    transformer = arch == "transformer"
    effective = request.effective_batch
    large_batch = effective > th["large_batch"]
    large_model = request.params > th["large_model_params"]
    rows = {row["id"]: row for row in t["optimizer"]["rows"]}

    # Step 1: the base optimizer (first matching row wins).
    if large_batch:
        row = rows["large-batch"]
        optimizer = row["cnn_optimizer"] if arch == "cnn" else row["memory_optimizer"] if request.memory_constrained else row["optimizer"]
        why = f"effective batch {effective:,} ({_batch_text(request)}) > {th['large_batch']:,}"
        if optimizer == "lars":
            why += "; lars: " + ("the trust-ratio optimizer for CNNs" if arch == "cnn" else "--memory-constrained, one moment instead of two")
    elif request.sparse_gradients:
        row = rows["sparse-gradients"]
        optimizer = row["optimizer"]
        why = f"{request.source('sparse_gradients')}" + (" (also --memory-constrained: adafactor's factored state is smaller than SGD's momentum)" if request.memory_constrained else "")
    elif request.memory_constrained:
        row, optimizer = rows["memory-constrained"], "sgd"
        why = request.source("memory_constrained")
    elif request.fine_tune:
        row, optimizer = rows["fine-tuning"], "adamw"
        why = f"fine-tuning ({request.source('fine_tune')})"
    elif large_model:
        row, optimizer = rows["large-transformer"], "adamw"
        why = f"{_count(request.params)} parameters > {_count(th['large_model_params'])}" + ("" if transformer else f" (the row is for Transformers; a {arch} this large gets the same decoupled decay)")
    else:
        row, optimizer = rows["default"], "adam"
        why = "no other row applies"
    base_lr = float(row["learning_rate"])
    if row["id"] == "default" and transformer:
        base_lr = float(row["transformer_learning_rate"])
        why += f"; lr {_n(base_lr)}, the protocol's worked Transformer example"
    if request.fine_tune and row["id"] != "fine-tuning":
        base_lr = float(rows["fine-tuning"]["learning_rate"])
        why += f"; fine-tuning keeps lr {_n(base_lr)} (a low LR preserves pretrained features)"
    trace.append(Decision("optimizer", row["scenario"], _optimizer_text(optimizer, base_lr), f"{why}: {row['why']}"))

    # Step 3 (decay): the row's own, the large-model row, the overfitting row.
    wd_table = t["weight_decay"]
    decay, decay_why = None, []
    if request.fine_tune:
        decay, decay_why = wd_table["fine_tune"], ["the fine-tuning row"]
    elif "weight_decay" in row:
        decay, decay_why = wd_table[row["weight_decay"]], [f"the {row['scenario']} row"]
    if large_model and not request.fine_tune and (decay is None or decay < wd_table["large_model"]):
        decay, decay_why = wd_table["large_model"], [f"{_count(request.params)} parameters: the large-model row's decay"]
    if "overfitting" in request.issues and (decay is None or decay < wd_table["overfitting"]):
        decay, decay_why = wd_table["overfitting"], ["--issue overfitting: the top of the protocol's 0.01-0.1 range"]
    decay_in_chain = False
    if decay is not None:
        if optimizer == "adam":
            optimizer = "adamw"
            decay_why.append("adam becomes adamw: decoupled decay, not L2 through Adam's moments")
        elif "decay_param" not in t["optimizers"][optimizer]:
            decay_in_chain = True
            decay_why.append(f"add_decayed_weights before {optimizer} (plain L2: {optimizer} has no decay of its own)")
            if decay > wd_table["coupled_max"]:
                decay = wd_table["coupled_max"]
                decay_why.append(f"{_n(decay)}: coupled L2 shrinks weights by lr x wd per step, and {optimizer}'s LR is large")
        else:
            decay_why.append(f"decoupled, {optimizer}'s own {t['optimizers'][optimizer]['decay_param']}")
        trace.append(Decision("weight decay", "Overfitting" if "overfitting" in request.issues else row["scenario"], f"weight_decay={_n(decay)}", "; ".join(decay_why)))
    momentum = row.get("momentum") if optimizer == "sgd" else None

    # Step 2: the schedule by training length, and the warmup.
    srows = {r["id"]: r for r in t["schedule"]["rows"]}
    warm = t["warmup"]
    adaptive = t["optimizers"][optimizer]["adaptive"]
    lo, hi = warmup_range(steps, transformer and not request.fine_tune, warm["min_fraction"], warm["max_fraction"], warm["transformer_min_steps"])
    cap = hi if hi != math.inf else max(1, round(warm["short_run_cap_fraction"] * steps))
    if request.fine_tune:
        srow, kind = srows["fine-tuning"], "warmup_constant"
        warmup_base = max(1, min(max(warm["fine_tune_steps"], lo), hi))
        swhy = "fine-tuning"
        wwhy = f"the fine-tuning row's {warm['fine_tune_steps']} steps"
        if warmup_base != warm["fine_tune_steps"]:
            wwhy += f", moved into 1-5% of the run ({lo:,}-{hi:,})"
    elif steps < t["schedule"]["short_run_steps"]:
        srow = srows["short"]
        reasons = []
        if transformer and adaptive:
            reasons.append(f"{optimizer} is adaptive and the model is a Transformer")
        if "unstable-early" in request.issues:
            reasons.append("--issue unstable-early")
        if reasons:
            kind = "warmup_constant"
            warmup_base = suggested_warmup(steps, transformer, warm["min_fraction"], warm["max_fraction"], warm["transformer_min_steps"])
            swhy = f"{steps:,} steps < {t['schedule']['short_run_steps']:,}, constant after a warmup because " + " and ".join(reasons)
            wwhy = _warmup_why(steps, transformer, warmup_base, lo, hi, warm)
        else:
            kind, warmup_base, swhy, wwhy = "constant", 0, f"{steps:,} steps < {t['schedule']['short_run_steps']:,}", ""
    else:
        long_run = steps > t["schedule"]["long_run_steps"]
        srow = srows["long" if long_run else "medium"]
        kind = "warmup_linear" if long_run else "warmup_cosine"
        swhy = f"{steps:,} steps " + (f"> {t['schedule']['long_run_steps']:,}" if long_run else f"in {t['schedule']['short_run_steps']:,}-{t['schedule']['long_run_steps']:,}")
        warmup_base = suggested_warmup(steps, transformer, warm["min_fraction"], warm["max_fraction"], warm["transformer_min_steps"])
        wwhy = _warmup_why(steps, transformer, warmup_base, lo, hi, warm)
    end_value = {"warmup_cosine": t["schedule"]["cosine_end_value"], "warmup_linear": t["schedule"]["linear_end_value"]}.get(kind)
    trace.append(Decision("schedule", srow["length"] if kind != "warmup_constant" or request.fine_tune else f"{srow['length']} + warmup", _schedule_text(kind), f"{swhy}: {srow['why']}"))

    if warmup_base:
        trace.append(Decision("warmup", "Warmup rule of thumb", f"{warmup_base:,} steps", wwhy))

    # Step 4: pmap scaling.
    peak, lr_cap, warmup, warmup_cap = base_lr, None, warmup_base, None
    if devices > 1:
        peak = base_lr * devices
        lr_text = f"lr {_n(base_lr)} x {devices} = {_n(peak)} (linear scaling rule)"
        if request.fine_tune and peak > th["fine_tune_max_learning_rate"]:
            lr_cap = float(th["fine_tune_max_learning_rate"])
            peak = lr_cap
            lr_text += f", capped at {_n(lr_cap)}, the highest fine-tuning LR the protocol accepts"
        w_text = ""
        if warmup_base:
            scaled = warmup_base * devices
            warmup = min(scaled, max(cap, warmup_base))
            warmup_cap = max(cap, warmup_base)
            w_text = f"; warmup {warmup_base:,} x {devices} = {scaled:,}" + (f", capped at {warmup:,} (the top of the warmup range)" if warmup < scaled else "")
        trace.append(Decision("multi-device", "pmap-based training", f"{devices} devices",
                              f"effective batch {request.batch:,} x {devices} = {effective:,}; {lr_text}{w_text}; gradients averaged with lax.pmean"))

    decay_follows_schedule = decay is not None and t["optimizers"][optimizer].get("decay_scaled_by_lr") is False
    if decay_follows_schedule:
        trace.append(Decision("weight decay", "Overfitting" if "overfitting" in request.issues else row["scenario"],
                              f"weight_decay_rate = schedule x {_n(decay)}",
                              f"{optimizer} adds its decay after the learning-rate step, so a plain {_n(decay)} would shrink every "
                              f"weight by {decay:.0%} per step, warmup included: the LR schedule times {_n(decay)} gives adamw's "
                              "per-step shrink (lr x wd) at every step"))

    # Step 3: gradient processing.
    clip = t["clipping"]["arch"][arch]
    clip_norm = None
    if clip["always"] or "gradient-explosion" in request.issues:
        clip_norm = float(clip["max_norm"])
        because = "always for Transformers" if clip["always"] else "--issue gradient-explosion"
        trace.append(Decision("gradient processing", "Gradient explosion", f"clip_by_global_norm({_n(clip_norm)}) first", f"{because}; {clip['note']}"))
    clip_delta = None
    if "gradient-noise" in request.issues:
        clip_delta = float(t["clipping"]["gradient_noise_max_delta"])
        trace.append(Decision("gradient processing", "Gradient noise", f"clip({_n(clip_delta)})", "--issue gradient-noise: element-wise clip of each gradient"))
    if "slow-convergence" in request.issues:
        trace.append(Decision("known issue", "Slow convergence", "no change to the chain",
                              "sgd is kept because of --memory-constrained; Adam-family optimizers converge faster if memory allows" if optimizer in ("sgd", "lars")
                              else f"{optimizer} is already adaptive; check the LR first (see monitoring)"))
    return Recommendation(request, row, optimizer, base_lr, peak, lr_cap, momentum, decay, decay_in_chain, srow, kind,
                          warmup_base, warmup, warmup_cap, end_value, clip_norm, clip_delta, trace, decay_follows_schedule)


def settings_overrides(settings) -> tuple[dict, list[str]]:
    """The protocol table with the rule options the project config sets (OPX205
    max_batch = 4096 moves thresholds.large_batch), and a description of each.
    RequestError when two options of the same threshold disagree."""
    from ..catalogue import load_catalogue
    from .request import RequestError

    chosen: dict[str, tuple] = {}
    for code, spec in load_catalogue().items():
        for name, option in spec.options.items():
            if not option.default_from.startswith("protocol:"):
                continue
            value = settings.rule_options.get(code, {}).get(name, option.default)
            if value == option.default:
                continue
            path = option.default_from.split(":", 1)[1]
            if path in chosen and chosen[path][0] != value:
                raise RequestError(f"config: {chosen[path][1]} = {chosen[path][0]!r} and {code}.{name} = {value!r} set the same "
                                   f"protocol threshold ({path}) to different values")
            chosen[path] = (value, f"{code}.{name}")
    if not chosen:
        return table(), []
    protocol = copy.deepcopy(table())
    for path, (value, _) in chosen.items():
        *parents, last = path.split(".")
        node = protocol
        for key in parents:
            node = node[key]
        node[last] = value
    return protocol, [f"{path} = {value!r} ({where})" for path, (value, where) in sorted(chosen.items())]


def _warmup_why(steps: int, transformer: bool, warmup: int, lo, hi, warm: dict) -> str:
    target = round(warm["target_fraction"] * steps)
    text = f"{warm['target_fraction']:.0%} of {steps:,} = {target:,}"
    if hi == math.inf:
        text += f"; the Transformer minimum {lo:,} exceeds 5% of this short run, so it is capped at {warm['short_run_cap_fraction']:.0%}: {warmup:,}"
    elif warmup != target:
        text += f", moved into the range {lo:,}-{hi:,}" + (f" (at least {warm['transformer_min_steps']:,} for Transformers)" if transformer else "") + f": {warmup:,}"
    else:
        text += f" (range {lo:,}-{hi:,})"
    return text


def _batch_text(request: Request) -> str:
    return f"{request.batch:,} x {request.devices} devices" if request.devices > 1 else f"batch {request.batch:,}"


def _optimizer_text(optimizer: str, lr: float) -> str:
    return f"optax.{optimizer}(lr={_n(lr)})"


def _schedule_text(kind: str) -> str:
    return {
        "constant": "constant",
        "warmup_constant": "warmup + constant",
        "warmup_cosine": "warmup + cosine decay",
        "warmup_linear": "warmup + linear decay",
    }[kind]
