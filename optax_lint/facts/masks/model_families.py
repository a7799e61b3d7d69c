"""Parameter layouts of model families imported from a package, known without reading
their code: Gemma (every generation) has bias-free projections and RMSNorm scales
applied as `x * (1 + scale)`, initialised at zero, so decaying all of its parameters
pulls the scales towards the identity norm and touches no bias."""

from __future__ import annotations

import re
from typing import Optional

import libcst as cst

# Classes whose layers are all bias-free with zero-centred norm scales.
_ZERO_CENTRED = re.compile(r"^(Flax)?Gemma\d*(ForCausalLM|Model|Transformer)?$")


def imported_zero_centred_model(facts) -> Optional[cst.Call]:
    """A call that builds such a model from a package (`gemma_lib.Gemma(config, ...)`,
    `Gemma.from_params(...)`), when the file builds no other model class of its own."""
    found = None
    for record in facts.raw.calls:
        name = facts.callee(record)
        if not name or "." not in name:
            continue  # a class of this file, or a name not imported
        parts = name.split(".")
        cls = parts[-2] if parts[-1] in ("from_params", "from_pretrained") and len(parts) > 2 else parts[-1]
        if _ZERO_CENTRED.match(cls):
            found = found or record.node
    return found
