"""The recommendation as text (for people) and as JSON (for tools)."""

from __future__ import annotations

import json
import textwrap
from typing import Optional

from optax_lint.core.catalogue import PROTOCOL_DOC
from optax_lint.recommend import advice, codegen
from optax_lint.recommend.decide import Recommendation
from optax_lint.recommend.fmt import arch_phrase, count_text
from optax_lint.recommend.fmt import py_number as _n
from optax_lint.recommend.memory import SHARDING_SNIPPET, Memory, size_text

# The docs/protocol.md section behind each table.
ANCHORS = {"optimizer": "optimizer", "weight decay": "weight-decay", "schedule": "learning-rate-schedule", "warmup": "warmup",
           "multi-device": "multi-device-training", "learning rate": "learning-rate-and-batch-size",
           "gradient processing": "gradient-clipping"}


def _heading(title: str) -> list[str]:
    return ["", title, "-" * len(title)]


def _indent(text: str, prefix: str = "    ") -> list[str]:
    return [prefix + line if line else "" for line in text.rstrip("\n").split("\n")]


def _wrap(text: str, indent: str = "  ", hang: str = "    ") -> list[str]:
    return textwrap.wrap(text, width=100, initial_indent=indent, subsequent_indent=hang, break_on_hyphens=False) or [indent]


def summary_line(rec: Recommendation) -> str:
    req = rec.request
    batch = f"batch {req.batch:,}" + (f" per device x {req.devices} devices" if rec.multi_device else "")
    extras = [e for e, on in (("fine-tuning", req.fine_tune), ("memory-constrained", req.memory_constrained),
                              ("sparse gradients", req.sparse_gradients)) if on] + [f"issue: {i}" for i in req.issues]
    return f"{arch_phrase(req.arch)}, {count_text(req.params)} parameters, {req.steps:,} steps, {batch}" + (f" ({', '.join(extras)})" if extras else "")


