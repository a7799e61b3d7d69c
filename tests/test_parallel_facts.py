"""Unit tests of the multi-device facts (optax_lint/facts/parallel/): mapped steps
and their arguments, collectives, the gradient data-flow inside a step, axis-name
binding, host-side replication and what crosses into pmapped calls, and the evidence
for the linear scaling rule. Everything is read from source; nothing is imported."""

from __future__ import annotations

import sys
import textwrap

import libcst as cst
import pytest

from optax_lint.facts.module import ModuleFacts
from optax_lint.facts.parallel.devices import (
    known_device_count,
    mentions_device_count,
    per_device_batch,
)
from optax_lint.facts.parallel.grads import AGrad
from optax_lint.facts.parallel.host import AFresh
from optax_lint.facts.parallel.interpreter import CLEAN, UNK
from optax_lint.facts.parallel.sites import MappedStep
from optax_lint.facts.parallel.steps import ParallelFacts
from optax_lint.syntax.values import Unknown


def facts(src: str) -> ModuleFacts:
    text = textwrap.dedent(src)
    return ModuleFacts(cst.parse_module(text), "x.py", text=text)


def pf_of(src: str) -> ParallelFacts:
    return facts(src).parallel


def code(node) -> str:
    return cst.Module([]).code_for_node(node)


def step_named(pf: ParallelFacts, name: str) -> MappedStep:
    matches = [s for s in pf.steps if s.name == name]
    assert len(matches) == 1, pf.steps
    return matches[0]


HEADER = """
import functools
from functools import partial
import jax
import jax.numpy as jnp
import optax
from jax import lax
from flax import jax_utils
from flax.training import train_state, checkpoints
import orbax.checkpoint as ocp
from jax.sharding import PartitionSpec as P, Mesh
"""

# ---------------------------------------------------------------------------
# Mapped steps


def test_pmap_forms_axis_names_and_arguments():
    pf = pf_of(HEADER + """
def step(state, batch, lr): ...

@functools.partial(jax.pmap, axis_name="batch", static_broadcasted_argnums=(2,))
def decorated(state, batch, lr): ...

@jax.pmap
def bare(x): ...

p_call = jax.pmap(step, "devices", in_axes=(None, 0, 0))
p_partial = jax.pmap(functools.partial(step, lr=0.1), axis_name="batch", donate_argnums=(0,))
p_factory = partial(jax.pmap, axis_name=("a", "b"))(step)
p_lambda = jax.pmap(lambda x: lax.pmean(x, "i"), "i")
AXIS = "data"
p_const = jax.pmap(step, axis_name=AXIS)
""")
    decorated = step_named(pf, "decorated")
    assert decorated.kind == "pmap" and decorated.decorated is not None
    assert decorated.axis_names == frozenset({"batch"})
    assert decorated.static_broadcasted_argnums == (2,)
    assert decorated.axis_of_arg(0) == 0 and decorated.axis_of_arg(2) is None
    assert decorated.function.name == "decorated"

    assert step_named(pf, "bare").axis_names is None  # no axis_name: binds nothing

    p_call = step_named(pf, "p_call")
    assert p_call.axis_names == frozenset({"devices"})  # positional axis_name
    assert p_call.in_axes == (None, 0, 0)
    assert p_call.axis_of_arg(0) is None and p_call.axis_of_arg(1) == 0
    assert p_call.function.name == "step"

    p_partial = step_named(pf, "p_partial")
    assert p_partial.function.name == "step" and p_partial.bound_keywords == {"lr"}
    assert p_partial.arg_call is p_partial.site

    p_factory = step_named(pf, "p_factory")
    assert p_factory.axis_names == frozenset({"a", "b"}) and p_factory.function.name == "step"
    assert code(p_factory.arg_call.func) == "partial"

    p_lambda = step_named(pf, "p_lambda")
    assert p_lambda.function.kind == "lambda" and p_lambda.axis_names == frozenset({"i"})
    assert step_named(pf, "p_const").axis_names == frozenset({"data"})


