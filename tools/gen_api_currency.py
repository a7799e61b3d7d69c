"""Generate rules/api_currency.toml, the API-currency table read by OPX701-OPX704.

The linter never imports optax, jax or flax; this script does. For every row of the
hand tables below it *probes* the installed libraries (attribute access, import, a
small call) and writes down what they really do today: the exception a removed name
raises, the DeprecationWarning a deprecated one emits, the version the library names.
A row whose probe shows neither (a name was un-deprecated, or its removal is not yet
done) stops the generation, so the table can only say what the installed versions do.

Not duplicated here: optax's module-``__getattr__`` deprecations (``optax.dpsgd``,
``optax.tree_utils.tree_scalar_mul``, ...) already live in rules/optax_api.toml's
``[deprecated]`` table (tools/gen_optax_api.py); the linter merges both at load time.
This table only adds call recipes for the rows of that table without a same-object
replacement (``tree_l1_norm`` -> ``tree_norm(..., ord=1)``).

Usage (from the repo root):
    .venv/bin/python tools/gen_api_currency.py            # rewrite rules/api_currency.toml
    .venv/bin/python tools/gen_api_currency.py --check    # exit 1 if the file is stale

tests/test_api_currency.py checks the committed table against a fresh generation and
re-runs every claimed behaviour (exception type, warning category, fix equivalence).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import importlib.util
import inspect
import re
import sys
import types
import typing
import warnings
from pathlib import Path
from typing import Any, Callable

REPO_ROOT = Path(__file__).resolve().parent.parent
OUTPUT = REPO_ROOT / "rules" / "api_currency.toml"
OPTAX_API = REPO_ROOT / "rules" / "optax_api.toml"
COMMAND = ".venv/bin/python tools/gen_api_currency.py"
LIBRARIES = ("optax", "flax", "jax", "orbax-checkpoint")

# --- hand tables ---------------------------------------------------------------------
# Row fields:
#   rule         OPX701 (optax names) | OPX703 (legacy flax optimizer API) | OPX704 (jax
#                parallel APIs and flax.jax_utils.pmean)
#   kind         name (default) | module (every attribute below it is covered too)
#   probe        how the generator observes the behaviour: "access" (getattr / import,
#                default), "call:<python expression>" (the warning fires when called),
#                "doc" (documented deprecation only: the docstring says so)
#   replacement  dotted path of what to use instead ("" if there is none)
#   hint         the advice of the message when "use <replacement>" does not say it all
#   fix          rename (the replacement is the same object, or was when the old name
#                existed: `evidence` says which) | call (equivalent when called; see
#                `call`) | none
#   call         params: the old parameter names in order; positional: how many leading
#                arguments stay positional; rename: old keyword -> new keyword; add:
#                keywords the replacement needs to behave the same (added when absent);
#                the generator adds keywords: the old parameters a call may pass by
#                keyword (their new name is a keyword of the replacement)
#   evidence     why the fix is safe (checked again by tests/test_api_currency.py)
#   since        version text, when the library's message does not name one

_GONE_018 = "removed in optax 0.1.8 (exported through 0.1.7)"

ROWS: dict[str, dict[str, Any]] = {
    # -- optax: removed names (AttributeError) ----------------------------------
    # since: the first release whose optax/__init__.py no longer exports the name (the
    # published wheels of 0.1.4 through 0.2.8 read with unzip; nothing imported)
    "optax.additive_weight_decay": dict(
        rule="OPX701", replacement="optax.add_decayed_weights", fix="rename", since=_GONE_018,
        evidence="optax/_src/transform.py (0.1.x) defined `additive_weight_decay = "
                 "add_decayed_weights`: the same function under its old name"),
    "optax.AdditiveWeightDecayState": dict(
        rule="OPX701", replacement="optax.AddDecayedWeightsState", fix="rename", since=_GONE_018,
        evidence="optax/_src/transform.py (0.1.x) defined `AdditiveWeightDecayState = "
                 "AddDecayedWeightsState`"),
    "optax.cast_tree": dict(rule="OPX701", replacement="optax.tree.cast"),
    "optax.hessian_diag": dict(
        rule="OPX701", replacement="optax.second_order.hessian_diag", since=_GONE_018,
        hint="use optax.second_order.hessian_diag (itself deprecated, removed in optax 0.2.9)"),
    "optax.fisher_diag": dict(
        rule="OPX701", replacement="optax.second_order.fisher_diag", since=_GONE_018,
        hint="use optax.second_order.fisher_diag (itself deprecated, removed in optax 0.2.9)"),
    "optax.hvp": dict(
        rule="OPX701", replacement="optax.second_order.hvp", since=_GONE_018,
        hint="use optax.second_order.hvp (itself deprecated, removed in optax 0.2.9)"),
    "optax.scale_by_fromage": dict(
        rule="OPX701", hint="no direct replacement: optax.fromage is the complete optimizer"),
    "optax.ScaleByFromageState": dict(rule="OPX701", since="removed in optax 0.1.5 (exported through 0.1.4)"),
    "optax.maybe_update": dict(rule="OPX701", since="removed in optax 0.2.5 (exported through 0.2.4)"),
    "optax.control_variates": dict(rule="OPX701", kind="module", since=_GONE_018),
    "optax.losses.multiclass_logistic_loss": dict(
        rule="OPX701", replacement="optax.losses.softmax_cross_entropy_with_integer_labels",
        fix="rename",
        evidence="optax/losses/_classification.py keeps the old body: "
                 "`return softmax_cross_entropy_with_integer_labels(logits, labels)`"),
    "optax.losses.binary_logistic_loss": dict(
        rule="OPX701", replacement="optax.losses.sigmoid_binary_cross_entropy", fix="rename",
        evidence="optax/losses/_classification.py keeps the old body: "
                 "`return sigmoid_binary_cross_entropy(logits, labels)`"),
    "optax.losses.binary_sparsemax_loss": dict(
        rule="OPX701", replacement="optax.losses.sparsemax_loss", fix="rename",
        evidence="optax/losses/_classification.py keeps the old body: "
                 "`return sparsemax_loss(logits, labels)`"),
    # -- optax: deprecated when called -------------------------------------------
    "optax.global_norm": dict(
        rule="OPX701", probe="call:optax.global_norm(jnp.ones(3))",
        replacement="optax.tree.norm", fix="call",
        call=dict(params=["updates"], positional=1),
        evidence="optax/_src/linear_algebra.py: global_norm(updates) returns "
                 "optax.tree.norm(updates)"),
    "optax.inject_stateful_hyperparams": dict(
        rule="OPX701", probe="call:optax.inject_stateful_hyperparams(optax.sgd)",
        replacement="optax.inject_hyperparams", fix="rename", forwards=True,
        evidence="optax/schedules/_inject.py: returns inject_hyperparams(inner_factory, "
                 "static_args, hyperparam_dtype); same signature"),
    "optax.schedules.inject_stateful_hyperparams": dict(
        rule="OPX701", probe="call:optax.schedules.inject_stateful_hyperparams(optax.sgd)",
        replacement="optax.schedules.inject_hyperparams", fix="rename", forwards=True,
        evidence="optax/schedules/_inject.py: returns inject_hyperparams(inner_factory, "
                 "static_args, hyperparam_dtype); same signature"),
    "optax.optimistic_adam": dict(
        rule="OPX701", probe="call:optax.optimistic_adam(0.1)",
        replacement="optax.optimistic_adam_v2",
        hint="use optax.optimistic_adam_v2 (its arguments differ: check them)"),
    "optax.convex_kl_divergence": dict(
        rule="OPX701", probe="call:optax.convex_kl_divergence(jnp.zeros(3), jnp.ones(3))",
        replacement="optax.generalized_kl_divergence", fix="rename", forwards=True,
        evidence="optax/losses/_classification.py: returns generalized_kl_divergence("
                 "log_predictions, targets, axis=axis, where=where); same signature"),
    "optax.losses.convex_kl_divergence": dict(
        rule="OPX701",
        probe="call:optax.losses.convex_kl_divergence(jnp.zeros(3), jnp.ones(3))",
        replacement="optax.losses.generalized_kl_divergence", fix="rename", forwards=True,
        evidence="optax/losses/_classification.py: returns generalized_kl_divergence("
                 "log_predictions, targets, axis=axis, where=where); same signature"),
    "optax.second_order.hvp": dict(
        rule="OPX701", probe="call:optax.second_order.hvp()", probe_raises=True,
        hint="no replacement in optax (it is removed in 0.2.9): write it with jax.jvp of jax.grad"),
    "optax.second_order.hessian_diag": dict(
        rule="OPX701", probe="call:optax.second_order.hessian_diag()", probe_raises=True,
        hint="no replacement in optax (it is removed in 0.2.9)"),
    "optax.second_order.fisher_diag": dict(
        rule="OPX701", probe="call:optax.second_order.fisher_diag()", probe_raises=True,
        hint="no replacement in optax (it is removed in 0.2.9)"),
    "optax.InjectHyperparamsState": dict(
        rule="OPX701", probe="doc", replacement="optax.InjectStatefulHyperparamsState",
        hint="use optax.InjectStatefulHyperparamsState: inject_hyperparams builds that class, "
             "so isinstance(state, optax.InjectHyperparamsState) is always False"),
    # -- flax: the optimizer API that optax replaced -------------------------------
    "flax.optim": dict(
        rule="OPX703", kind="module", replacement="optax",
        hint="use optax (with flax.training.train_state.TrainState or nnx.Optimizer)",
        since="removed in flax 0.6.0 (deprecated in 0.4.1)"),
    # -- jax / flax parallel APIs -----------------------------------------------
    "jax.device_put_replicated": dict(
        rule="OPX704", replacement="jax.device_put",
        hint="use jax.device_put(x, NamedSharding(mesh, P())) (flax.jax_utils.replicate "
             "does this for you)",
        since="deprecated in jax 0.8.1, removed for 0.10.0"),
    "jax.device_put_sharded": dict(
        rule="OPX704", replacement="jax.device_put",
        hint="use jax.device_put(jnp.stack(shards), NamedSharding(mesh, P('batch')))",
        since="deprecated in jax 0.8.1, removed for 0.10.0"),
    "jax.experimental.shard_map.shard_map": dict(
        rule="OPX704", replacement="jax.shard_map", fix="call",
        call=dict(params=["f", "mesh", "in_specs", "out_specs", "check_rep"], positional=1,
                  rename={"check_rep": "check_vma"}),
        evidence="jax/experimental/shard_map.py and jax/_src/shard_map.py: both call "
                 "_shard_map(f, mesh=, in_specs=, out_specs=, axis_names=<empty>, "
                 "check_vma=<check_rep>)"),
    # Release versions below read in the published jax wheels and sdists (jax/experimental/
    # pjit.py and the presence of jax/experimental/maps.py), nothing imported.
    "jax.experimental.pjit.pjit": dict(
        rule="OPX704", replacement="jax.jit",
        hint="use jax.jit (in_shardings/out_shardings; the old *_axis_resources "
             "arguments are gone)",
        since="deprecated in jax 0.8.0 (0.7.2 does not warn)"),
    "jax.experimental.pjit.PartitionSpec": dict(
        rule="OPX704", replacement="jax.sharding.PartitionSpec",
        since="removed in jax 0.4.11 (exported through 0.4.10)"),
    "jax.experimental.pjit.with_sharding_constraint": dict(
        rule="OPX704", replacement="jax.lax.with_sharding_constraint",
        since="deprecated in jax 0.4.16, removed in jax 0.4.24 (exported through 0.4.23)"),
    "jax.experimental.maps": dict(
        rule="OPX704", kind="module", replacement="jax.shard_map",
        since="removed in jax 0.4.31 (present through 0.4.30)",
        # The hint covers every name the module held, not only xmap (alpa imports its FrozenDict).
        hint="the module is gone as a whole; xmap became jax.shard_map, its Mesh is jax.sharding.Mesh, "
             "and a name it re-exported must be imported from where it lives now"),
    "flax.jax_utils.pmean": dict(
        rule="OPX704", probe="call:flax.jax_utils.pmean(jnp.ones(2), 'i')", probe_raises=True,
        replacement="jax.lax.pmean", fix="call",
        call=dict(params=["xs", "axis_name"], positional=2, rename={"xs": "x"}),
        evidence="flax/jax_utils.py: pmean(xs, axis_name) returns lax.pmean(xs, axis_name)"),
}

# Call recipes for rows of optax_api.toml's [deprecated] table that have no same-object
# replacement. Status and message stay in optax_api.toml.
SUPPLEMENTS: dict[str, dict[str, Any]] = {
    "optax.tree_utils.tree_l2_norm": dict(
        replacement="optax.tree_utils.tree_norm", fix="call",
        call=dict(params=["tree", "squared"], positional=1),
        evidence="tree_l2_norm is functools.partial(tree_norm, ord=2); tree_norm's "
                 "default ord=None is the 2-norm"),
    "optax.tree_utils.tree_l1_norm": dict(
        replacement="optax.tree_utils.tree_norm", fix="call",
        call=dict(params=["tree", "squared"], positional=1, add={"ord": 1}),
        evidence="tree_l1_norm is functools.partial(tree_norm, ord=1)"),
    "optax.tree_utils.tree_linf_norm": dict(
        replacement="optax.tree_utils.tree_norm", fix="call",
        call=dict(params=["tree", "squared"], positional=1, add={"ord": "inf"}),
        evidence="tree_linf_norm is functools.partial(tree_norm, ord='inf')"),
}

# Deprecated keyword arguments: callable -> {old keyword: new keyword}. The call is
# probed with the old keyword; the fix renames it when the new one is not also given.
ARGUMENTS: dict[str, dict[str, Any]] = {
    "optax.add_noise": dict(
        rule="OPX701", rename={"seed": "key"}, probe="optax.add_noise(0.01, 0.55, seed=0)",
        evidence="optax/transforms/_adding.py: `key = seed` when only seed is given"),
    "optax.noisy_sgd": dict(
        rule="OPX701", rename={"seed": "key"}, probe="optax.noisy_sgd(0.1, seed=0)",
        evidence="optax/_src/alias.py passes key and seed to add_noise unchanged"),
    "optax.contrib.differentially_private_aggregate": dict(
        rule="OPX701", rename={"seed": "key"},
        probe="optax.contrib.differentially_private_aggregate(1.0, 0.1, seed=0)",
        evidence="optax/contrib/_privacy.py: jax.random.key(seed) for seed, "
                 "canonicalize_key(key) for an int key: the same key"),
}

# The first release in which each API a fix writes exists, so a fix is offered as safe
# only when the user's target version (`target-versions` in the config) has it. Checked
# against the released wheels (pip download optax==X --no-deps, then the package's
# __init__ and signatures): optax 0.1.7-0.2.7, flax 0.10.0/0.10.7, jax 0.6.0/0.6.1/0.7.0.
# Keys: a replacement path, `callable(keyword=)` for a keyword, or a call form.
AVAILABLE_SINCE: dict[str, str] = {
    "jax.lax.pmean": "jax 0.1.0",
    "jax.shard_map": "jax 0.6.1",  # 0.6.0's jax/__init__.py has no shard_map
    "optax.AddDecayedWeightsState": "optax 0.1.0",
    "optax.add_decayed_weights": "optax 0.1.0",
    "optax.generalized_kl_divergence": "optax 0.2.7",
    "optax.losses.generalized_kl_divergence": "optax 0.2.7",
    "optax.tree.norm": "optax 0.2.5",  # the optax.tree namespace is new in 0.2.5
    "optax.inject_hyperparams": "optax 0.1.0",
    "optax.schedules.inject_hyperparams": "optax 0.1.8",  # optax.schedules is new in 0.1.8
    "optax.losses.sigmoid_binary_cross_entropy": "optax 0.1.8",  # optax.losses is new in 0.1.8
    "optax.losses.softmax_cross_entropy_with_integer_labels": "optax 0.1.8",
    "optax.losses.sparsemax_loss": "optax 0.2.3",
    "optax.tree_utils.tree_norm": "optax 0.2.5",
    "optax.tree_utils.tree_scale": "optax 0.2.5",
    "optax.tree_utils.tree_add_scale": "optax 0.2.5",
    "optax.contrib.differentially_private_aggregate": "optax 0.1.8",
    "optax.contrib.DifferentiallyPrivateAggregateState": "optax 0.1.8",
    "optax.contrib.dpsgd": "optax 0.1.8",
    "optax.add_noise(key=)": "optax 0.2.5",  # earlier releases take only seed=
    "optax.noisy_sgd(key=)": "optax 0.2.5",
    "optax.contrib.differentially_private_aggregate(key=)": "optax 0.2.5",
    "flax.nnx.Optimizer(wrt=)": "flax 0.10.0",  # the keyword exists, defaulting to nnx.Param
    "flax.nnx.Optimizer.update(model, grads)": "flax 0.11.0",  # 0.10.x: update(grads)
}

# The first flax release that needs a newer jax, with that jax (the published wheels'
# METADATA, `Requires-Dist: jax>=...`, read for flax 0.7.5-0.12.8): a project that
# pins jax below one of them installs a flax older than that release, so an API that
# changed in a later flax is a migration note there (OPX703).
REQUIRES: dict[str, str] = {
    "flax 0.8.5": "jax 0.4.27",  # 0.7.5-0.8.4: jax>=0.4.19
    "flax 0.10.5": "jax 0.5.1",
    "flax 0.10.7": "jax 0.6.0",  # 0.11.x too
    "flax 0.12.0": "jax 0.7.1",
    "flax 0.12.1": "jax 0.8.1",
    "flax 0.12.7": "jax 0.10.0",
    # optax (its wheels' METADATA, 0.1.3-0.2.8): jax>=0.1.55 through 0.2.2
    "optax 0.2.3": "jax 0.4.27",
    "optax 0.2.6": "jax 0.5.3",
}

# Private optax names that later releases no longer define, with the first release
# without them (read in the published wheels' optax/_src modules): a project held below
# that release by its pins still imports them (OPX702 is then a migration note).
PRIVATE_REMOVED: dict[str, str] = {
    "optax._src.clipping": "0.2.7",  # the module itself, present through 0.2.6
    "optax._src.loss": "0.1.8",  # present through 0.1.7
    "optax._src.privacy": "0.1.8",
    "optax._src.second_order": "0.1.8",
    "optax._src.alias.ScalarOrSchedule": "0.1.8",  # a module-level alias through 0.1.7
    "optax._src.transform.update_moment": "0.2.3",  # moved out of transform.py in 0.2.3
    "optax._src.transform.update_moment_per_elem_norm": "0.2.3",
    "optax._src.transform.bias_correction": "0.2.3",
}


def build_requires() -> dict[str, str]:
    """REQUIRES, checked against the installed flax: the row at or below its release
    names the jax it requires."""
    installed = _version_tuple(importlib.metadata.version("flax"))
    rows = [(k, v) for k, v in REQUIRES.items() if k.startswith("flax ") and _version_tuple(k.split()[1]) <= installed]
    wanted = [r for r in importlib.metadata.requires("flax") or [] if re.match(r"jax\s*>=", r) and "extra" not in r]
    if rows and wanted and _version_tuple(wanted[0]) != _version_tuple(rows[-1][1]):
        raise SystemExit(f"gen_api_currency: installed flax requires {wanted[0]}, the last REQUIRES row says {rows[-1][1]}")
    return dict(REQUIRES)


def build_private_removed() -> dict[str, str]:
    """PRIVATE_REMOVED, checked: none of the names is defined by the installed optax."""
    for path in PRIVATE_REMOVED:
        if path in REMOVED_PRIVATE_MODULES:
            continue  # build_removed_private_modules checks the module is gone
        module, _, name = path.rpartition(".")
        if hasattr(importlib.import_module(module), name):
            raise SystemExit(f"gen_api_currency: {path} is still defined by the installed optax")
    if set(REMOVED_PRIVATE_MODULES) - set(PRIVATE_REMOVED):
        raise SystemExit("gen_api_currency: a removed private module has no PRIVATE_REMOVED release")
    return dict(sorted(PRIVATE_REMOVED.items()))


# Private optax modules that older code imports from and that no longer exist.
REMOVED_PRIVATE_MODULES = ("optax._src.clipping", "optax._src.privacy", "optax._src.loss",
                           "optax._src.second_order")

# Typing aliases (not callables) that optax exports; private modules re-export them.
TYPING_ALIAS_TYPES = (typing._GenericAlias, types.GenericAlias)  # type: ignore[attr-defined]


# --- helpers ---------------------------------------------------------------------------

def _load_optax_api_generator() -> Any:
    spec = importlib.util.spec_from_file_location("gen_optax_api", REPO_ROOT / "tools" / "gen_optax_api.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GEN_OPTAX = _load_optax_api_generator()
_value, _key = GEN_OPTAX._value, GEN_OPTAX._key


class Missing(Exception):
    """A dotted path that does not resolve; carries the exception it raised."""

    def __init__(self, exc: BaseException) -> None:
        super().__init__(str(exc))
        self.exc = exc


def resolve(path: str) -> Any:
    """Import the longest importable prefix of `path`, then getattr the rest."""
    parts = path.split(".")
    error: BaseException | None = None
    for i in range(len(parts), 0, -1):
        name = ".".join(parts[:i])
        try:
            obj = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name is None or not (name == exc.name or name.startswith(exc.name + ".")):
                raise  # the module exists but one of its own imports is missing
            error = error or exc
            continue
        break
    else:
        raise Missing(error)
    for attr in parts[i:]:
        try:
            obj = getattr(obj, attr)
        except AttributeError as exc:
            raise Missing(exc) from exc
    return obj


def describe_exc(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _namespace() -> dict[str, Any]:
    import flax
    import flax.jax_utils  # noqa: F401
    import jax
    import jax.numpy as jnp
    import optax
    import optax.contrib  # noqa: F401

    return {"optax": optax, "jax": jax, "jnp": jnp, "flax": flax}


def _parent_module(path: str) -> tuple[types.ModuleType | None, list[str]]:
    """The longest importable module prefix of `path` and the attribute names after it."""
    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        name = ".".join(parts[:i])
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return importlib.import_module(name), parts[i:]
        except ModuleNotFoundError as exc:
            if exc.name is None or not (name == exc.name or name.startswith(exc.name + ".")):
                raise
    return None, parts


def observe(path: str, row: dict[str, Any], ns: dict[str, Any]) -> tuple[str, str, str]:
    """(status, trigger, observed) from probing the installed libraries."""
    probe = row.get("probe", "access")
    if row.get("kind", "name") == "module":
        try:
            importlib.import_module(path)
        except ModuleNotFoundError as exc:
            return "removed", "import", describe_exc(exc)
        raise SystemExit(f"gen_api_currency: module {path} imports fine")
    parent, rest = _parent_module(path)
    # Module __getattr__ deprecations (jax and optax share the pattern): read the table,
    # because jax caches its __getattr__ and warns only on the first access per process.
    table = getattr(parent, "_deprecations", None)
    if isinstance(table, dict) and len(rest) == 1 and rest[0] in table:
        message, obj = table[rest[0]]
        if obj is None:
            return "removed", "access", f"AttributeError: {message}"
        return "deprecated", "access", f"DeprecationWarning: {message}"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            obj = resolve(path)
        except Missing as missing:
            return "removed", "access", describe_exc(missing.exc)
        access = [w for w in caught if issubclass(w.category, DeprecationWarning)]
        if access:
            return "deprecated", "access", f"{access[0].category.__name__}: {access[0].message}"
    if probe == "doc":
        doc = inspect.getdoc(obj) or ""
        match = re.search(r"\.\. deprecated::\s*(\S+)", doc)
        if match is None:
            raise SystemExit(f"gen_api_currency: {path}: no deprecation in its docstring")
        first = doc.strip().splitlines()[0]
        return "deprecated", "doc", f"docstring: {first} (.. deprecated:: {match.group(1)})"
    if probe.startswith("call:"):
        expression = probe[len("call:"):]
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                eval(expression, dict(ns))  # noqa: S307 - fixed expressions from this file
            except Exception:
                if not row.get("probe_raises"):
                    raise
        found = [w for w in caught if issubclass(w.category, DeprecationWarning)]
        if not found:
            raise SystemExit(f"gen_api_currency: {path}: `{expression}` emitted no DeprecationWarning")
        return "deprecated", "call", f"{found[0].category.__name__}: {found[0].message}"
    raise SystemExit(f"gen_api_currency: {path} exists and does not warn on access; "
                     "give it a call: or doc probe, or drop the row")


_VERSION = re.compile(
    r"(?:v|version |deprecated in v?|removed in (?:optax )?|since (?:Flax )?|as of (?:Flax )?|"
    r"\.\. deprecated:: )(\d+\.\d+(?:\.\d+)?)", re.IGNORECASE)


def since_of(observed: str, row: dict[str, Any]) -> str:
    if row.get("since"):
        return row["since"]
    found = _VERSION.findall(observed)
    return ", ".join(dict.fromkeys(found))


def check_replacement(path: str, row: dict[str, Any]) -> None:
    replacement = row.get("replacement", "")
    if not replacement:
        return
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            new = resolve(replacement)
        except Missing as missing:
            raise SystemExit(f"gen_api_currency: {path}: replacement {replacement} is missing: {missing}")
    if [w for w in caught if issubclass(w.category, DeprecationWarning)]:
        raise SystemExit(f"gen_api_currency: {path}: replacement {replacement} is itself deprecated")
    recipe = row.get("call")
    if recipe is None:
        return
    sig = inspect.signature(new)
    params = list(sig.parameters.values())
    positional_ok = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if recipe.get("positional", 0) > len(positional_ok):
        raise SystemExit(f"gen_api_currency: {path}: {replacement} takes fewer positional arguments")
    keywords = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    for old in recipe["params"][recipe.get("positional", 0):]:
        new_name = recipe.get("rename", {}).get(old, old)
        if new_name not in keywords:
            raise SystemExit(f"gen_api_currency: {path}: {replacement} has no keyword {new_name!r}")
    for old, new_name in recipe.get("rename", {}).items():
        if new_name not in keywords:
            raise SystemExit(f"gen_api_currency: {path}: {replacement} has no keyword {new_name!r}")
    for name in recipe.get("add", {}):
        if name not in keywords:
            raise SystemExit(f"gen_api_currency: {path}: {replacement} has no keyword {name!r}")
    # Old parameters a call may pass by keyword: their (renamed) name is a keyword of
    # the replacement too (global_norm(updates=g) has no tree.norm(updates=g)).
    recipe["keywords"] = [old for old in recipe["params"]
                          if recipe.get("rename", {}).get(old, old) in keywords]


def check_forwarding(path: str, row: dict[str, Any]) -> None:
    """A `rename` fix for a deprecated wrapper needs the replacement's exact signature."""
    if not row.get("forwards"):
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        old, new = resolve(path), resolve(row["replacement"])
    old_sig = [(p.name, p.kind, p.default) for p in inspect.signature(old).parameters.values()]
    new_sig = [(p.name, p.kind, p.default) for p in inspect.signature(new).parameters.values()]
    if old_sig != new_sig:
        raise SystemExit(f"gen_api_currency: {path}: signature differs from {row['replacement']}")


