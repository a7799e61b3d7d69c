"""Optimizers that train a head, not the model the file's architecture names: a value
head beside a policy Transformer, handed to its own builder with a head config
(`load_head_train_state_from_config(model_config=LinearHeadConfig(...),
optim_getter=value_head_optim_getter)`). Advice about the Transformer's training
(clipping, warmup, norm-scale decay) is not about that optimizer."""

from __future__ import annotations

import re

import libcst as cst

from optax_lint.facts.context.evidence import last_name

# A head's config class, or a builder that says it builds a head.
_HEAD = re.compile(r"(^|_)head(_|$)|Head(Config)?$", re.IGNORECASE)


def trains_a_head(facts, pipeline) -> bool:
    """The pipeline (by its name, or the getter function returning it) is handed to a
    call that builds a head: the callee's name says head, or an argument is a head
    config (`LinearHeadConfig(...)`)."""
    handles = {n for n in (pipeline.name, pipeline.function.name if pipeline.function is not None else None) if n}
    if not handles:
        return False
    for record in facts.raw.calls:
        call = record.node
        if not any(isinstance(arg.value, cst.Name) and arg.value.value in handles for arg in call.args):
            continue
        if _HEAD.search(last_name(call.func)):
            return True
        if any(isinstance(arg.value, cst.Call) and _HEAD.search(last_name(arg.value.func)) for arg in call.args):
            return True
    return False