def test_pmapped_methods_resolve_to_their_def():
    """`jax.pmap(Trainer.step)` and `jax.pmap(self.step)` name the method the class
    defines; through the instance its first parameter (self) is bound, a staticmethod
    binds nothing, and a property or a wrapped method is not followed."""
    pf = pf_of(HEADER + """
class Trainer:
    def __init__(self):
        self.p_static = jax.pmap(Trainer.static_step, axis_name="devices")
        self.p_bound = jax.pmap(self.step, axis_name="devices")
        self.p_self_static = jax.pmap(self.static_step, axis_name="devices")
        self.p_unbound = jax.pmap(Trainer.step, axis_name="devices")
        self.p_cls = jax.pmap(Trainer.from_cls, axis_name="devices")
        self.p_property = jax.pmap(self.prop, axis_name="devices")

    @staticmethod
    def static_step(state, batch): ...

    def step(self, state, batch): ...

    @classmethod
    def from_cls(cls, state, batch): ...

    @property
    def prop(self): ...
""")
    sites = {code(s.target): s for s in pf.steps}
    assert sites["Trainer.static_step"].function.name == "static_step" and sites["Trainer.static_step"].bound_positional == 0
    assert sites["self.step"].function.name == "step" and sites["self.step"].bound_positional == 1
    assert sites["self.static_step"].bound_positional == 0
    assert sites["Trainer.step"].function.name == "step" and sites["Trainer.step"].bound_positional == 0
    assert sites["Trainer.from_cls"].bound_positional == 1
    assert sites["self.prop"].function is None


def test_unknown_axis_name_is_unknown_not_unbound():
    pf = pf_of(HEADER + """
def make(step, config, axis="batch"):
    return jax.pmap(step, axis_name=config.axis_name), jax.pmap(step, axis_name=axis)
""")
    kinds = [s.axis_names for s in pf.steps]
    assert len(kinds) == 2 and all(isinstance(k, Unknown) for k in kinds)


def test_shard_map_and_jit_steps_are_recorded_apart():
    pf = pf_of(HEADER + """
mesh = jax.make_mesh((4, 2), ("data", "model"))
other = Mesh(jax.devices(), ("x",))

@jax.shard_map(mesh=mesh, in_specs=(P(), P("data")), out_specs=P())
def sm(w, x): ...

@partial(jax.shard_map, mesh=other, in_specs=P("x"), out_specs=P(), check_vma=False)
def sm_unchecked(x): ...

def body(w, x): ...
sm_call = jax.shard_map(body, mesh=mesh, in_specs=(P(None), P("data", None)), out_specs=P())
sm_ctx = jax.shard_map(body, in_specs=(P(), P("data")), out_specs=P())

@jax.jit
def spmd(state, batch): ...

sharded = jax.jit(body, in_shardings=None, out_shardings=None)
vm = jax.vmap(body, (None, 0), 0, "i")
""")
    sm = step_named(pf, "sm")
    assert sm.kind == "shard_map" and sm.axis_names == frozenset({"data", "model"})
    assert sm.in_spec_replicated(0) is True and sm.in_spec_replicated(1) is False
    assert sm.check_vma is True and sm.mesh_sizes() == {"data": 4, "model": 2}
    unchecked = step_named(pf, "sm_unchecked")
    assert unchecked.axis_names == frozenset({"x"}) and unchecked.check_vma is False
    assert unchecked.in_spec_replicated(0) is False  # one spec for every argument
    sm_call = step_named(pf, "sm_call")
    assert sm_call.function.name == "body" and sm_call.in_spec_replicated(0) is True
    assert isinstance(step_named(pf, "sm_ctx").axis_names, Unknown)  # mesh from the context
    spmd = step_named(pf, "spmd")
    assert spmd.kind == "jit" and spmd.axis_names is None and not spmd.sharded_jit
    assert step_named(pf, "sharded").sharded_jit
    vm = step_named(pf, "vm")
    assert vm.kind == "vmap" and vm.axis_names == frozenset({"i"})  # positional axis_name
    assert pf.pmap_steps == []


# ---------------------------------------------------------------------------
# Collectives


def test_collectives_axis_names_and_what_they_reduce():
    pf = pf_of(HEADER + """
AXIS = "batch"

def step(state, batch, axis_name):
    loss, grads = jax.value_and_grad(loss_fn)(state.params, batch)
    g = lax.pmean(grads, axis_name=AXIS)
    loss = jax.lax.psum(loss, "batch")
    metrics = lax.pmean({"acc": 1.0}, axis_name="batch")
    n = lax.psum(1, axis_name)
    idx = lax.axis_index("batch")
    gathered = lax.all_gather(x, axis_name=("a", "b"))
    return state.apply_gradients(grads=g)

p = jax.pmap(step, axis_name="batch")
""")
    found = {(c.op, code(c.call)[:20]): c for c in pf.classified_collectives}
    by_op = {}
    for c in pf.classified_collectives:
        by_op.setdefault(c.op, []).append(c)
    pmean_grads = next(c for c in by_op["pmean"] if code(c.operand) == "grads")
    assert pmean_grads.axes == frozenset({"batch"}) and pmean_grads.reduces == "grads"
    psums = {code(c.operand): c for c in by_op["psum"]}
    assert psums["loss"].reduces == "loss"
    assert isinstance(psums["1"].axes, Unknown)  # a parameter: unknown
    metrics = next(c for c in by_op["pmean"] if code(c.operand).startswith("{"))
    assert metrics.reduces == "metrics"
    assert by_op["axis_index"][0].axes == frozenset({"batch"}) and by_op["axis_index"][0].operand is None
    assert by_op["all_gather"][0].axes == frozenset({"a", "b"})
    assert found