# --- sections ------------------------------------------------------------------------

def build_names(ns: dict[str, Any]) -> dict[str, dict[str, Any]]:
    rows: dict[str, dict[str, Any]] = {}
    for path, row in sorted(ROWS.items()):
        status, trigger, observed = observe(path, row, ns)
        check_replacement(path, row)
        check_forwarding(path, row)
        fix = row.get("fix", "none")
        if fix != "none" and not row.get("evidence"):
            raise SystemExit(f"gen_api_currency: {path}: a fix needs evidence")
        out: dict[str, Any] = {
            "rule": row["rule"], "kind": row.get("kind", "name"), "status": status,
            "trigger": trigger, "observed": observed, "since": since_of(observed, row),
            "replacement": row.get("replacement", ""), "hint": row.get("hint", ""), "fix": fix,
        }
        if "call" in row:
            out["call"] = row["call"]
        if row.get("evidence"):
            out["evidence"] = row["evidence"]
        rows[path] = out
    return rows


def build_supplements(deprecated: dict[str, Any]) -> dict[str, dict[str, Any]]:
    rows = {}
    for path, row in sorted(SUPPLEMENTS.items()):
        key = path.removeprefix("optax.")
        if key not in deprecated:
            raise SystemExit(f"gen_api_currency: {path} is not in optax_api.toml's [deprecated]")
        if deprecated[key].get("same_as"):
            raise SystemExit(f"gen_api_currency: {path} has a same-object replacement already")
        if path in ROWS:
            raise SystemExit(f"gen_api_currency: {path} is both a row and a supplement")
        check_replacement(path, row)
        rows[path] = {"rule": "OPX701", "source": "optax_api", "replacement": row["replacement"],
                      "fix": row["fix"], "call": row["call"], "evidence": row["evidence"]}
    return rows


