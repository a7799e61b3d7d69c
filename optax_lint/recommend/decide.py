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

from optax_lint.core.lr_scaling import Scaled, rule_reason, scale_learning_rate
from optax_lint.core.protocol_table import suggested_warmup, table, warmup_range
from optax_lint.recommend.fmt import count_text as _count
from optax_lint.recommend.fmt import py_number as _n
from optax_lint.recommend.request import Request


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
    base_lr: float  # tuned at the global batch scaling.base_batch
    peak_lr: float  # after batch scaling, the stability ceiling and the fine-tuning cap
    lr_cap: Optional[float]  # the fine-tuning cap, when it binds
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
    scaling: Optional[Scaled] = None  # how the peak follows the global batch, and the ceiling
    reference: str = ""  # where the base rate's batch comes from

    @property
    def plain_lr(self) -> bool:
        """The row's rate as it stands: one device, nothing scaled or capped, no user rate."""
        s = self.scaling
        return (not self.multi_device and s.ratio == 1 and not s.capped and self.lr_cap is None
                and self.request.base_lr is None)

    @property
    def linear_rule_lr(self) -> float:
        """What the protocol's pmap rule, lr x devices, would give."""
        return self.base_lr * self.request.devices

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
    return _Decider(request, protocol or table(), overridden or []).run()


