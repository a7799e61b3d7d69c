"""Which parameters train: only low-rank adapters, when the file wraps its model with
LoRA (`apply_lora_to_model(model, ...)`, a project's `get_peft_model`, a `loraify_*`
helper; Hugging Face's peft wraps PyTorch modules and is not one) or its optimizer
trains only `nnx.LoRAParam` leaves (`nnx.Optimizer(model, tx, wrt=nnx.LoRAParam)`).

An adapter is a pair of bias-free low-rank matrices: advice about biases and norm
scales (OPX108) has nothing to act on when only adapters train."""

from __future__ import annotations

import re
from typing import Optional

import libcst as cst

from optax_lint.facts.context.evidence import code_text, last_name
from optax_lint.syntax.names import qualified_name

# Calls that return the model wrapped with trainable adapters, the base frozen.
_WRAPS = re.compile(r"^(apply_lora\w*|get_peft_model|\w*_lora_model|lora_wrap\w*|loraify\w*)$", re.IGNORECASE)
_ADAPTER_LEAVES = re.compile(r"(^|\.)LoRAParam$")


def adapters_only(facts) -> Optional[cst.Call]:
    """The call that makes only adapters trainable, or None."""
    for record in facts.raw.calls:
        call = record.node
        if _WRAPS.match(last_name(call.func)):
            qual = qualified_name(call.func, record.scope) or ""
            if qual.startswith("peft."):
                continue  # Hugging Face peft wraps PyTorch modules, never what optax trains
            return call
        for arg in call.args:
            if arg.keyword is not None and arg.keyword.value in ("wrt", "filter") and _ADAPTER_LEAVES.search(code_text(arg.value)):
                return call
    return None
