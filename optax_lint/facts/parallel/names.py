"""The names the multi-device facts recognise: mappers (pmap, shard_map, vmap, jit),
collectives, gradient transforms, tree maps, replication, restores, device counts and
meshes; and reading a collective's name and axis names."""

from __future__ import annotations

from typing import Any, Optional

from optax_lint.syntax.values import Unknown

PMAP = frozenset({"jax.pmap", "jax.api.pmap", "equinox.filter_pmap"})
SHARD_MAP = frozenset({"jax.shard_map", "jax.experimental.shard_map.shard_map", "jax.smap"})
VMAP = frozenset({"jax.vmap", "flax.linen.vmap", "flax.nnx.vmap", "equinox.filter_vmap", "haiku.vmap"})
JIT = frozenset({"jax.jit", "jax.pjit", "jax.experimental.pjit.pjit", "flax.nnx.jit", "equinox.filter_jit"})
PARTIAL = frozenset({"functools.partial"})
MAPPERS = PMAP | SHARD_MAP | VMAP | JIT

# Positional parameters after the mapped function, per mapper (keywords work for all).
MAPPER_POSITIONAL = {
    "jax.pmap": ("axis_name",),
    "jax.api.pmap": ("axis_name",),
    "jax.vmap": ("in_axes", "out_axes", "axis_name", "axis_size", "spmd_axis_name"),
}

# Collective -> position of its axis_name argument.
COLLECTIVES = {
    "psum": 1, "pmean": 1, "pmax": 1, "pmin": 1, "all_gather": 1, "psum_scatter": 1,
    "ppermute": 1, "all_to_all": 1, "pshuffle": 1, "pswapaxes": 1, "pcast": 1,
    "pbroadcast": 1, "axis_index": 0, "axis_size": 0, "ragged_all_to_all": None,
}
# Collectives that combine values across the axis (a gradient passed through one is
# no longer a per-device gradient).
REDUCTIONS = frozenset({"psum", "pmean", "pmax", "pmin", "all_gather", "psum_scatter"})
_COLLECTIVE_PREFIXES = ("jax.lax.", "jax.lax.parallel.", "jax._src.lax.parallel.")

GRAD_TRANSFORMS = {
    "jax.grad": "grad", "jax.value_and_grad": "value_and_grad",
    "flax.nnx.grad": "grad", "flax.nnx.value_and_grad": "value_and_grad",
    "flax.linen.grad": "grad", "flax.linen.value_and_grad": "value_and_grad",
    "equinox.filter_grad": "grad", "equinox.filter_value_and_grad": "value_and_grad",
}
TREE_MAP = frozenset({"jax.tree.map", "jax.tree_util.tree_map", "jax.tree_map", "optax.tree_utils.tree_map_params"})
REPLICATE = frozenset({"flax.jax_utils.replicate", "jax.device_put_replicated"})
UNREPLICATE = frozenset({"flax.jax_utils.unreplicate"})
# Functions a function passed to them is traced by, in the caller's axis environment.
PASS_THROUGH = frozenset(
    {
        "jax.grad", "jax.value_and_grad", "jax.jit", "jax.checkpoint", "jax.remat", "jax.vjp", "jax.jvp",
        "jax.linearize", "jax.lax.scan", "jax.lax.fori_loop", "jax.lax.while_loop", "jax.lax.cond",
        "jax.lax.switch", "jax.lax.map", "jax.tree.map", "jax.tree_util.tree_map", "jax.tree_map",
        "functools.partial", "jax.named_call", "jax.custom_vjp", "jax.custom_jvp", "jax.eval_shape",
        "flax.linen.remat", "flax.linen.checkpoint", "flax.nnx.grad", "flax.nnx.value_and_grad",
        "flax.nnx.jit", "flax.nnx.remat", "equinox.filter_jit", "equinox.filter_grad",
        "equinox.filter_value_and_grad",
    }
)
# Calls whose result is a plain function of their (array) arguments.
NUMERIC_PREFIXES = ("jax.numpy.", "numpy.", "jax.nn.", "jax.scipy.", "optax.tree.", "optax.tree_utils.", "math.")
TRAIN_STATE_CREATE_SUFFIX = "TrainState.create"
RESTORES = frozenset(
    {
        "flax.training.checkpoints.restore_checkpoint", "flax.serialization.from_bytes",
        "flax.serialization.from_state_dict", "flax.serialization.msgpack_restore",
    }
)
DEVICE_COUNT_CALLS = frozenset({"jax.device_count", "jax.local_device_count", "jax.devices", "jax.local_devices"})
DEFAULT_DEVICE_COUNT_NAMES = (
    "device_count", "local_device_count", "num_devices", "n_devices", "ndevices", "n_devs", "num_devs",
    "ndev", "n_dev", "num_replicas", "n_replicas", "replica_count", "world_size", "num_local_devices",
    "n_local_devices",
)
DEFAULT_PER_DEVICE_BATCH_NAMES = (
    r"per_device_batch", r"batch_size_per_device", r"batch_per_device", r"per_replica_batch",
    r"batch_size_per_replica", r"device_batch_size", r"per_core_batch", r"batch_per_core",
    r"per_device_train_batch",
)
# Axis names that say "data parallel" on their own.
DATA_PARALLEL_AXES = frozenset({"batch", "data", "dp", "devices", "device", "replica", "replicas", "data_parallel", "i"})
PARTITION_SPEC = frozenset({"jax.sharding.PartitionSpec", "jax.P", "jax.experimental.PartitionSpec"})
MESH_CTORS = {"jax.make_mesh": 1, "jax.sharding.Mesh": 1, "jax.experimental.maps.Mesh": 1}


def collective_op(name: Optional[str]) -> Optional[str]:
    """'jax.lax.pmean' -> 'pmean'; None for anything that is not a collective."""
    if name is None:
        return None
    if name == "flax.jax_utils.pmean":
        return "pmean"
    for prefix in _COLLECTIVE_PREFIXES:
        if name.startswith(prefix):
            op = name[len(prefix):]
            return op if op in COLLECTIVES else None
    return None


def axis_set(value: Any) -> Any:
    """A static axis-name value -> frozenset of names, None (no name), or Unknown."""
    if isinstance(value, Unknown):
        return value
    if value is None:
        return None
    if isinstance(value, str):
        return frozenset({value})
    if isinstance(value, (tuple, list)) and value and all(isinstance(v, str) for v in value):
        return frozenset(value)
    return Unknown("axis name is not a string")


def fmt_axes(axes) -> str:
    if axes is None:
        return "no axis name"
    if isinstance(axes, Unknown):
        return "an unknown axis"
    return ", ".join(repr(a) for a in sorted(axes))