# ---------------------------------------------------------------------------
# Gradient data-flow


def _sinks(pf, name):
    return pf.grad_flow(step_named(pf, name).function).sinks


def test_grad_flow_through_unpacking_and_reductions():
    pf = pf_of(HEADER + """
def unreduced(state, batch):
    grad_fn = jax.value_and_grad(loss_fn, has_aux=True)
    (loss, aux), grads = grad_fn(state.params, batch)
    g2 = grads
    return state.apply_gradients(grads=g2)

def reduced(state, batch):
    out = jax.value_and_grad(loss_fn)(state.params, batch)
    grads = out[1]
    grads = jax.tree.map(lambda g: lax.psum(g, "batch") / 4, grads)
    return state.apply_gradients(grads=grads)

def raw(params, opt_state, batch):
    grads, aux = jax.grad(loss_fn, has_aux=True)(params, batch)
    updates, opt_state = tx.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state

a = jax.pmap(unreduced, axis_name="batch")
b = jax.pmap(reduced, axis_name="batch")
c = jax.pmap(raw, axis_name="batch")
""")
    (sink,) = _sinks(pf, "a")
    assert sink.kind == "apply_gradients" and isinstance(sink.value, AGrad)
    assert sink.value.axes == frozenset() and sink.value.wrt == "state"
    assert code(sink.origin).strip() == "g2 = grads"
    (sink,) = _sinks(pf, "b")
    assert sink.value.axes == frozenset({"batch"})
    sinks = _sinks(pf, "c")
    assert [s.kind for s in sinks] == ["update", "apply_updates"]
    assert isinstance(sinks[0].value, AGrad) and sinks[0].value.axes == frozenset()
    assert sinks[1].value == CLEAN  # the updates of tx.update are not re-reported


def test_grad_flow_through_helpers_branches_and_unknown_calls():
    pf = pf_of(HEADER + """
from mylib import allreduce

def sync(tree):
    return jax.tree.map(lambda t: lax.pmean(t, "batch"), tree)

def via_helper(state, batch):
    grads = jax.grad(loss_fn)(state.params, batch)
    grads = sync(grads)
    return state.apply_gradients(grads=grads)

def via_unknown(state, batch):
    grads = jax.grad(loss_fn)(state.params, batch)
    grads = allreduce(grads)
    return state.apply_gradients(grads=grads)

def branchy(state, batch, flag):
    grads = jax.grad(loss_fn)(state.params, batch)
    if flag:
        grads = lax.pmean(grads, "batch")
    return state.apply_gradients(grads=grads)

def dynamic(state, batch):
    if state.dynamic_scale:
        fn = state.dynamic_scale.value_and_grad(loss_fn, has_aux=True, axis_name="batch")
        ds, is_fin, aux, grads = fn(state.params)
    else:
        aux, grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params)
        grads = lax.pmean(grads, axis_name="batch")
    return state.apply_gradients(grads=grads)

def update_in_helper(state, batch):
    grads = jax.grad(loss_fn)(state.params, batch)
    return apply(state, grads)

def apply(state, grads):
    return state.apply_gradients(grads=grads)

ps = [jax.pmap(f, axis_name="batch") for f in ()]
h = jax.pmap(via_helper, axis_name="batch")
u = jax.pmap(via_unknown, axis_name="batch")
br = jax.pmap(branchy, axis_name="batch")
dy = jax.pmap(dynamic, axis_name="batch")
ih = jax.pmap(update_in_helper, axis_name="batch")
""")
    assert _sinks(pf, "h")[0].value.axes == frozenset({"batch"})
    assert _sinks(pf, "u")[0].value == UNK  # an imported function may reduce
    assert _sinks(pf, "br")[0].value == UNK  # reduced on one branch only
    assert _sinks(pf, "dy")[0].value.axes == frozenset({"batch"})  # DynamicScale(axis_name=...)
    (sink,) = _sinks(pf, "ih")
    assert sink.scope.name == "apply" and sink.value.axes == frozenset()


