"""The names checkpoint facts recognise: the save/restore APIs of orbax, flax, pickle and
numpy, the wrappers a pytree or a step function passes through, and the variable names
and dict keys that say whether an entry is parameters or optimizer state."""

from __future__ import annotations

import re
from typing import Optional

ORBAX = "orbax.checkpoint"
_V1 = re.compile(r"^orbax\.checkpoint\.(experimental\.)?v1(\.|$)")
# Multi-tier (emergency) checkpointing: its managers share v0's class name, not its
# constructor (`(local_directory, persistent_directory, global_mesh, abstract_state)`).
_EMERGENCY = re.compile(r"^orbax\.checkpoint\.experimental\.emergency(\.|$)")

# orbax classes that save or restore, by the last component of their qualified name.
ORBAX_OBJECTS = {
    "CheckpointManager": "manager",
    "Checkpointer": "checkpointer",
    "PyTreeCheckpointer": "pytree_checkpointer",
    "StandardCheckpointer": "standard_checkpointer",
    "AsyncCheckpointer": "async_checkpointer",
}
SAVE_ARGS = ("StandardSave", "PyTreeSave")
RESTORE_ARGS = ("StandardRestore", "PyTreeRestore")
# Checkpoint args that carry no training state (metadata, RNG keys, single arrays).
OTHER_ARGS = (
    "JsonSave", "JsonRestore", "ArraySave", "ArrayRestore", "ProtoSave", "ProtoRestore",
    "JaxRandomKeySave", "JaxRandomKeyRestore", "NumpyRandomKeySave", "NumpyRandomKeyRestore",
)
FLAX_CHECKPOINTS = "flax.training.checkpoints"
FLAX_CKPT_SAVES = ("save_checkpoint", "save_checkpoint_multiprocess")
FLAX_CKPT_RESTORES = ("restore_checkpoint",)
PICKLE_MODULES = ("pickle", "cloudpickle", "dill", "_pickle")
NUMPY_SAVES = ("numpy.save", "numpy.savez", "numpy.savez_compressed", "jax.numpy.save", "jax.numpy.savez")
NUMPY_LOADS = ("numpy.load", "jax.numpy.load")

# Calls that hand back (a copy of) their argument's tree: the payload is the argument's.
TRANSPARENT = frozenset(
    {
        "flax.jax_utils.unreplicate", "flax.jax_utils.replicate", "jax.device_get", "jax.device_put",
        "flax.serialization.to_state_dict", "flax.serialization.to_bytes",
        "flax.core.freeze", "flax.core.unfreeze", "flax.core.frozen_dict.freeze", "flax.core.frozen_dict.unfreeze",
        "flax.core.FrozenDict", "jax.experimental.multihost_utils.process_allgather", "jax.block_until_ready",
        "copy.deepcopy", "copy.copy",
    }
)
TREE_MAPS = frozenset({"jax.tree.map", "jax.tree_util.tree_map", "jax.tree_map"})
# Wrappers around a step function: calling the result calls the function.
FUNCTION_WRAPPERS = frozenset(
    {
        "jax.jit", "jax.pmap", "jax.vmap", "functools.partial", "jax.checkpoint", "jax.remat",
        "flax.nnx.jit", "jax.named_call", "equinox.filter_jit", "jax.shard_map",
        "jax.experimental.shard_map.shard_map",
    }
)
LINEN_TRAIN_STATE = "flax.training.train_state.TrainState"
NNX_TRAIN_STATE = "flax.nnx.TrainState"

PARAMS_NAMES = frozenset({"params", "model_params", "net_params", "network_params", "trainable_params", "weights", "variables"})
OPT_NAMES = frozenset({"opt_state", "optimizer_state", "opt_states", "optim_state", "tx_state", "optstate"})
# Dict keys / composite item names that say what an entry holds.
PARAMS_KEYS = frozenset({"params", "model", "weights", "model_params", "variables", "net", "network"})
# Keys that name the model but may hold the whole train state (orbax's examples save
# `{'model': state}`): an entry of unknown value under them may carry the optimizer state.
MODEL_HOLDER_KEYS = frozenset({"model", "net", "network"})
# Keys whose entry holds no optimizer state, whatever its value.
NON_OPT_KEYS = frozenset(
    {
        "step", "steps", "global_step", "epoch", "epochs", "iteration", "rng", "rngs", "key", "prng_key", "seed",
        "config", "cfg", "hparams", "hyperparams", "args", "metadata", "meta", "metrics", "loss", "losses",
        "batch_stats", "lr", "learning_rate", "data", "dataset", "dataset_state", "data_iterator", "model_config",
        "params", "model", "weights", "model_params", "variables", "ema", "ema_params", "best_params",
        "accuracy", "acc", "best_acc", "best_loss", "best_metric", "timestamp", "time", "version",
    }
)

# A checkpoint entry that records where the run stands (`step`, `epoch`, `train_step`):
# what a resume reads back.
POSITION_KEY = re.compile(r"(^|_)(step|steps|epoch|epochs|iteration|iter)(_|$)", re.IGNORECASE)


def orbax_member(qualname: Optional[str]) -> Optional[str]:
    """'orbax.checkpoint.args.StandardSave' -> 'StandardSave'; None outside orbax, and
    in orbax's v1 API (`orbax.checkpoint.v1`, `...experimental.v1`), whose classes share
    v0's names but not its call forms (v1's `training.Checkpointer.save(step, tree)` is
    current): v1 is not modelled, so it is neither a save site nor a legacy call. Nor
    are the emergency (multi-tier) managers of `orbax.checkpoint.experimental.emergency`,
    whose constructors take a mesh and an abstract state where v0's took Checkpointers;
    their saves still count through the `ocp.args` they are given."""
    if qualname is None or not (qualname == ORBAX or qualname.startswith(ORBAX + ".")):
        return None
    if _V1.search(qualname) or _EMERGENCY.search(qualname):
        return None
    return qualname.rsplit(".", 1)[-1]


def opt_key(key: str) -> bool:
    """A dict key / composite item name that says the entry is optimizer state."""
    k = key.lower()
    return "opt" in k or "state" in k or "tx" == k


def params_key(key: str) -> bool:
    """A dict key / composite item name that says the entry is the parameters."""
    k = key.lower()
    return k in PARAMS_KEYS or k.endswith("_params")


def params_name(name: str) -> bool:
    """A variable name that says it holds the parameters."""
    return name in PARAMS_NAMES or (name.endswith("_params") and name != "hparams")


def opt_name(name: str) -> bool:
    """A variable name (or key) that says it holds optimizer state."""
    return name in OPT_NAMES or name.endswith("opt_state")
