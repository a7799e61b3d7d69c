"""The recommendation as Python: the configuration block (constants, schedule, chain,
LR read-back) shown in the text output, and a runnable module around it (a toy
training step, jit or pmap, checkpoint helpers, a smoke run).

The module carries its run context as a pragma, so `optax-lint` judges it with the
numbers it was computed for; tests lint every generated module and run some.
"""

from __future__ import annotations

import textwrap

from optax_lint.recommend.decide import Recommendation
from optax_lint.recommend.fmt import arch_phrase, count_text, py_number
from optax_lint.recommend.memory import warning_lines

_WHY = {
    "clip": "element-wise clip of each gradient value (the protocol's fix for gradient noise)",
    "clip_by_global_norm": "clip the gradients first: one bad batch cannot derail training",
    "add_decayed_weights": "L2 regularisation before the optimizer (it has no decay of its own)",
}


def context_pragma(rec: Recommendation) -> str:
    req = rec.request
    first = [f"arch={req.arch}", f"params={req.params:_}", f"steps={req.steps:_}", f"fine_tune={'true' if req.fine_tune else 'false'}"]
    second = [f"batch_per_device={req.batch:_}", f"devices={req.devices}"] if rec.multi_device else []
    second.append(f"batch_global={req.effective_batch:_}")
    return "# optax-lint: context " + " ".join(first) + "\n# optax-lint: context " + " ".join(second)


def _learning_rate(rec: Recommendation, batch_name: str) -> list[str]:
    """The peak LR as the decision computed it: from the base rate and the batch it was
    tuned at, by the optimizer's rule, then the ceiling and the fine-tuning cap."""
    s, req = rec.scaling, rec.request
    if rec.plain_lr:
        return [f"PEAK_LEARNING_RATE = {py_number(rec.peak_lr)}  # {rec.row['scenario']}"]
    origin = "your --base-lr" if req.base_lr is not None else rec.row["scenario"]
    held = "the global batch it was tuned at" if not s.up_only else "the largest global batch it is tuned for"
    lines = [f"BASE_LEARNING_RATE = {py_number(s.base_lr)}  # {origin}",
             f"REFERENCE_BATCH = {py_number(s.base_batch)}  # {held}"]
    ratio = f"{batch_name} / REFERENCE_BATCH"
    if s.up_only and rec.multi_device:
        ratio = f"max({ratio}, 1.0)"  # at or below the reference, the rate stands
    elif s.up_only and s.ratio == 1:
        ratio = ""
    else:
        ratio = f"({ratio})"
    rule = "square-root scaling" if s.rule == "sqrt" else "linear scaling"
    scaled = "BASE_LEARNING_RATE" + (f" * {ratio}" + (" ** 0.5" if s.rule == "sqrt" else "") if ratio else "")
    caps, why = [], [rule] if ratio else []
    if s.capped:
        lines.append(f"LR_CEILING = {py_number(s.ceiling.value)}  # {s.ceiling.source}, {count_text(req.params)} parameters")
        caps.append("LR_CEILING")
        why.append("capped at the stability ceiling")
    if rec.lr_cap is not None:
        caps.append(py_number(rec.lr_cap))
        why.append("capped for fine-tuning")
    expr = f"min({scaled}, {', '.join(caps)})" if caps else scaled
    if rec.multi_device:
        lines.append(f"# {rec.optimizer}: {rule} from the reference batch; the linear rule, BASE_LEARNING_RATE * NUM_DEVICES, "
                     f"would give {py_number(rec.linear_rule_lr)}")
    lines.append(f"PEAK_LEARNING_RATE = {expr}  # {', '.join(why)}: {py_number(rec.peak_lr)}")
    return lines


