"""`optax-lint recommend --from train.py`: the run context read from a script (declared
or inferred, as `--show-context` shows it), and the script's optimizer compared with
the recommendation.

Both sides go through the same extraction layer: the script's pipeline and the
generated module's pipeline are reduced to chain elements and schedule facts, then
diffed, so "what the script has" and "what is recommended" are described alike.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Optional

import libcst as cst

from optax_lint.facts.module import ModuleFacts
from optax_lint.facts.pipelines.build import Pipeline, TxNode
from optax_lint.recommend.fmt import py_number
from optax_lint.recommend.request import Request, RequestError
from optax_lint.syntax.nodes import node_text
from optax_lint.syntax.values import Unknown

_INJECT = ("inject_hyperparams", "inject_stateful_hyperparams")
_DECAY_PARAMS = ("weight_decay", "weight_decay_rate")


def request_from_facts(facts: ModuleFacts, given: dict, path: str) -> Request:
    """A Request from the script's run context; values in `given` (the flags) win."""
    ctx = facts.run_context
    values: dict = {}
    sources: dict = {}

    def take(name: str, field: str) -> None:
        entry = ctx.get(field)
        if entry is not None and entry.value is not None:
            values[name] = entry.value
            sources[name] = entry.cite()

    take("arch", "arch")
    take("params", "params")
    take("steps", "steps")
    take("devices", "devices")
    take("fine_tune", "fine_tune")
    per_device, global_batch = ctx.get("batch_per_device"), ctx.get("batch_global")
    if per_device is not None:
        values["batch"], sources["batch"] = per_device.value, per_device.cite()
    elif global_batch is not None:
        devices = values.get("devices", 1)
        values["batch"] = max(1, global_batch.value // devices)
        sources["batch"] = f"{global_batch.cite()} / {devices} devices"
    inferred = ctx.get("fine_tune")
    if inferred is not None and given.get("fine_tune") and inferred.value is False:
        raise RequestError(f"--fine-tune contradicts {path}: it trains from scratch ({inferred.detail or 'nothing restored'}, "
                           f"{inferred.cite()}); drop --fine-tune, or declare `# optax-lint: context fine_tune=true` if it does load weights")
    if inferred is not None and given.get("from_scratch") and inferred.value is True:
        raise RequestError(f"--from-scratch contradicts {path}: it fine-tunes pretrained weights ({inferred.cite()})")
    if given.get("from_scratch"):
        values["fine_tune"] = False
    for name, value in given.items():
        if value is not None and value != () and value is not False:
            values[name] = value
            sources[name] = f"--{name.replace('_', '-')}"
    for name, field in (("arch", "arch"), ("params", "params"), ("steps", "steps"), ("batch", "batch_global")):
        if name not in values:
            note = ctx.note(field) or "not declared and not inferred"
            flag = f"--{name}"
            raise RequestError(f"{flag} is required: {path} does not settle it ({note}); pass {flag} or declare it with "
                               f"`# optax-lint: context {field}=...`")
    if values.get("arch") == "unknown":
        raise RequestError(f"--arch is required: the architecture inferred from {path} is unknown")
    values.setdefault("devices", 1)
    return Request(sources=sources, **values)


@dataclass
class Side:
    where: str
    elements: list[str]
    schedule: dict

    def to_dict(self) -> dict:
        return {"where": self.where, "chain": self.elements, "schedule": self.schedule}


def _value_text(node: TxNode, name: str, facts: ModuleFacts) -> str:
    expr = node.args.expr(name) if node.args is not None else None
    if expr is not None and facts.schedule_of(expr, node.scope) is not None:
        return "<schedule>"
    value = node.args.value(name) if node.args is not None else Unknown("")
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return repr(value)
    if isinstance(value, (int, float)):
        return py_number(value)
    return node_text(expr) if expr is not None else "?"


def _element(node: TxNode, facts: ModuleFacts) -> str:
    injected = node.short in _INJECT and node.children
    target = node.children[0] if injected else node
    if target.kind == "unknown":
        return f"<not analysable: {target.reason}>"
    names = list(target.args.by_name) if target.args is not None else []
    if target.kind == "alias" and target.args is not None and target.entry is not None:
        names += [p for p in _DECAY_PARAMS if p in target.entry.params and p not in names]
    args = []
    for name in names:
        text = _value_text(target, name, facts)
        given = target.args is not None and target.args.given(name)
        args.append(f"{name}={text}" + ("" if given else " (default)"))
    return f"{target.short}({', '.join(args)})" + (" [inject_hyperparams]" if injected else "")


def _elements(pipeline: Pipeline, facts: ModuleFacts) -> list[str]:
    root = pipeline.root
    children = root.children if root.short == "chain" else [root]
    return [_element(child, facts) for child in children]


_KINDS = {
    "constant": "constant", "warmup_constant": "warmup + constant", "warmup_cosine": "warmup + cosine decay",
    "cosine": "cosine decay", "linear": "linear decay", "exponential": "exponential decay", "step": "step decay",
    "onecycle": "one-cycle",
}


def _schedule(pipeline: Pipeline, facts: ModuleFacts) -> dict:
    sf = facts.schedule_analysis
    for use, schedule in sf.lr_schedules():
        if use.pipeline is not pipeline:
            continue
        shape = sf.shapes.shape(schedule)
        kind = _KINDS.get(shape.kind, shape.kind)
        if shape.kind == "join":
            warm = isinstance(shape.warmup, (int, float)) and shape.warmup > 0
            kind = ("warmup + " if warm else "") + {"constant": "constant", "linear": "linear decay", "cosine": "cosine decay"}.get(shape.decay, shape.decay)
        num = lambda v: _show(v)  # noqa: E731
        return {"kind": kind, "peak": num(shape.peak), "warmup": num(shape.warmup),
                "end": "never" if shape.end_step is None else num(shape.end_step)}
    for use in sf.lr_uses:
        if use.pipeline is pipeline:
            return {"kind": "constant" if use.constant else "?", "peak": use.constant_text or "?", "warmup": "0", "end": "never"}
    return {"kind": "?", "peak": "?", "warmup": "?", "end": "?"}


def _show(value) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "?"
    if float(value).is_integer() and abs(value) >= 1:
        return f"{int(value):,}"
    return py_number(value)


def full_optimizers(facts: ModuleFacts) -> list[Pipeline]:
    return [p for p in facts.pipelines if any(s.is_lr_step for seq in p.sequences() for s in seq)]


def side(facts: ModuleFacts, pipeline: Pipeline, where: str) -> Side:
    return Side(where, _elements(pipeline, facts), _schedule(pipeline, facts))


def comparison(script: Optional[Side], recommended: Side, path: str) -> list[str]:
    if script is None:
        return [f"{path}: no optimizer chain found to compare; the recommended chain is:"] + [f"+ {e}" for e in recommended.elements]
    lines = [f"Comparison with {script.where} (- the script, + the recommendation)"]
    diff = list(difflib.unified_diff(script.elements, recommended.elements, f"{script.where}", "recommended", lineterm="", n=max(len(script.elements), len(recommended.elements))))
    lines += diff if diff else ["  chain: the same elements"] + [f"  {e}" for e in script.elements]
    lines.append("")
    lines.append(f"  {'schedule':<14}{'script':<26}{'recommended':<26}")
    for key, label in (("kind", "kind"), ("peak", "peak LR"), ("warmup", "warmup steps"), ("end", "decay ends at")):
        a, b = script.schedule[key], recommended.schedule[key]
        mark = "" if a == b else "  <- differs"
        lines.append(f"  {label:<14}{a:<26}{b:<26}{mark}".rstrip())
    return lines


def module_facts(text: str, path: str, declared: Optional[dict] = None) -> ModuleFacts:
    return ModuleFacts(cst.parse_module(text), path, declared_context=declared or {}, text=text)