class _Decider:
    """One pass over the protocol's steps; each method picks a table row and traces why."""

    def __init__(self, request: Request, t: dict, overridden: list[str]) -> None:
        self.req, self.t, self.th = request, t, t["thresholds"]
        self.trace: list[Decision] = []
        if overridden:
            self.trace.append(Decision("thresholds", "project config", ", ".join(overridden),
                                       "the lint rules' options set in the project config move the recommender's thresholds with them"))
        self.transformer = request.arch == "transformer"
        self.large_model = request.params > self.th["large_model_params"]

    def run(self) -> Recommendation:
        req = self.req
        row, optimizer, base_lr = self.optimizer()
        optimizer, decay, decay_in_chain = self.decay(row, optimizer)
        srow, kind, warmup_base, end_value, cap = self.schedule(optimizer)
        warmup, warmup_cap = self.devices(warmup_base, cap)
        scaling, peak, lr_cap = self.learning_rate(optimizer, base_lr)
        follows = self.decay_follows_schedule(row, optimizer, decay)
        clip_norm, clip_delta = self.gradient_processing(optimizer)
        momentum = row.get("momentum") if optimizer == "sgd" else None
        return Recommendation(req, row, optimizer, scaling.base_lr, peak, lr_cap, momentum, decay, decay_in_chain, srow, kind,
                              warmup_base, warmup, warmup_cap, end_value, clip_norm, clip_delta, self.trace, follows,
                              scaling, self.reference)

    # Step 1: the base optimizer (first matching row wins).
    def optimizer(self) -> tuple[dict, str, float]:
        req, th = self.req, self.th
        rows = {row["id"]: row for row in self.t["optimizer"]["rows"]}
        effective = req.effective_batch
        if effective > th["large_batch"]:
            row = rows["large-batch"]
            optimizer = row["cnn_optimizer"] if req.arch == "cnn" else row["memory_optimizer"] if req.memory_constrained else row["optimizer"]
            why = f"effective batch {effective:,} ({_batch_text(req)}) > {th['large_batch']:,}"
            if optimizer == "lars":
                why += "; lars: " + ("the trust-ratio optimizer for CNNs" if req.arch == "cnn" else "--memory-constrained, one moment instead of two")
        elif req.sparse_gradients:
            row = rows["sparse-gradients"]
            optimizer = row["optimizer"]
            why = req.source("sparse_gradients") + (" (also --memory-constrained: adafactor's factored state is smaller than SGD's momentum)"
                                                     if req.memory_constrained else "")
        elif req.memory_constrained:
            row, optimizer, why = rows["memory-constrained"], "sgd", req.source("memory_constrained")
        elif req.fine_tune:
            row, optimizer, why = rows["fine-tuning"], "adamw", f"fine-tuning ({req.source('fine_tune')})"
        elif self.large_model:
            row, optimizer = rows["large-transformer"], "adamw"
            why = f"{_count(req.params)} parameters > {_count(th['large_model_params'])}" + (
                "" if self.transformer else f" (the row is for Transformers; a {req.arch} this large gets the same decoupled decay)")
        else:
            row, optimizer, why = rows["default"], "adam", "no other row applies"
        base_lr = float(row["learning_rate"])
        self.reference_batch, self.reference = int(row["reference_batch"]), row["reference"]
        if row["id"] == "default" and self.transformer:
            base_lr = float(row["transformer_learning_rate"])
            self.reference_batch, self.reference = int(row["transformer_reference_batch"]), row["transformer_reference"]
            why += f"; lr {_n(base_lr)}, the protocol's worked Transformer example"
        if req.fine_tune and row["id"] != "fine-tuning":
            base_lr = float(rows["fine-tuning"]["learning_rate"])
            self.reference_batch, self.reference = int(rows["fine-tuning"]["reference_batch"]), rows["fine-tuning"]["reference"]
            why += f"; fine-tuning keeps lr {_n(base_lr)} (a low LR preserves pretrained features)"
        self.trace.append(Decision("optimizer", row["scenario"], _optimizer_text(optimizer, base_lr), f"{why}: {row['why']}"))
        return row, optimizer, base_lr

    # Step 3 (decay): the row's own, the large-model row, the overfitting row.
    def decay(self, row: dict, optimizer: str) -> tuple[str, Optional[float], bool]:
        req, wd = self.req, self.t["weight_decay"]
        decay, why = None, []
        if req.fine_tune:
            decay, why = wd["fine_tune"], ["the fine-tuning row"]
        elif "weight_decay" in row:
            decay, why = wd[row["weight_decay"]], [f"the {row['scenario']} row"]
        if self.large_model and not req.fine_tune and (decay is None or decay < wd["large_model"]):
            decay, why = wd["large_model"], [f"{_count(req.params)} parameters: the large-model row's decay"]
        if "overfitting" in req.issues and (decay is None or decay < wd["overfitting"]):
            decay, why = wd["overfitting"], ["--issue overfitting: the top of the protocol's 0.01-0.1 range"]
        if decay is None:
            return optimizer, None, False
        in_chain = False
        if optimizer == "adam":
            optimizer = "adamw"
            why.append("adam becomes adamw: decoupled decay, not L2 through Adam's moments")
        elif "decay_param" not in self.t["optimizers"][optimizer]:
            in_chain = True
            why.append(f"add_decayed_weights before {optimizer} (plain L2: {optimizer} has no decay of its own)")
            if decay > wd["coupled_max"]:
                decay = wd["coupled_max"]
                why.append(f"{_n(decay)}: coupled L2 shrinks weights by lr x wd per step, and {optimizer}'s LR is large")
        else:
            why.append(f"decoupled, {optimizer}'s own {self.t['optimizers'][optimizer]['decay_param']}")
        self.trace.append(Decision("weight decay", self._decay_row(row), f"weight_decay={_n(decay)}", "; ".join(why)))
        return optimizer, decay, in_chain

    def _decay_row(self, row: dict) -> str:
        return "Overfitting" if "overfitting" in self.req.issues else row["scenario"]

    # Step 2: the schedule by training length, and the warmup.
    def schedule(self, optimizer: str) -> tuple[dict, str, int, Optional[float], int]:
        req, t = self.req, self.t
        steps, short, long = req.steps, t["schedule"]["short_run_steps"], t["schedule"]["long_run_steps"]
        srows = {r["id"]: r for r in t["schedule"]["rows"]}
        warm = t["warmup"]
        tf_warmup = self.transformer and not req.fine_tune  # the fine-tuning row has no 2000-step minimum
        lo, hi = warmup_range(steps, tf_warmup, warm["min_fraction"], warm["max_fraction"], warm["transformer_min_steps"])
        cap = hi if hi != math.inf else max(1, round(warm["short_run_cap_fraction"] * steps))

        def suggested() -> int:
            return suggested_warmup(steps, self.transformer, warm["min_fraction"], warm["max_fraction"], warm["transformer_min_steps"])

        if req.fine_tune:
            srow, kind, why = srows["fine-tuning"], "warmup_constant", "fine-tuning"
            warmup = max(1, min(max(warm["fine_tune_steps"], lo), hi))
            warmup_why = f"the fine-tuning row's {warm['fine_tune_steps']} steps"
            if warmup != warm["fine_tune_steps"]:
                warmup_why += f", moved into 1-5% of the run ({lo:,}-{hi:,})"
        elif steps < short:
            srow = srows["short"]
            reasons = []
            if self.transformer and t["optimizers"][optimizer]["adaptive"]:
                reasons.append(f"{optimizer} is adaptive and the model is a Transformer")
            if "unstable-early" in req.issues:
                reasons.append("--issue unstable-early")
            if reasons:
                kind, warmup = "warmup_constant", suggested()
                why = f"{steps:,} steps < {short:,}, constant after a warmup because " + " and ".join(reasons)
                warmup_why = _warmup_why(steps, self.transformer, warmup, lo, hi, warm)
            else:
                kind, warmup, why, warmup_why = "constant", 0, f"{steps:,} steps < {short:,}", ""
        else:
            long_run = steps > long
            srow = srows["long" if long_run else "medium"]
            kind = "warmup_linear" if long_run else "warmup_cosine"
            why = f"{steps:,} steps " + (f"> {long:,}" if long_run else f"in {short:,}-{long:,}")
            warmup = suggested()
            warmup_why = _warmup_why(steps, self.transformer, warmup, lo, hi, warm)
        end_value = {"warmup_cosine": t["schedule"]["cosine_end_value"], "warmup_linear": t["schedule"]["linear_end_value"]}.get(kind)
        row_name = srow["length"] if kind != "warmup_constant" or req.fine_tune else f"{srow['length']} + warmup"
        self.trace.append(Decision("schedule", row_name, _schedule_text(kind), f"{why}: {srow['why']}"))
        if warmup:
            self.trace.append(Decision("warmup", "Warmup rule of thumb", f"{warmup:,} steps", warmup_why))
        return srow, kind, warmup, end_value, cap

    # Step 4: pmap: the effective batch and the warmup (the LR follows in learning_rate).
    def devices(self, warmup_base: int, cap: int) -> tuple[int, Optional[int]]:
        req, devices = self.req, self.req.devices
        if devices <= 1:
            return warmup_base, None
        warmup, warmup_cap = warmup_base, None
        w_text = ""
        if warmup_base:
            scaled = warmup_base * devices
            warmup_cap = max(cap, warmup_base)
            warmup = min(scaled, warmup_cap)
            w_text = f"; warmup {warmup_base:,} x {devices} = {scaled:,}" + (
                f", capped at {warmup:,} (the top of the warmup range)" if warmup < scaled else "")
        self.trace.append(Decision("multi-device", "pmap-based training", f"{devices} devices",
                                   f"effective batch {req.batch:,} x {devices} = {req.effective_batch:,}{w_text}; "
                                   "gradients averaged with lax.pmean"))
        return warmup, warmup_cap

    # Step 4: the peak LR, from the global batch its base rate was tuned at, never past the
    # stability ceiling (nor, when fine-tuning, the protocol's fine-tuning maximum).
    def learning_rate(self, optimizer: str, base_lr: float) -> tuple[Scaled, float, Optional[float]]:
        req = self.req
        user = req.base_lr is not None
        if user:
            base_lr, self.reference_batch = float(req.base_lr), int(req.base_batch)
            self.reference = f"tuned by you at a global batch of {self.reference_batch:,} ({req.source('base_lr')}, {req.source('base_batch')})"
        s = scale_learning_rate(base_lr, self.reference_batch, req.effective_batch, optimizer, req.arch, req.params, up_only=not user)
        peak, lr_cap = s.peak, None
        fine_cap = float(self.th["fine_tune_max_learning_rate"])
        if req.fine_tune and peak > fine_cap:
            lr_cap = peak = fine_cap
        if not (user or req.devices > 1 or s.ratio != 1 or s.capped or lr_cap is not None):
            return s, peak, lr_cap  # the row's rate as it stands: nothing to say
        ref = f"{s.base_batch:,}"
        why = [f"lr {_n(base_lr)} " + (f"was {self.reference}" if user else f"is tuned for global batches up to {ref}: {self.reference}")]
        if s.ratio == 1 and s.up_only:
            why.append(f"the global batch {s.global_batch:,} is not above it, so the rate stands")
        else:
            factor = f"({s.global_batch:,} / {ref})" + (" ** 0.5" if s.rule == "sqrt" else "")
            why.append(f"{rule_reason(optimizer)}: {_n(base_lr)} x {factor} = {_n(s.scaled)}")
        linear = base_lr * req.devices
        if req.devices > 1 and not math.isclose(linear, peak):
            why.append(f"the protocol's linear rule (lr x {req.devices} devices) would give {_n(linear)}")
        if s.ceiling is not None:
            where = f"the stability ceiling for Adam-family Transformers of {_count(req.params)} parameters: {s.ceiling.source}, {s.ceiling.how}"
            why.append(f"capped at {_n(s.ceiling.value)}, {where}" if s.capped else f"below {_n(s.ceiling.value)}, {where}")
        if lr_cap is not None:
            why.append(f"capped at {_n(lr_cap)}, the highest fine-tuning LR the protocol accepts")
        row = "Your tuned rate" if user else "Batch scaling"
        self.trace.append(Decision("learning rate", row, f"peak lr {_n(peak)}", "; ".join(why)))
        return s, peak, lr_cap

    def decay_follows_schedule(self, row: dict, optimizer: str, decay: Optional[float]) -> bool:
        """adafactor adds its decay after the LR step: pass the LR schedule x wd instead of wd."""
        if decay is None or self.t["optimizers"][optimizer].get("decay_scaled_by_lr") is not False:
            return False
        self.trace.append(Decision("weight decay", self._decay_row(row), f"weight_decay_rate = schedule x {_n(decay)}",
                                   f"{optimizer} adds its decay after the learning-rate step, so a plain {_n(decay)} would shrink every "
                                   f"weight by {decay:.0%} per step, warmup included: the LR schedule times {_n(decay)} gives adamw's "
                                   "per-step shrink (lr x wd) at every step"))
        return True

    # Step 3: gradient processing, and the known issues that change nothing in the chain.
    def gradient_processing(self, optimizer: str) -> tuple[Optional[float], Optional[float]]:
        req = self.req
        clip = self.t["clipping"]["arch"][req.arch]
        clip_norm = clip_delta = None
        if clip["always"] or "gradient-explosion" in req.issues:
            clip_norm = float(clip["max_norm"])
            because = "always for Transformers" if clip["always"] else "--issue gradient-explosion"
            self.trace.append(Decision("gradient processing", "Gradient explosion", f"clip_by_global_norm({_n(clip_norm)}) first",
                                       f"{because}; {clip['note']}"))
        if "gradient-noise" in req.issues:
            clip_delta = float(self.t["clipping"]["gradient_noise_max_delta"])
            self.trace.append(Decision("gradient processing", "Gradient noise", f"clip({_n(clip_delta)})",
                                       "--issue gradient-noise: element-wise clip of each gradient"))
        if "slow-convergence" in req.issues:
            why = (f"{optimizer} is kept because of --memory-constrained; Adam-family optimizers converge faster if memory allows"
                   if req.memory_constrained and optimizer in ("sgd", "lars") else f"{optimizer} is the protocol's choice here; check the LR first (see monitoring)")
            self.trace.append(Decision("known issue", "Slow convergence", "no change to the chain", why))
        return clip_norm, clip_delta


def settings_overrides(settings) -> tuple[dict, list[str]]:
    """The protocol table with the rule options the project config sets (OPX205
    max_batch = 4096 moves thresholds.large_batch), and a description of each.
    RequestError when two options of the same threshold disagree."""
    from optax_lint.core.catalogue import load_catalogue
    from optax_lint.recommend.request import RequestError

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