def _constants(rec: Recommendation) -> list[str]:
    req = rec.request
    lines = [f"TOTAL_STEPS = {py_number(req.steps)}  # optimizer updates"]
    if rec.multi_device:
        lines += [
            f"PER_DEVICE_BATCH = {py_number(req.batch)}",
            f"NUM_DEVICES = {req.devices}  # data-parallel (pmap) devices this configuration was computed for",
            f"GLOBAL_BATCH = PER_DEVICE_BATCH * NUM_DEVICES  # the effective batch: {py_number(req.effective_batch)}",
        ]
        lines += _learning_rate(rec, "GLOBAL_BATCH")
        if rec.warmup_base:
            if rec.warmup_cap is not None:
                lines.append(f"WARMUP_STEPS = min({py_number(rec.warmup_base)} * NUM_DEVICES, {py_number(rec.warmup_cap)})  # scaled, at most the range's top: {py_number(rec.warmup)}")
            else:
                lines.append(f"WARMUP_STEPS = {py_number(rec.warmup_base)} * NUM_DEVICES  # {py_number(rec.warmup)}")
    else:
        lines.append(f"BATCH_SIZE = {py_number(req.batch)}")
        lines += _learning_rate(rec, "BATCH_SIZE")
        if rec.warmup_base:
            lines.append(f"WARMUP_STEPS = {py_number(rec.warmup)}")
    if rec.weight_decay is not None:
        lines.append(f"WEIGHT_DECAY = {py_number(rec.weight_decay)}")
    return lines


def _schedule(rec: Recommendation, name: str = "schedule", scale: str = "") -> list[str]:
    """The LR schedule (or, with `scale`, the same shape times a factor)."""
    kind = rec.schedule_kind
    peak = "PEAK_LEARNING_RATE" + scale
    end = py_number(rec.end_value) + scale if rec.end_value is not None else ""
    ramp = f"optax.linear_schedule(0.0, {peak}, transition_steps=WARMUP_STEPS)"
    if kind == "constant":
        return [f"{name} = optax.constant_schedule({peak})"]
    if kind == "warmup_cosine":
        return [
            f"{name} = optax.warmup_cosine_decay_schedule(",
            "    init_value=0.0,",
            f"    peak_value={peak},",
            "    warmup_steps=WARMUP_STEPS,",
            "    decay_steps=TOTAL_STEPS,  # the whole run, warmup included",
            f"    end_value={end},",
            ")",
        ]
    second = (f"optax.constant_schedule({peak})" if kind == "warmup_constant" else
              f"optax.linear_schedule({peak}, {end}, transition_steps=TOTAL_STEPS - WARMUP_STEPS)")
    return [
        f"{name} = optax.join_schedules(",
        "    schedules=[",
        f"        {ramp},",
        f"        {second},",
        "    ],",
        "    boundaries=[WARMUP_STEPS],",
        ")",
    ]


def _decay_schedule(rec: Recommendation) -> list[str]:
    if not rec.decay_follows_schedule:
        return []
    return ["", f"# {rec.optimizer} adds weight_decay_rate after the LR step: scale it by the LR schedule, so each step",
            "# shrinks weights by lr x WEIGHT_DECAY (adamw's decoupled decay), not by WEIGHT_DECAY itself."] + \
        _schedule(rec, "decay_schedule", " * WEIGHT_DECAY")


def _optimizer_call(rec: Recommendation) -> str:
    info = rec.optimizer_info
    kwargs = ["learning_rate=schedule"]
    if rec.momentum is not None:
        kwargs.append(f"momentum={py_number(rec.momentum)}")
    if rec.weight_decay is not None and not rec.decay_in_chain:
        kwargs.append(f"{info['decay_param']}={'decay_schedule' if rec.decay_follows_schedule else 'WEIGHT_DECAY'}")
    static = info.get("static_args")
    inject = "optax.inject_hyperparams(" + info["code"] + (", static_args=(" + ", ".join('"' + a + '"' for a in static) + ",)" if static else "") + ")"
    return f"{inject}({', '.join(kwargs)})"


def _comment(text: str) -> list[str]:
    return textwrap.wrap(text, width=92, initial_indent="    # ", subsequent_indent="    # ", break_on_hyphens=False)