def build_arguments(ns: dict[str, Any]) -> dict[str, dict[str, Any]]:
    rows = {}
    for path, row in sorted(ARGUMENTS.items()):
        func = resolve(path)
        params = inspect.signature(func).parameters
        for old, new in row["rename"].items():
            if old not in params or new not in params:
                raise SystemExit(f"gen_api_currency: {path} lacks {old!r} or {new!r}")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            eval(row["probe"], dict(ns))  # noqa: S307
        found = [w for w in caught if issubclass(w.category, DeprecationWarning)]
        if not found:
            raise SystemExit(f"gen_api_currency: {path}: `{row['probe']}` emitted no DeprecationWarning")
        observed = f"{found[0].category.__name__}: {found[0].message}"
        rows[path] = {"rule": row["rule"], "rename": row["rename"], "observed": observed,
                      "since": since_of(observed, {}), "evidence": row["evidence"]}
    return rows


def _public_objects(optax: types.ModuleType) -> tuple[dict[int, list[str]], dict[int, Any]]:
    """id(obj) -> public paths (canonical order), for optax callables and typing aliases."""
    entries, _ = GEN_OPTAX.collect(optax)
    ranks = {ns: i for i, (ns, _) in enumerate(GEN_OPTAX.discover_namespaces(optax))}
    paths: dict[int, list[str]] = {}
    objects: dict[int, Any] = {}
    for ident, entry in entries.items():
        paths[ident] = [f"optax.{p}" for p in entry.paths]
        objects[ident] = entry.obj
    for ns, mod in GEN_OPTAX.discover_namespaces(optax):
        if ns.startswith("experimental"):
            continue
        for name in dir(mod):
            obj = getattr(mod, name)
            if not name.startswith("_") and isinstance(obj, TYPING_ALIAS_TYPES):
                paths.setdefault(id(obj), []).append(f"optax.{ns + '.' if ns else ''}{name}")
                objects[id(obj)] = obj

    def rank(path: str) -> tuple[int, str]:
        ns = path.removeprefix("optax.").rpartition(".")[0]
        return (ranks.get(ns, len(ranks)), path)

    return {k: sorted(v, key=rank) for k, v in paths.items()}, objects


