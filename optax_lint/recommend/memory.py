"""Whether params, gradients and optimizer state fit on one device, with the arithmetic,
and what fits when they do not: the optimizer state (and params) sharded across the
devices with jit and NamedSharding, optax.adafactor's factored moments, or a bf16
first moment (mu_dtype). Bytes per parameter come from rules/protocol.toml [memory].

Only these three are counted: activations and XLA's workspace come on top, so a
verdict of "fits" is a lower bound on what the run needs.
"""

from __future__ import annotations

import math
import textwrap
from dataclasses import dataclass, field
from typing import Optional

from optax_lint.core.protocol_table import table
from optax_lint.recommend.decide import Recommendation
from optax_lint.recommend.fmt import count_text


def size_text(nbytes: float) -> str:
    for size, unit in ((1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "kB")):
        if nbytes >= size:
            return f"{nbytes / size:.3g} {unit}"
    return f"{nbytes:.0f} B"


def device_text(gb: float) -> str:
    """'an 80 GB accelerator', 'a 16 GB accelerator'."""
    number = f"{gb:g}"
    article = "an" if number.startswith("8") or number.split(".")[0] in ("11", "18") else "a"
    return f"{article} {number} GB accelerator"


@dataclass(frozen=True)
class Alternative:
    what: str
    arithmetic: str
    per_device: float  # bytes

    def fits(self, device_bytes: float) -> bool:
        return self.per_device <= device_bytes

    def to_dict(self, device_bytes: float) -> dict:
        return {"what": self.what, "arithmetic": self.arithmetic, "per_device_bytes": self.per_device,
                "fits": self.fits(device_bytes)}


@dataclass(frozen=True)
class Memory:
    formula: str
    state_bytes: float
    param_bytes: float
    grad_bytes: float
    per_device: bool  # replicated under pmap: every device holds all of it
    device_bytes: float = 80e9
    device: str = "an 80 GB accelerator"
    arithmetic: str = ""  # the per-parameter sum behind `total`
    alternatives: list[Alternative] = field(default_factory=list)  # only when it does not fit

    @property
    def total(self) -> float:
        return self.param_bytes + self.grad_bytes + self.state_bytes

    @property
    def fits(self) -> bool:
        return self.total <= self.device_bytes

    def to_dict(self) -> dict:
        return {"formula": self.formula, "optimizer_state_bytes": self.state_bytes, "param_bytes": self.param_bytes,
                "gradient_bytes": self.grad_bytes, "replicated_per_device": self.per_device,
                "per_device_bytes": self.total, "arithmetic": self.arithmetic, "device_memory_bytes": self.device_bytes,
                "fits": self.fits, "alternatives": [a.to_dict(self.device_bytes) for a in self.alternatives]}


def _factored_values(n: float, side: int) -> float:
    return 2 * n / side


def memory(rec: Recommendation) -> Memory:
    mem = table()["memory"]
    info = rec.optimizer_info
    n = rec.request.params
    moment = mem["moment_bytes"]
    if info.get("factored"):
        side = info["assumed_matrix_side"]
        state = _factored_values(n, side) * moment
        formula = (f"factored: (rows + cols) x {moment} B per matrix; for {side}x{side} matrices that is "
                   f"2/{side} of the parameters: 2 x {count_text(n)} / {side} x {moment} B")
        state_per_param = f"{2 * moment / side:.3g} B ({rec.optimizer}'s factored moments)"
    else:
        state = info["state_moments"] * n * moment
        formula = f"{info['state_moments']} x {count_text(n)} parameters x {moment} B ({info['state']})"
        state_per_param = f"{info['state_moments'] * moment} B ({rec.optimizer}'s state)"
    params, grads = n * mem["param_bytes"], n * mem["grad_bytes"]
    gb = float(rec.request.device_memory_gb)
    arithmetic = (f"params {mem['param_bytes']} B + grads {mem['grad_bytes']} B + {state_per_param} per parameter, "
                  f"x {count_text(n)} = {size_text(params + grads + state)}")
    result = Memory(formula, state, params, grads, rec.multi_device, gb * 1e9, device_text(gb), arithmetic)
    if result.fits:
        return result
    return Memory(formula, state, params, grads, rec.multi_device, gb * 1e9, device_text(gb), arithmetic,
                  alternatives(rec, params, grads, state, gb * 1e9))