def test_grad_reductions_record_loss_reduction_and_wrt():
    pf = pf_of(HEADER + """
mesh = jax.make_mesh((4,), ("data",))

def loss_fn(params, x):
    return jnp.mean((x @ params) ** 2)

@jax.shard_map(mesh=mesh, in_specs=(P(), P("data")), out_specs=P())
def ported(params, x):
    grads = jax.grad(loss_fn)(params, x)
    return lax.pmean(grads, "data")

@jax.shard_map(mesh=mesh, in_specs=(P(), P("data")), out_specs=P())
def right(params, x):
    grads = jax.grad(lambda p: lax.pmean(loss_fn(p, x), "data"))(params)
    return lax.pmean(grads, "data")

@jax.shard_map(mesh=mesh, in_specs=(P(), P("data")), out_specs=P())
def pcast(params, x):
    params = lax.pcast(params, "data", to="varying")
    return lax.pmean(jax.grad(loss_fn)(params, x), "data")
""")
    (red,) = pf.grad_flow(step_named(pf, "ported").function).reductions
    assert red.op == "pmean" and red.axes == frozenset({"data"})
    assert red.grad.wrt == "params" and red.grad.loss_reduced is False
    (red,) = pf.grad_flow(step_named(pf, "right").function).reductions
    assert red.grad.loss_reduced == frozenset({"data"})
    (red,) = pf.grad_flow(step_named(pf, "pcast").function).reductions
    assert red.grad.wrt is None  # not the replicated parameter any more


# ---------------------------------------------------------------------------
# Axis binding


def test_unbound_axis_uses():
    pf = pf_of(HEADER + """
def metrics(logits):
    return lax.pmean(logits.mean(), axis_name="batch")

def per_example(p, x):
    return lax.pmean(x, "examples") + lax.psum(x, "batch")

def step(state, batch):
    grads = jax.grad(loss_fn)(state.params, batch)
    grads = lax.pmean(grads, "batch")
    stats = jax.vmap(per_example, in_axes=(None, 0), axis_name="examples")(state.params, batch)
    return state.apply_gradients(grads=grads), metrics(batch)

def param_axis(x, axis_name):
    return lax.pmean(x, axis_name)

def guarded(x, flag):
    if flag:
        x = lax.pmean(x, "model")
    return x

def handed_off(x):
    return custom_wrapper(per_example)(x)

good = jax.pmap(step, axis_name="batch")
none = jax.pmap(step)
other = jax.pmap(step, axis_name="data")
quiet = [jax.pmap(param_axis), jax.pmap(guarded, axis_name="batch"), jax.pmap(handed_off, axis_name="batch")]
""")
    uses = pf.unbound_axis_uses()
    by_root = {}
    for use in uses:
        by_root.setdefault(use.root.name or use.root.describe(), []).append(use)
    assert "good" not in by_root
    assert "quiet" not in by_root and all(u.root.name in ("none", "other") for u in uses)
    none = sorted(code(u.collective.call) for u in by_root["none"])
    assert none == sorted([
        'lax.pmean(grads, "batch")',
        'lax.pmean(logits.mean(), axis_name="batch")',
        'lax.psum(x, "batch")',
    ])
    # Each collective is reported once, from the first site that reaches it.
    assert "other" not in by_root or all(u.missing == {"batch"} for u in by_root["other"])
    psum_use = next(u for u in uses if code(u.collective.call) == 'lax.psum(x, "batch")')
    assert psum_use.bound == frozenset({"examples"})  # the nested vmap binds its own name
    assert [n.value for n in psum_use.path] == ["per_example"]


def test_step_mapped_only_elsewhere_and_nested_sites():
    pf = pf_of(HEADER + """
def train_step(state, batch):
    return lax.pmean(batch, "batch")

def outer(x):
    inner = jax.pmap(lambda y: lax.pmean(y, "outer_axis") + lax.pmean(y, "inner"), axis_name="inner")
    return inner(x)

p_outer = jax.pmap(outer, axis_name="outer_axis")
""")
    assert pf.unbound_axis_uses() == []
    inner = next(s for s in pf.steps if s.function is not None and s.function.kind == "lambda")
    assert pf.is_nested_site(inner)


# ---------------------------------------------------------------------------
# Replication and crossings