def _private_modules(optax: types.ModuleType) -> list[tuple[str, types.ModuleType]]:
    """Every importable private optax module (tests and test helpers left out)."""
    # From the files: optax/_src has no __init__.py, so pkgutil does not walk into it.
    root = Path(optax.__file__).resolve().parent
    names = sorted(
        ".".join(("optax",) + f.relative_to(root).with_suffix("").parts).removesuffix(".__init__")
        for f in root.rglob("*.py"))
    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in names:
            parts = name.split(".")
            if not any(p.startswith("_") for p in parts[1:]) or parts[-1].endswith("_test") \
                    or "test_utils" in parts[-1] or parts[-1] == "conftest":
                continue
            try:
                out.append((name, importlib.import_module(name)))
            except Exception:  # pragma: no cover - optional dependencies of a private module
                continue
    return out


def build_private(optax: types.ModuleType) -> dict[str, str]:
    """`optax._src.alias.adamw` -> `optax.adamw`: private paths of public objects
    (identity-checked), preferring a public home with the same leaf name."""
    public, objects = _public_objects(optax)
    out: dict[str, str] = {}
    for name, module in _private_modules(optax):
        for attr, obj in sorted(vars(module).items()):
            if attr.startswith("_") or id(obj) not in public or objects[id(obj)] is not obj:
                continue
            homes = public[id(obj)]
            same_leaf = [h for h in homes if h.rpartition(".")[2] == attr]
            if isinstance(obj, TYPING_ALIAS_TYPES) and not same_leaf:
                continue  # a typing alias is only "the same" under its own name
            out[f"{name}.{attr}"] = (same_leaf or homes)[0]
    return out