def alternatives(rec: Recommendation, params: float, grads: float, state: float, device_bytes: float) -> list[Alternative]:
    """What holds params, grads and optimizer state within one device, each with its sum."""
    mem, n, devices = table()["memory"], rec.request.params, rec.request.devices
    total = params + grads + state
    s = size_text
    out = []
    if devices > 1:
        out.append(Alternative(
            f"shard the optimizer state across the {devices} devices (jax.jit with NamedSharding)",
            f"{s(params)} params + {s(grads)} grads + {s(state)} state / {devices}", params + grads + state / devices))
        out.append(Alternative(
            f"shard params, grads and optimizer state across the {devices} devices (jax.jit with NamedSharding)",
            f"({s(params)} + {s(grads)} + {s(state)}) / {devices}", total / devices))
    else:
        needed = math.ceil(total / device_bytes)
        out.append(Alternative(
            f"shard params, grads and optimizer state across {needed} or more devices (jax.jit with NamedSharding)",
            f"({s(params)} + {s(grads)} + {s(state)}) / {needed}", total / needed))
    if rec.optimizer != "adafactor":
        info = table()["optimizers"]["adafactor"]
        factored = _factored_values(n, info["assumed_matrix_side"]) * mem["moment_bytes"]
        out.append(Alternative(
            "optax.adafactor: factored second moments and no first moment (its learning rates differ from "
            f"{rec.optimizer}'s: it scales steps by each parameter's RMS)",
            f"{s(params)} params + {s(grads)} grads + {s(factored)} state", params + grads + factored))
    if rec.optimizer_info.get("mu_dtype"):
        per_param = mem["low_precision_moment_bytes"] + mem["moment_bytes"] * (rec.optimizer_info["state_moments"] - 1)
        low = n * per_param
        what = (f"a bf16 first moment, optax.{rec.optimizer}(..., mu_dtype=jnp.bfloat16) (under inject_hyperparams, "
                'add "mu_dtype" to static_args)')
        parts = " + ".join([str(mem["low_precision_moment_bytes"])] + [str(mem["moment_bytes"])] * (rec.optimizer_info["state_moments"] - 1))
        out.append(Alternative(what, f"{s(params)} params + {s(grads)} grads + ({parts}) B x {count_text(n)} state", params + grads + low))
        if devices > 1 and params + grads + low > device_bytes:
            out.append(Alternative(f"{what}, with that state sharded across the {devices} devices",
                                   f"{s(params)} params + {s(grads)} grads + {s(low)} state / {devices}", params + grads + low / devices))
    return out


SHARDING_SNIPPET = '''\
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P

mesh = jax.make_mesh((NUM_DEVICES,), ("data",), axis_types=(AxisType.Auto,))


def spread(x):
    """Split an array along its first axis the device count divides; replicate the rest."""
    axis = next((i for i, n in enumerate(x.shape) if n % NUM_DEVICES == 0), None)
    return NamedSharding(mesh, P(*("data" if i == axis else None for i in range(x.ndim))))


params = jax.device_put(params, jax.tree.map(spread, params))  # leave out to shard only the optimizer state
state_shardings = jax.tree.map(spread, jax.eval_shape(optimizer.init, params))
opt_state = jax.jit(optimizer.init, out_shardings=state_shardings)(params)
# The step: jax.jit(train_step, donate_argnums=(0, 1)) without pmap or pmean, on batches
# placed with NamedSharding(mesh, P("data")); the mean over the global batch needs no collective.
'''


def warning_lines(rec: Recommendation, mem: Optional[Memory] = None) -> list[str]:
    """A comment for the generated code when it cannot fit (nothing when it does)."""
    mem = mem or memory(rec)
    if mem.fits:
        return []
    where = "on every device under pmap" if rec.multi_device else "on the device"
    text = (f"MEMORY: {mem.arithmetic} {where}: this does not fit {mem.device}. Shard the optimizer state (and the "
            "params) across devices with jax.jit and NamedSharding, or see the text output of `optax-lint recommend` "
            "for adafactor and mu_dtype, with the arithmetic.")
    return textwrap.wrap(text, width=92, initial_indent="# ", subsequent_indent="# ", break_on_hyphens=False)