def test_crossings_fresh_replicated_and_broadcast():
    pf = pf_of(HEADER + """
class TrainState(train_state.TrainState):
    batch_stats: dict

def create_train_state(rng):
    variables = model.init(rng, x)
    return TrainState.create(apply_fn=model.apply, params=variables["params"], tx=tx, batch_stats=variables["batch_stats"])

def step(state, batch): ...

def main():
    state = create_train_state(rng)
    p_step = jax.pmap(step, axis_name="batch")
    p_bcast = jax.pmap(step, axis_name="batch", in_axes=(None, 0))
    p_bcast(state, batch)
    params = model.init(rng, x)["params"]
    p_step(params, batch)
    state = jax_utils.replicate(state)
    for i in range(10):
        state, metrics = p_step(state, batch=batch)
    single = jax.tree.map(lambda x: x[0], state)
    one = jax_utils.unreplicate(state)

main()
""")
    crossings = [(code(c.arg.value), c.index, c.axis, type(c.value).__name__) for c in pf.crossings]
    assert ("state", 0, None, "AFresh") in crossings  # broadcast with in_axes=None
    assert ("params", 0, 0, "AFresh") in crossings
    assert ("state", 0, 0, "ARepl") in crossings
    assert ("batch=batch", None, 0, "AUnknown") in crossings or ("batch", None, 0, "AUnknown") in crossings
    fresh = [c for c in pf.crossings if isinstance(c.value, AFresh)]
    assert {c.value.kind for c in fresh} == {"train_state", "init"}
    assert pf.is_data_parallel(pf.steps[0])


def test_replicated_saves_and_unreplicate_forms():
    pf = pf_of(HEADER + """
import pickle
from flax import serialization

def save_like_imagenet(state, workdir):
    state = jax.device_get(jax.tree_util.tree_map(lambda x: x[0], state))
    checkpoints.save_checkpoint(workdir, state, int(state.step), keep=3)

def save_raw(state, workdir):
    checkpoints.save_checkpoint(workdir, target=state, step=0)

def main(mngr, workdir):
    state = jax_utils.replicate(create())
    p_step = jax.pmap(step, axis_name="batch")
    state = p_step(state, batch)
    mngr.save(1, args=ocp.args.StandardSave(state))
    mngr.save(2, args=ocp.args.Composite(state=ocp.args.StandardSave(jax_utils.unreplicate(state)), meta=ocp.args.JsonSave({"a": 1})))
    mngr.save(3, args=ocp.args.Composite(params=ocp.args.StandardSave(state.params)))
    save_like_imagenet(state, workdir)
    save_raw(state, workdir)
    with open("f", "wb") as fh:
        pickle.dump({"params": state.params, "step": 1}, fh)
    blob = serialization.to_bytes(state)
    ckptr = ocp.PyTreeCheckpointer()
    ckptr.save(workdir, state)
""")
    saves = sorted((code(s.saved), s.how) for s in pf.replicated_saves)
    assert saves == sorted([
        ("state", "orbax"),  # StandardSave(state)
        ("state.params", "orbax"),  # Composite(params=...)
        ("state", "flax"),  # save_raw, reached from main with the replicated value
        ('{"params": state.params, "step": 1}', "pickle"),
        ("state", "msgpack"),
        ("state", "orbax"),  # legacy PyTreeCheckpointer().save(path, tree)
    ])


def test_ensemble_pmap_is_not_data_parallel():
    pf = pf_of(HEADER + """
def member_step(state, x): ...
p_create = jax.pmap(create)
p_step = jax.pmap(member_step, in_axes=(0, None))
ensemble = p_create(keys)
ensemble = p_step(ensemble, data)
""")
    assert not pf.is_data_parallel(step_named(pf, "p_step"))


# ---------------------------------------------------------------------------
# Linear scaling evidence


@pytest.mark.parametrize(
    "src, expected",
    [
        ("PER_DEVICE_BATCH_SIZE = 32\n", 32),
        ("per_device_batch = cfg.batch\n", Unknown),
        ("bs = 64\nglobal_batch = bs * jax.device_count()\n", None),  # 'bs' is not named like a batch
        ("batch_size = 64\nglobal_batch = batch_size * jax.device_count()\n", 64),
        ("batch_size = 16\nx = jnp.zeros((jax.local_device_count(), batch_size, 3))\n", 16),
        ("PER_DEVICE_BATCH_SIZE = 32\nlocal = GLOBAL_BATCH // jax.device_count()\nbatch = local\nlocal_batch_size = GLOBAL // jax.device_count()\n", None),
        ("per_device_batch = 32\nx = x.reshape((jax.local_device_count(), -1) + x.shape[1:])\n", None),
        ("per_device_batch = GLOBAL // n_devices\n", None),
        ("GLOBAL_BATCH = 256\n", None),
    ],
)
def test_per_device_batch_evidence(src, expected):
    found = per_device_batch(facts("import jax\nimport jax.numpy as jnp\n" + src))
    if expected is None:
        assert found is None
    elif expected is Unknown:
        assert found is not None and isinstance(found.value, Unknown)
    else:
        assert found is not None and found.value == expected