def build_private_names(optax: types.ModuleType) -> dict[str, list[str]]:
    """`optax._src.transform` -> the names it defines: importing any other name from it
    fails (`from optax._src.transform import OptState` is an ImportError in 0.2.8)."""
    return {name: sorted(a for a in vars(module) if not a.startswith("_"))
            for name, module in _private_modules(optax)}


def build_removed_private_modules() -> dict[str, str]:
    out = {}
    for name in REMOVED_PRIVATE_MODULES:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as exc:
            out[name] = describe_exc(exc)
            continue
        raise SystemExit(f"gen_api_currency: {name} exists again; drop it from REMOVED_PRIVATE_MODULES")
    return out


def build_nnx() -> dict[str, Any]:
    """What flax's nnx.Optimizer does with the pre-0.11 call forms."""
    import optax
    from flax import nnx

    homes = []
    for path in ("flax.nnx.Optimizer", "flax.nnx.training.optimizer.Optimizer", "flax.nnx.optimizer.Optimizer"):
        try:
            if resolve(path) is nnx.Optimizer:
                homes.append(path)
        except (Missing, ImportError):
            pass
    legacy_homes = [p for p in ("flax.nnx.ModelAndOptimizer", "flax.nnx.training.optimizer.ModelAndOptimizer")
                    if _resolves_to(p, nnx.ModelAndOptimizer)]
    wrt_default = inspect.signature(nnx.ModelAndOptimizer.__init__).parameters["wrt"].default
    if wrt_default is not nnx.Param:
        raise SystemExit("gen_api_currency: ModelAndOptimizer's wrt default is no longer nnx.Param")
    model = nnx.Linear(1, 1, rngs=nnx.Rngs(0))
    tx = optax.sgd(0.1)

    def error_of(thunk: Callable[[], Any]) -> str:
        try:
            thunk()
        except Exception as exc:  # the point is to record it
            return describe_exc(exc)
        raise SystemExit("gen_api_currency: a legacy nnx.Optimizer form no longer fails")

    optimizer = nnx.Optimizer(model, tx, wrt=nnx.Param)
    grads = nnx.state(model, nnx.Param)
    missing_wrt = error_of(lambda: nnx.Optimizer(model, tx))
    return {
        "homes": homes,
        "legacy_homes": legacy_homes,
        "legacy_wrt_default": "flax.nnx.Param",
        "missing_wrt": missing_wrt,
        "positional_wrt": error_of(lambda: nnx.Optimizer(model, tx, nnx.Param)),
        "one_arg_update": error_of(lambda: optimizer.update(grads)),
        "model_attribute": error_of(lambda: optimizer.model),
        "since": since_of(missing_wrt, {}),
    }