def schedule_rows(rec: Recommendation) -> list[tuple[int, float, str]]:
    labels = {0: "start"}
    if rec.warmup:
        labels[rec.warmup // 2] = "mid-warmup"
        labels[rec.warmup] = "end of warmup (peak)"
    total = rec.request.steps
    if rec.schedule_kind in ("warmup_cosine", "warmup_linear"):
        labels[rec.warmup + (total - rec.warmup) // 2] = "mid-decay"
    labels.setdefault(total, "last step")
    return [(step, rec.schedule_value(step), labels.get(step, "")) for step in rec.sample_steps()]


def schedule_text(rec: Recommendation) -> list[str]:
    req = rec.request
    lines = []
    kind = {"constant": "constant", "warmup_constant": "linear warmup, then constant",
            "warmup_cosine": "linear warmup, then cosine decay", "warmup_linear": "linear warmup, then linear decay"}[rec.schedule_kind]
    lines.append(f"  kind: {kind}; total steps {req.steps:,}")
    if rec.warmup:
        pct = rec.warmup / req.steps
        lines.append(f"  warmup: {rec.warmup:,} steps ({pct:.1%} of the run), 0 -> {_n(rec.peak_lr)}")
    if rec.schedule_kind in ("warmup_cosine", "warmup_linear"):
        lines.append(f"  decay: {req.steps - rec.warmup:,} steps, {_n(rec.peak_lr)} -> {_n(rec.end_value)} at step {req.steps:,}")
    if rec.multi_device:
        linear = rec.linear_rule_lr
        lines.append(f"  pmap: effective batch {req.batch:,} x {req.devices} = {req.effective_batch:,}; peak LR {_n(rec.peak_lr)}"
                     + (f" (the linear rule, {_n(rec.base_lr)} x {req.devices} devices, would give {_n(linear)})"
                        if abs(linear - rec.peak_lr) > 1e-12 * linear else ""))
    lines.append("")
    lines.append(f"  {'step':>10}  {'learning rate':<14} ")
    for step, value, label in schedule_rows(rec):
        lines.append(f"  {step:>10,}  {_n(float(f'{value:.5g}')):<14} {label}".rstrip())
    return lines


def memory_text(rec: Recommendation, mem: Memory) -> list[str]:
    """The verdict with its sum, and what fits when it does not (with the sharding code)."""
    verdict = "fits" if mem.fits else "does not fit"
    lines = _wrap(f"Memory per device: {mem.arithmetic}: {verdict} {mem.device} (set with --device-memory; activations "
                  "and XLA's workspace come on top)" + ("." if mem.fits else ". What fits instead:"))
    for alt in mem.alternatives:
        lines += _wrap(f"- {alt.what}: {alt.arithmetic} = {size_text(alt.per_device)} per device: "
                       f"{'fits' if alt.fits(mem.device_bytes) else 'does not fit'}.", indent="    ", hang="      ")
    if mem.alternatives and rec.multi_device:
        lines += ["", "    Sharding the state (NUM_DEVICES as in the code above; params and opt_state built as there):", ""]
        lines += _indent(SHARDING_SNIPPET, "      ")
    return lines


def text(rec: Recommendation, verification: Optional[list[str]] = None) -> str:
    out = [f"Recommendation for {summary_line(rec)}"]
    out += _heading("Decision trace")
    for d in rec.trace:
        out += _wrap(f"{d.table}: row \"{d.row}\" -> {d.choice}. Why: {d.why}.")
    out += _heading("Code")
    out += _indent(codegen.configuration(rec))
    out += ["", "  Full runnable module: --output-format python -o optimizer_config.py"]
    out += _heading("Schedule")
    out += schedule_text(rec)
    exp = advice.expected(rec)
    mem: Memory = exp["memory"]
    out += _heading("Expected behaviour")
    out += _wrap(f"Convergence: {exp['convergence']}." + (f" The run covers {exp['epochs']:.1f} epochs of the data." if exp["epochs"] else ""))
    out += _wrap(f"Memory: optimizer state = {mem.formula} = {size_text(mem.state_bytes)}; "
                 f"fp32 parameters {size_text(mem.param_bytes)} and gradients {size_text(mem.grad_bytes)}"
                 + ("; under pmap every device holds a full copy of all three." if mem.per_device else "."))
    out += memory_text(rec, mem)
    for risk in exp["risks"]:
        out += _wrap(f"Risk: {risk}.")
    out += _heading("Monitoring")
    for what, trouble in advice.monitoring(rec):
        out += _wrap(f"- {what}: trouble is {trouble}.", hang="    ")
    out += _heading("If training diverges, change first")
    for i, step in enumerate(advice.divergence(rec), 1):
        out += _wrap(f"{i}. {step}", hang="     ")
    out += _heading("Checkpointing (params and opt_state together)")
    out += _indent(advice.checkpoint_snippet(rec))
    out += ["", f"Why each rule of the protocol holds: {PROTOCOL_DOC}"]
    if verification:
        out += _heading("Verification (the chain built and stepped under JAX)")
        out += verification
    return "\n".join(out) + "\n"


def to_dict(rec: Recommendation) -> dict:
    req = rec.request
    exp = advice.expected(rec)
    return {
        "request": {
            "arch": req.arch, "params": req.params, "steps": req.steps, "batch_per_device": req.batch,
            "devices": req.devices, "effective_batch": req.effective_batch, "dataset_size": req.dataset_size,
            "fine_tune": req.fine_tune, "issues": list(req.issues), "memory_constrained": req.memory_constrained,
            "sparse_gradients": req.sparse_gradients, "base_lr": req.base_lr, "base_batch": req.base_batch,
            "device_memory_gb": req.device_memory_gb, "sources": dict(req.sources),
        },
        "trace": [{"table": d.table, "row": d.row, "choice": d.choice, "why": d.why,
                   "protocol": f"{PROTOCOL_DOC}#{ANCHORS[d.table]}" if d.table in ANCHORS else None} for d in rec.trace],
        "optimizer": {
            "row": rec.row["id"], "name": rec.optimizer, "chain": rec.chain_names, "base_learning_rate": rec.base_lr,
            "peak_learning_rate": rec.peak_lr, "weight_decay": rec.weight_decay, "momentum": rec.momentum,
            "clip_by_global_norm": rec.clip_norm, "clip": rec.clip_delta, "learning_rate_state_index": rec.lr_index,
        },
        "learning_rate": learning_rate_dict(rec),
        "schedule": {
            "row": rec.schedule_row["id"], "kind": rec.schedule_kind, "total_steps": req.steps,
            "warmup_steps": rec.warmup, "warmup_steps_before_device_scaling": rec.warmup_base,
            "decay_steps": req.steps if rec.schedule_kind in ("warmup_cosine", "warmup_linear") else None,
            "end_value": rec.end_value,
            "samples": [{"step": s, "learning_rate": v} for s, v, _ in schedule_rows(rec)],
        },
        "code": codegen.configuration(rec),
        "expected": {"convergence": exp["convergence"], "epochs": exp["epochs"], "memory": exp["memory"].to_dict(), "risks": exp["risks"]},
        "monitoring": [{"watch": w, "trouble": t} for w, t in advice.monitoring(rec)],
        "divergence": advice.divergence(rec),
        "checkpoint": advice.checkpoint_snippet(rec),
    }


def learning_rate_dict(rec: Recommendation) -> dict:
    s = rec.scaling
    ceiling = s.ceiling
    return {
        "base": s.base_lr, "reference_batch": s.base_batch, "reference": rec.reference, "global_batch": s.global_batch,
        "rule": s.rule, "scaled_only_above_reference": s.up_only, "scaled": s.scaled,
        "linear_rule": rec.linear_rule_lr if rec.multi_device else None,
        "ceiling": {"value": ceiling.value, "how": ceiling.how, "source": ceiling.source, "binding": s.capped} if ceiling else None,
        "fine_tune_cap": rec.lr_cap, "peak": rec.peak_lr,
    }


def json_text(rec: Recommendation, extra: Optional[dict] = None) -> str:
    return json.dumps({**to_dict(rec), **(extra or {})}, indent=2) + "\n"