def test_device_count_mentions_and_known_count():
    f = facts("""
import os
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
import jax
n_dev = len(jax.devices())
lr = 0.1 * n_dev
base = 0.1
scaled = base * config.num_devices
""")
    scope = f.raw.module_scope
    binding = {name: b[0].value for name, b in scope.bindings.items() if b and b[0].value is not None}
    assert mentions_device_count(f, binding["lr"], scope)
    assert mentions_device_count(f, binding["scaled"], scope)
    assert not mentions_device_count(f, binding["base"], scope)
    assert known_device_count(f)[0] == 8


def test_lint_path_never_imports_jax():
    # The multi-device facts and rules read source only.
    before = set(sys.modules)
    pf = pf_of(HEADER + "p = jax.pmap(lambda x: lax.pmean(x, 'b'))\n")
    pf.unbound_axis_uses(), pf.crossings, pf.replicated_saves
    from optax_lint.core.catalogue import load_catalogue
    from optax_lint.rules import registry

    registry.load(code for code, spec in load_catalogue().items() if spec.family == "multi-device")

    new = set(sys.modules) - before
    assert not {m for m in new if m.split(".")[0] in ("jax", "optax", "flax", "orbax")}


# ---------------------------------------------------------------------------
# OPX403/OPX404 options


SCALING_SCRIPT = HEADER + """
from flax.training import common_utils
{devices_line}
MICRO = 32
{lr_name} = 0.1

@functools.partial(jax.pmap, axis_name="batch")
def train_step(state, x):
    grads = jax.grad(loss_fn)(state.params, x)
    grads = lax.pmean(grads, "batch")
    return state.apply_gradients(grads=grads)

def main():
    schedule = optax.warmup_cosine_decay_schedule(0.0, {lr_expr}, warmup_steps=100, decay_steps=1000)
    state = jax_utils.replicate(train_state.TrainState.create(apply_fn=None, params={{}}, tx=optax.sgd(schedule)))
    for _ in range(10):
        state = train_step(state, jnp.zeros((jax.local_device_count(), MICRO, 3)))
"""


def _scaling_codes(options=None, devices_line="", lr_name="LR", lr_expr="LR"):
    from optax_lint.engine import lint as engine

    text = textwrap.dedent(SCALING_SCRIPT.format(devices_line=devices_line, lr_name=lr_name, lr_expr=lr_expr))
    run = engine.lint_text(text, "x.py", {"OPX403", "OPX404"}, options or {})
    assert run.internal_errors == 0
    return sorted(f.code for f in run.findings)


def test_scaling_rules_need_a_per_device_batch_name_they_recognise():
    # `MICRO` is not named like a per-device batch: by default nothing is known.
    assert _scaling_codes() == []
    option = {"per_device_batch_names": ["^micro$"]}
    assert _scaling_codes({"OPX403": option, "OPX404": option}) == ["OPX403", "OPX404"]


def test_scaling_rules_min_devices_and_device_count_names():
    option = {"per_device_batch_names": ["^micro$"]}
    xla = 'import os\nos.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"'
    both = {"OPX403": dict(option), "OPX404": dict(option)}
    assert _scaling_codes(both, devices_line=xla) == ["OPX403", "OPX404"]
    quiet = {"OPX403": dict(option, min_devices=4), "OPX404": dict(option, min_devices=4)}
    assert _scaling_codes(quiet, devices_line=xla) == []
    # A learning rate scaled by a name the project uses for the device count (set to a
    # literal here, so only the name says what it is).
    lr = {"lr_name": "n_chips = 8\nLR", "lr_expr": "LR * n_chips"}
    assert _scaling_codes(both, **lr) == ["OPX403", "OPX404"]
    scaled = {"OPX403": dict(option, device_count_names=["n_chips"]), "OPX404": dict(option)}
    assert _scaling_codes(scaled, **lr) == ["OPX404"]