def _resolves_to(path: str, obj: Any) -> bool:
    try:
        return resolve(path) is obj
    except (Missing, ImportError):
        return False


def build_available(names: dict[str, dict[str, Any]], arguments: dict[str, dict[str, Any]]) -> dict[str, str]:
    """AVAILABLE_SINCE, checked: every fix's new API has an entry, no entry is newer than
    the installed library, and every path entry resolves in it."""
    needed = {row["replacement"] for row in names.values() if row.get("fix", "none") != "none" and row.get("replacement")}
    needed |= {f"{path}({new}=)" for path, row in arguments.items() for new in row["rename"].values()}
    needed |= {"flax.nnx.Optimizer(wrt=)", "flax.nnx.Optimizer.update(model, grads)"}
    missing = sorted(needed - set(AVAILABLE_SINCE))
    if missing:
        raise SystemExit(f"gen_api_currency: no AVAILABLE_SINCE entry for {missing}")
    for key, since in AVAILABLE_SINCE.items():
        library, _, version = since.partition(" ")
        installed = importlib.metadata.version(library)
        if _version_tuple(version) > _version_tuple(installed):
            raise SystemExit(f"gen_api_currency: {key} since {since}, newer than the installed {installed}")
        if "(" not in key:
            resolve(key)
    return dict(sorted(AVAILABLE_SINCE.items()))