def _chain(rec: Recommendation) -> list[str]:
    lines = ["optimizer = optax.chain("]
    for name in rec.chain_names[:-1]:
        lines += _comment(_WHY[name])
        if name == "clip":
            lines.append(f"    optax.clip({py_number(rec.clip_delta)}),")
        elif name == "clip_by_global_norm":
            lines.append(f"    optax.clip_by_global_norm({py_number(rec.clip_norm)}),")
        else:
            lines.append("    optax.add_decayed_weights(WEIGHT_DECAY),")
    lines += _comment(f"{rec.row['scenario']}: {rec.row['why']}")
    call = _optimizer_call(rec)
    if len(call) > 90:
        head, _, args = call.rpartition(")(")
        lines += [f"    {head})("] + [f"        {a}," for a in args[:-1].split(", ")] + ["    ),"]
    else:
        lines.append(f"    {call},")
    lines.append(")")
    return lines


def _read_back(rec: Recommendation) -> list[str]:
    i = rec.lr_index
    return [
        "",
        "",
        "def current_learning_rate(opt_state):",
        '    """The LR of the last update: inject_hyperparams keeps it in the state, and the',
        f'    injected optimizer is element {i} of the chain, so its state is opt_state[{i}]."""',
        f'    return opt_state[{i}].hyperparams["learning_rate"]',
    ]


def configuration(rec: Recommendation) -> str:
    """Constants, schedule, chain and the LR read-back: what the text output shows."""
    parts = warning_lines(rec) + _constants(rec) + [""] + _schedule(rec) + _decay_schedule(rec) + [""] + _chain(rec) + _read_back(rec)
    return "\n".join(parts) + "\n"


_SINGLE_STEP = '''

@jax.jit
def train_step(params, opt_state, batch):
    loss, grads = jax.value_and_grad(loss_fn)(params, batch)
    updates, opt_state = optimizer.update(grads, opt_state, params)
    params = optax.apply_updates(params, updates)
    return params, opt_state, loss
'''

_PMAP_STEP = '''

@functools.partial(jax.pmap, axis_name="batch")
def train_step(params, opt_state, batch):
    loss, grads = jax.value_and_grad(loss_fn)(params, batch)
    grads = jax.lax.pmean(grads, axis_name="batch")  # average the gradients across devices
    loss = jax.lax.pmean(loss, axis_name="batch")
    updates, opt_state = optimizer.update(grads, opt_state, params)
    params = optax.apply_updates(params, updates)
    return params, opt_state, loss
'''

_COMMON = '''

def loss_fn(params, batch):
    inputs, targets = batch
    predictions = inputs @ params["dense"]["kernel"] + params["dense"]["bias"]
    return jnp.mean((predictions - targets) ** 2)


def init_params(key):
    return {"dense": {"kernel": 0.1 * jax.random.normal(key, (16, 4)), "bias": jnp.zeros((4,))}}


def make_batch(key, shape):
    inputs = jax.random.normal(key, (*shape, 16))
    targets = inputs[..., :4] * 2.0 - 1.0
    return inputs, targets
'''

_SINGLE_CKPT = '''

def save_checkpoint(manager, step, params, opt_state):
    """Save params and opt_state together: losing Adam's moments resets training progress."""
    import orbax.checkpoint as ocp

    manager.save(step, args=ocp.args.StandardSave({"params": params, "opt_state": opt_state}))


def restore_checkpoint(manager, params, opt_state):
    """Restore into the structure of freshly built state (optax NamedTuples, not dicts)."""
    import orbax.checkpoint as ocp

    state = {"params": params, "opt_state": opt_state}
    abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, state)
    restored = manager.restore(manager.latest_step(), args=ocp.args.StandardRestore(abstract))
    return restored["params"], restored["opt_state"]
'''

_PMAP_CKPT = '''

def save_checkpoint(manager, step, params, opt_state):
    """Save one copy of params and opt_state together (they are replicated per device)."""
    import orbax.checkpoint as ocp

    state = {"params": jax_utils.unreplicate(params), "opt_state": jax_utils.unreplicate(opt_state)}
    manager.save(step, args=ocp.args.StandardSave(state))


def restore_checkpoint(manager, params, opt_state):
    """Restore into the structure of freshly built (unreplicated) state, then replicate."""
    import orbax.checkpoint as ocp

    state = {"params": params, "opt_state": opt_state}
    abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, state)
    restored = manager.restore(manager.latest_step(), args=ocp.args.StandardRestore(abstract))
    return jax_utils.replicate(restored["params"]), jax_utils.replicate(restored["opt_state"])
'''