def _version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text)[:3])


def build_table() -> dict[str, Any]:
    import tomllib

    import optax

    ns = _namespace()
    optax_api = tomllib.loads(OPTAX_API.read_text(encoding="utf-8"))
    deprecated = optax_api.get("deprecated", {})
    overlap = {p for p in ROWS if p.startswith("optax.") and p.removeprefix("optax.") in deprecated}
    if overlap:
        raise SystemExit(f"gen_api_currency: rows duplicate optax_api.toml [deprecated]: {sorted(overlap)}")
    names = build_names(ns)
    names.update(build_supplements(deprecated))
    arguments = build_arguments(ns)
    same_object = {f"optax.{k}": {"replacement": f"optax.{v['same_as']}", "fix": "rename"} for k, v in deprecated.items() if v.get("same_as")}
    return {
        "versions": {lib: importlib.metadata.version(lib) for lib in LIBRARIES},
        "names": dict(sorted(names.items())),
        "arguments": arguments,
        "available": build_available({**names, **same_object}, arguments),
        "requires": build_requires(),
        "private_removed": build_private_removed(),
        "nnx_optimizer": build_nnx(),
        "removed_private_modules": build_removed_private_modules(),
        "private": build_private(optax),
        "private_names": build_private_names(optax),
    }


# --- TOML rendering ----------------------------------------------------------------------

NAME_ORDER = ("rule", "source", "kind", "status", "trigger", "observed", "since", "replacement",
              "hint", "fix", "call", "evidence")
ARGUMENT_ORDER = ("rule", "rename", "observed", "since", "evidence")
CALL_ORDER = ("params", "positional", "keywords", "rename", "add")


def render(table: dict[str, Any]) -> str:
    versions = ", ".join(f"{k} {v}" for k, v in table["versions"].items())
    out = [
        f"# Generated by tools/gen_api_currency.py from {versions} — do not edit by hand.",
        f"# Regenerate with: {COMMAND}",
        "#",
        "# Read by OPX701-OPX704 (optax_lint/facts/api_currency.py). Every row was probed",
        "# against the installed libraries: `observed` is what they did.",
        "# [names.<dotted path>]: rule; kind (name | module: paths below it too); status",
        "#   (removed: raises | deprecated: warns); trigger (access | import | call | doc);",
        "#   since (versions the library names); replacement; hint; fix (rename: same object",
        "#   or a former alias | call: equivalent call per `call` | none); evidence.",
        "#   source = \"optax_api\": status and message are in optax_api.toml [deprecated].",
        "# [arguments.<callable>]: deprecated keyword -> its replacement.",
        "# [available]: the first release with each API a fix writes (checked against the",
        "#   released wheels); a fix needing a newer one than the target version is not safe.",
        "# [requires]: the first flax (or optax) release that needs a newer jax, and that jax",
        "#   (wheel metadata): a jax pin below it holds the library below that release.",
        "# [private_removed]: private optax modules and names later releases dropped, with",
        "#   the first release without them (read in the wheels).",
        "# [nnx_optimizer]: what flax's nnx.Optimizer does with the pre-0.11 call forms.",
        "# [removed_private_modules]: optax._src modules older code imports, now gone.",
        "# [private]: private optax path -> the public path of the same object.",
        "# [private_names]: every name each importable private optax module defines.",
        "",
        "[versions]",
    ]
    out += [f"{_key(k)} = {_value(v)}" for k, v in table["versions"].items()]
    out.append("")
    for path, row in table["names"].items():
        out.append(f"[names.{_key(path)}]")
        for field in NAME_ORDER:
            if field in row:
                out.append(f"{field} = {_value(row[field], CALL_ORDER)}")
        out.append("")
    for path, row in table["arguments"].items():
        out.append(f"[arguments.{_key(path)}]")
        out += [f"{f} = {_value(row[f])}" for f in ARGUMENT_ORDER]
        out.append("")
    out.append("[available]")
    out += [f"{_key(k)} = {_value(v)}" for k, v in table["available"].items()]
    out.append("")
    out.append("[requires]")
    out += [f"{_key(k)} = {_value(v)}" for k, v in table["requires"].items()]
    out.append("")
    out.append("[private_removed]")
    out += [f"{_key(k)} = {_value(v)}" for k, v in table["private_removed"].items()]
    out.append("")
    out.append("[nnx_optimizer]")
    out += [f"{_key(k)} = {_value(v)}" for k, v in table["nnx_optimizer"].items()]
    out += ["", "[removed_private_modules]"]
    out += [f"{_key(k)} = {_value(v)}" for k, v in table["removed_private_modules"].items()]
    out += ["", "[private]"]
    out += [f"{_key(k)} = {_value(v)}" for k, v in table["private"].items()]
    out += ["", "[private_names]"]
    out += [f"{_key(k)} = {_value(v)}" for k, v in table["private_names"].items()]
    return "\n".join(out).rstrip("\n") + "\n"


def generate() -> str:
    return render(build_table())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if the file is stale")
    parser.add_argument("--output", type=Path, default=OUTPUT)
    args = parser.parse_args(argv)
    text = generate()
    if args.check:
        current = args.output.read_text(encoding="utf-8") if args.output.exists() else ""
        if current != text:
            print(f"{args.output} is stale; run {COMMAND}", file=sys.stderr)
            return 1
        return 0
    args.output.write_text(text, encoding="utf-8")
    print(f"wrote {args.output} ({len(text.splitlines())} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