_SINGLE_MAIN = '''

def main(num_steps=3):
    """A smoke run on a toy regression: a few steps, the loss and the LR read back."""
    key = jax.random.PRNGKey(0)
    params = init_params(key)
    opt_state = optimizer.init(params)
    for step in range(num_steps):
        batch = make_batch(jax.random.fold_in(key, step), (min(BATCH_SIZE, 32),))
        params, opt_state, loss = train_step(params, opt_state, batch)
        lr = float(current_learning_rate(opt_state))
        print(f"step {step}: loss {float(loss):.4f} lr {lr:.3g}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
'''

_PMAP_MAIN = '''

def main(num_steps=3):
    """A smoke run on a toy regression over the local devices: a few steps, the loss
    and the LR read back (one copy per device)."""
    devices = jax.local_device_count()
    if devices != NUM_DEVICES:
        print(f"note: running on {devices} devices; LR and warmup were computed for {NUM_DEVICES}")
    key = jax.random.PRNGKey(0)
    params = init_params(key)
    opt_state = optimizer.init(params)
    params = jax_utils.replicate(params)
    opt_state = jax_utils.replicate(opt_state)
    for step in range(num_steps):
        batch = make_batch(jax.random.fold_in(key, step), (devices, min(PER_DEVICE_BATCH, 32)))
        params, opt_state, loss = train_step(params, opt_state, batch)
        lr = float(current_learning_rate(opt_state)[0])
        print(f"step {step}: loss {float(loss[0]):.4f} lr {lr:.3g}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
'''


def command_line(rec: Recommendation) -> str:
    """The flags that reproduce this recommendation."""
    req = rec.request
    parts = ["optax-lint recommend", f"--arch {req.arch}", f"--params {req.params}", f"--steps {req.steps}", f"--batch {req.batch}"]
    if req.devices > 1:
        parts.append(f"--devices {req.devices}")
    if req.dataset_size:
        parts.append(f"--dataset-size {req.dataset_size}")
    parts += [flag for flag, on in (("--fine-tune", req.fine_tune), ("--memory-constrained", req.memory_constrained),
                                    ("--sparse-gradients", req.sparse_gradients)) if on]
    parts += [f"--issue {issue}" for issue in req.issues]
    return " ".join(parts)


def module(rec: Recommendation) -> str:
    """A runnable module: `python this.py [steps]` runs a smoke test on a toy model."""
    req = rec.request
    title = f"{arch_phrase(req.arch)}, {count_text(req.params)} parameters, {req.steps:,} steps"
    command = textwrap.wrap(command_line(rec) + " --output-format python", width=84, break_on_hyphens=False, break_long_words=False)
    header = [
        '"""Optimizer configuration for ' + title + ".",
        "",
        "Written by:",
        *("    " + line + (" \\" if i < len(command) - 1 else "") for i, line in enumerate(command)),
        "",
        "Import `optimizer`, `schedule` and `current_learning_rate` into your training",
        "script, or run this file for a smoke test on a toy model: python THIS_FILE.py [steps]",
        '"""',
        context_pragma(rec),
        "",
    ]
    imports = (["import functools", "import sys", "", "import jax", "import jax.numpy as jnp", "import optax", "from flax import jax_utils"]
               if rec.multi_device else ["import sys", "", "import jax", "import jax.numpy as jnp", "import optax"])
    body = "\n".join(header + imports + ["", ""]) + configuration(rec)
    body += _COMMON + (_PMAP_STEP if rec.multi_device else _SINGLE_STEP)
    body += (_PMAP_CKPT if rec.multi_device else _SINGLE_CKPT)
    body += (_PMAP_MAIN if rec.multi_device else _SINGLE_MAIN)
    return body
