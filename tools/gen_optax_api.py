"""Generate rules/optax_api.toml, the optax API table the linter reads at lint time.

The linter never imports optax; this script does, once, and writes down what the
static extraction needs: every public callable with its canonical name, kind,
signature summary, the dotted paths it is reachable under, whether `update()`
needs `params`/extra args, and for aliases the primitive chain they build.

Usage (from the repo root):
    .venv/bin/python tools/gen_optax_api.py            # rewrite rules/optax_api.toml
    .venv/bin/python tools/gen_optax_api.py --check    # exit 1 if the file is stale

Hand-maintained facts (classification overrides, params requirements, alias
expansions) live in the tables below; tests/test_optax_api_table.py checks them
against the installed optax by building and running the transformations.
"""

from __future__ import annotations

import argparse
import functools
import inspect
import json
import math
import re
import sys
import types
import warnings
from pathlib import Path
from typing import Any, Iterable

REPO_ROOT = Path(__file__).resolve().parent.parent
OUTPUT = REPO_ROOT / "rules" / "optax_api.toml"
COMMAND = ".venv/bin/python tools/gen_optax_api.py"

# Sub-namespaces in canonical-name priority order (top level always wins). Any
# other public optax sub-namespace found at run time is appended alphabetically.
NAMESPACE_PRIORITY = (
    "contrib",
    "transforms",
    "schedules",
    "tree_utils",
    "tree",
    "second_order",
    "losses",
    "projections",
    "assignment",
    "perturbations",
    "microbatching",
    "experimental.aggregating",
)

# When one object has several top-level names, this one is canonical
# (`optax.partition is optax.multi_transform`; the linter canonicalizes to the
# long-standing name). Otherwise the name equal to the object's __name__ wins.
PREFERRED_NAMES = frozenset({"multi_transform", "MultiTransformState"})

# Callables taking other transformations (kind = "wrapper").
WRAPPERS = frozenset({
    "chain", "named_chain", "masked", "multi_transform", "MultiSteps",
    "apply_if_finite", "inject_hyperparams", "inject_stateful_hyperparams",
    "flatten", "lookahead", "conditionally_mask", "conditionally_transform",
    "selective_transform", "with_extra_args_support",
    "contrib.mechanize", "contrib.sam", "contrib.schedule_free",
    "contrib.split_real_and_imaginary",
    "experimental.aggregating.process",
    "experimental.aggregating.add_mean_variance_to_opt",
})

# Non-wrapper, non-alias callables whose signature mentions GradientTransformation.
# Listed so that a new wrapper in a future optax fails generation until classified.
GT_PARAM_TRANSFORMS = frozenset({"monitor", "contrib.scale_by_galore"})

# GradientTransformation factories without a return annotation.
RETURNS_GT_UNANNOTATED = frozenset({
    "scale_by_factored_rms", "monitor", "contrib.dog", "contrib.dowg",
    "contrib.hutchinson_estimator_diag_hessian",
})

# update() fails without params (semantics §2, exp02, plus contrib's Hutchinson
# estimator; re-checked on a sample by the tests).
# Wrappers appear here only when they need params themselves (inheritance from the
# wrapped transformation is the linter's job).
NEEDS_PARAMS = frozenset({
    "adadelta", "adafactor", "adamaxw", "adamw", "adan", "adaptive_grad_clip",
    "add_decayed_weights", "fromage", "keep_params_nonnegative", "lamb", "lars",
    "lbfgs", "lion", "lookahead", "nadamw", "novograd",
    "scale_by_backtracking_linesearch", "scale_by_distance_over_gradients",
    "scale_by_factored_rms", "scale_by_lbfgs", "scale_by_novograd",
    "scale_by_param_block_norm", "scale_by_param_block_rms", "scale_by_trust_ratio",
    "scale_by_zoom_linesearch",
    "contrib.acprop", "contrib.ademamix", "contrib.cocob", "contrib.dadapt_adamw",
    "contrib.dog", "contrib.dowg", "contrib.galore",
    "contrib.hutchinson_estimator_diag_hessian", "contrib.madgrad",
    "contrib.mechanize", "contrib.momo", "contrib.momo_adam", "contrib.muon",
    "contrib.prodigy", "contrib.sam", "contrib.scale_by_cocob",
    "contrib.scale_by_madgrad", "contrib.schedule_free", "contrib.schedule_free_adamw",
    "contrib.schedule_free_sgd", "contrib.simplified_ademamix", "contrib.sophia",
})

# Keyword arguments update() requires besides params (semantics §2).
EXTRA_ARGS: dict[str, tuple[str, ...]] = {
    "polyak_sgd": ("value",),
    "scale_by_polyak": ("value",),
    "contrib.reduce_on_plateau": ("value",),
    "contrib.momo": ("value",),
    "contrib.momo_adam": ("value",),
    "lbfgs": ("value", "grad", "value_fn"),
    "scale_by_zoom_linesearch": ("value", "grad", "value_fn"),
    "scale_by_backtracking_linesearch": ("value", "grad", "value_fn"),
    "contrib.sophia": ("obj_fn",),
    "contrib.hutchinson_estimator_diag_hessian": ("obj_fn",),
    "experimental.aggregating.track_per_element_mean_and_variance_with_ema": (
        "sum_sq_diff_grads", "sample_size"),
}


# --- alias expansions -----------------------------------------------------------
# Transcribed from optax/_src/alias.py and optax/contrib/*.py (0.2.8). Step fields:
#   step          canonical key of the primitive (private ones: module path + name)
#   when          {arg, is}: the step exists only if the alias argument satisfies `is`
#   pass          primitive param -> alias param passed through unchanged
#   pass_negated  primitive param -> alias param passed negated (sm3's scale(-lr))
#   derived       primitive param -> alias params it is computed from
#   const         primitive params fixed by the alias (flip_sign is always explicit)
#   masked        alias param holding the mask of an optax.masked around the step
#   from_arg      the step is the transformation held by this alias argument;
#                 `step` names the primitive of its default value
#   private       true if `step` is not public optax API

Step = dict[str, Any]


def step(name: str, *, when: tuple[str, str] | None = None, **fields: Any) -> Step:
    out: Step = {"step": name}
    if when is not None:
        out["when"] = {"arg": when[0], "is": when[1]}
    for key, value in fields.items():
        key = key.rstrip("_")  # pass_ -> pass
        if isinstance(value, (list, tuple, set)) and key == "pass":
            value = {v: v for v in value}  # same-named pass-through
        out[key] = value
    return out


def lr_step(arg: str = "learning_rate", *, flip_sign: bool = True, **kw: Any) -> Step:
    """scale_by_learning_rate(arg): -lr by default; identity if the lr is None."""
    return step("scale_by_learning_rate", pass_={"learning_rate": arg},
                const={"flip_sign": flip_sign}, **kw)


def decay_step(wd: str = "weight_decay", mask: str | None = "mask", **kw: Any) -> Step:
    passed = {"weight_decay": wd}
    if mask is not None:
        passed["mask"] = mask
    return step("add_decayed_weights", pass_=passed, **kw)


ADAM_ARGS = ("b1", "b2", "eps", "eps_root", "mu_dtype", "nesterov")
TRACE_MOMENTUM = {"decay": "momentum", "nesterov": "nesterov"}

EXPANSIONS: dict[str, list[Step]] = {
    "adabelief": [step("scale_by_belief", pass_=("b1", "b2", "eps", "eps_root", "nesterov")),
                  lr_step()],
    "adadelta": [decay_step(mask="weight_decay_mask"),
                 step("scale_by_adadelta", pass_=("rho", "eps")), lr_step()],
    "adafactor": [
        step("scale_by_factored_rms", pass_=("factored", "decay_rate", "decay_offset",
                                             "min_dim_size_to_factor", "eps")),
        step("clip_by_block_rms", when=("clipping_threshold", "not_none"),
             pass_={"threshold": "clipping_threshold"}),
        lr_step(flip_sign=False, when=("learning_rate", "not_none")),
        step("scale_by_param_block_rms", when=("multiply_by_parameter_scale", "truthy")),
        step("ema", when=("momentum", "not_none"),
             pass_={"decay": "momentum", "accumulator_dtype": "dtype_momentum"},
             const={"debias": False}),
        decay_step("weight_decay_rate", "weight_decay_mask",
                   when=("weight_decay_rate", "not_none")),
        step("scale", const={"step_size": -1.0}),
    ],
    "adagrad": [step("scale_by_rss", pass_=("initial_accumulator_value", "eps")), lr_step()],
    "adam": [step("scale_by_adam", pass_=ADAM_ARGS), lr_step()],
    "nadam": [step("scale_by_adam", pass_=ADAM_ARGS), lr_step()],
    "adamw": [step("scale_by_adam", pass_=ADAM_ARGS), decay_step(), lr_step()],
    "nadamw": [step("scale_by_adam", pass_=ADAM_ARGS), decay_step(), lr_step()],
    "adan": [step("scale_by_adan", pass_=("b1", "b2", "b3", "eps", "eps_root")),
             decay_step(), lr_step()],
    "lion": [step("scale_by_lion", pass_=("b1", "b2", "mu_dtype")), decay_step(), lr_step()],
    "amsgrad": [step("scale_by_amsgrad", pass_=("b1", "b2", "eps", "eps_root", "mu_dtype",
                                                "bias_correction_mu", "bias_correction_nu")),
                lr_step()],
    # lr' = lr / sqrt(1 + lr^2); weight decay (lr' / lr - 1) is negative.
    "fromage": [step("scale_by_trust_ratio", pass_=("min_norm",)),
                step("scale_by_learning_rate", derived={"learning_rate": ["learning_rate"]},
                     const={"flip_sign": True}),
                step("add_decayed_weights", derived={"weight_decay": ["learning_rate"]})],
    "lars": [decay_step(mask="weight_decay_mask"),
             step("scale_by_trust_ratio", pass_=("trust_coefficient", "eps"),
                  masked="trust_ratio_mask"),
             lr_step(),
             step("trace", pass_=TRACE_MOMENTUM)],
    "lamb": [step("scale_by_adam", pass_=("b1", "b2", "eps", "eps_root")), decay_step(),
             step("scale_by_trust_ratio"), lr_step()],
    "noisy_sgd": [step("add_noise", pass_=("eta", "gamma", "key", "seed")), lr_step()],
    "sign_sgd": [step("scale_by_sign"), lr_step()],
    "signum": [step("ema", pass_={"decay": "beta", "accumulator_dtype": "accumulator_dtype"},
                    const={"debias": False}),
               step("scale_by_sign"), lr_step()],
    "novograd": [step("scale_by_novograd",
                      pass_=("b1", "b2", "eps", "eps_root", "weight_decay")), lr_step()],
    "optimistic_gradient_descent": [step("scale_by_optimistic_gradient",
                                         pass_=("alpha", "beta")), lr_step()],
    # Deprecated; beta = optimism if optimism is not None else learning_rate.
    "optimistic_adam": [
        step("scale_by_adam", pass_=ADAM_ARGS),
        step("scale_by_optimistic_gradient", pass_={"alpha": "learning_rate"},
             derived={"beta": ["optimism", "learning_rate"]}),
        step("scale_by_learning_rate", const={"learning_rate": 1.0, "flip_sign": True}),
    ],
    "optimistic_adam_v2": [step("scale_by_adam", pass_=ADAM_ARGS),
                           step("scale_by_optimistic_gradient", pass_=("alpha", "beta")),
                           lr_step()],
    "radam": [step("scale_by_radam", pass_=("b1", "b2", "eps", "eps_root", "threshold",
                                            "nesterov")), lr_step()],
    "rmsprop": [
        step("scale_by_stddev", when=("centered", "truthy"),
             pass_=("decay", "eps", "initial_scale", "eps_in_sqrt", "bias_correction")),
        step("scale_by_rms", when=("centered", "falsy"),
             pass_=("decay", "eps", "initial_scale", "eps_in_sqrt", "bias_correction")),
        lr_step(),
        step("trace", when=("momentum", "not_none"), pass_=TRACE_MOMENTUM),
        step("identity", when=("momentum", "none")),
    ],
    "sgd": [step("trace", when=("momentum", "not_none"),
                 pass_={**TRACE_MOMENTUM, "accumulator_dtype": "accumulator_dtype"}),
            step("identity", when=("momentum", "none")),
            lr_step()],
    "sm3": [step("scale_by_sm3", pass_={"b1": "momentum"}),
            step("scale", pass_negated={"step_size": "learning_rate"})],
    "yogi": [step("scale_by_yogi", pass_=("b1", "b2", "eps")), lr_step()],
    "adamax": [step("scale_by_adamax", pass_=("b1", "b2", "eps")), lr_step()],
    "adamaxw": [step("scale_by_adamax", pass_=("b1", "b2", "eps")), decay_step(), lr_step()],
    "rprop": [step("scale_by_rprop", pass_=("learning_rate", "eta_minus", "eta_plus",
                                            "min_step_size", "max_step_size")),
              step("scale", const={"step_size": -1.0})],
    # chain(sgd(learning_rate=scaling), scale_by_polyak(...)), nested chain flattened.
    "polyak_sgd": [step("identity"), lr_step("scaling"),
                   step("scale_by_polyak", pass_=("max_learning_rate", "f_min", "eps",
                                                  "variant"))],
    "lbfgs": [
        step("scale_by_lbfgs", pass_=("memory_size", "scale_init_precond")),
        step("scale", when=("learning_rate", "none"), const={"step_size": -1.0}),
        lr_step(when=("learning_rate", "not_none")),
        step("scale_by_zoom_linesearch", when=("linesearch", "not_none"),
             from_arg="linesearch"),
        step("identity", when=("linesearch", "none")),
    ],
    # --- optax.contrib
    "contrib.acprop": [step("contrib.scale_by_acprop", pass_=("b1", "b2", "eps", "eps_root")),
                       decay_step(), lr_step()],
    "contrib.ademamix": [step("contrib.scale_by_ademamix",
                              pass_=("b1", "b2", "b3", "alpha", "eps", "eps_root", "mu_dtype")),
                         decay_step(), lr_step()],
    "contrib.simplified_ademamix": [step("contrib.scale_by_simplified_ademamix",
                                         pass_=("b1", "b2", "alpha", "eps", "eps_root")),
                                    decay_step(), lr_step()],
    "contrib.adopt": [step("contrib.scale_by_adopt",
                           pass_=("b1", "b2", "eps", "mu_dtype", "nesterov", "use_clipping",
                                  "clip_value_fn")), lr_step()],
    # scale_by_cocob produces the signed step itself, after an unflipped lr scale.
    "contrib.cocob": [decay_step(), lr_step(flip_sign=False),
                      step("contrib.scale_by_cocob", pass_=("alpha", "eps"))],
    "contrib.dog": [decay_step(when=("weight_decay", "not_none")),
                    step("identity", when=("weight_decay", "none")),
                    step("contrib._dog.scale_by_dog", pass_=("init_step", "eps"), private=True),
                    lr_step()],
    "contrib.dowg": [decay_step(when=("weight_decay", "not_none")),
                     step("identity", when=("weight_decay", "none")),
                     step("contrib._dog.scale_by_dowg", pass_=("init_estim_sq_dist", "eps"),
                          private=True),
                     lr_step()],
    "contrib.galore": [step("contrib.scale_by_galore",
                            pass_=("rank", "update_proj_gap", "scale", "base_optimizer",
                                   "weight_dimension_numbers")),
                       decay_step(), lr_step()],
    # scale_by_madgrad takes the learning rate and returns the signed step.
    "contrib.madgrad": [decay_step(mask=None),
                        step("contrib.scale_by_madgrad",
                             pass_=("learning_rate", "momentum", "eps"))],
    "contrib.sophia": [step("contrib._sophia.scale_by_sophia",
                            pass_=("b1", "b2", "eps", "gamma", "clip_threshold",
                                   "update_interval", "hessian_diagonal_fn", "mu_dtype",
                                   "verbose", "print_win_rate_every_n_steps"),
                            private=True),
                       decay_step(mask="weight_decay_mask"), lr_step()],
    "contrib.dpsgd": [step("contrib.differentially_private_aggregate",
                           pass_=("l2_norm_clip", "noise_multiplier", "seed")),
                      step("trace", when=("momentum", "not_none"), pass_=TRACE_MOMENTUM),
                      step("identity", when=("momentum", "none")),
                      lr_step()],
    # Both are wrapped in contrib.schedule_free (see WRAPPED_IN); with warmup_steps the
    # learning rate becomes warmup_constant_schedule(0, learning_rate, warmup_steps).
    "contrib.schedule_free_adamw": [
        step("scale_by_rms", pass_={"decay": "b2", "eps": "eps"},
             const={"eps_in_sqrt": False, "bias_correction": True}),
        decay_step(mask=None),
        step("scale_by_learning_rate",
             derived={"learning_rate": ["learning_rate", "warmup_steps"]},
             const={"flip_sign": True}),
    ],
    "contrib.schedule_free_sgd": [
        decay_step(mask=None, when=("weight_decay", "not_none")),
        step("identity"),
        step("scale_by_learning_rate",
             derived={"learning_rate": ["learning_rate", "warmup_steps"]},
             const={"flip_sign": True}),
    ],
}

_SCHEDULE_FREE_WRAPPER = step(
    "contrib.schedule_free",
    pass_=("b1", "weight_lr_power", "state_dtype"),
    derived={"learning_rate": ["learning_rate", "warmup_steps"]},
)
WRAPPED_IN: dict[str, Step] = {
    "contrib.schedule_free_adamw": _SCHEDULE_FREE_WRAPPER,
    "contrib.schedule_free_sgd": _SCHEDULE_FREE_WRAPPER,
}

# contrib.muon returns partition({'muon': chain(...), 'adam': adamw(...)}), labelling
# 2-D leaves 'muon' (or per muon_weight_dimension_numbers) and the rest 'adam'.
BRANCHES: dict[str, dict[str, list[Step]]] = {
    "contrib.muon": {
        "muon": [
            step("contrib.scale_by_muon",
                 pass_=("ns_steps", "beta", "eps", "mu_dtype", "nesterov", "adaptive",
                        "preconditioning"),
                 derived={"ns_coeffs": ["ns_coeffs"],
                          "weight_dimension_numbers": ["muon_weight_dimension_numbers"]}),
            step("contrib._muon.scale_by_shape", pass_=("consistent_rms",),
                 derived={"weight_dimension_numbers": ["muon_weight_dimension_numbers"]},
                 private=True),
            decay_step(mask="weight_decay_mask"),
            lr_step(),
        ],
        "adam": [
            step("scale_by_adam",
                 pass_={"b1": "adam_b1", "b2": "adam_b2", "eps": "eps",
                        "eps_root": "adam_eps_root", "mu_dtype": "mu_dtype",
                        "nesterov": "nesterov"}),
            decay_step("adam_weight_decay", mask=None),
            step("scale_by_learning_rate",
                 derived={"learning_rate": ["adam_learning_rate", "learning_rate"]},
                 const={"flip_sign": True}),
        ],
    },
}

# Aliases without a chain to describe: they build one monolithic update_fn.
MONOLITHIC_ALIASES = frozenset({
    "contrib.dadapt_adamw", "contrib.prodigy", "contrib.momo", "contrib.momo_adam",
})


# --- enumeration -----------------------------------------------------------------

def _origin_module(obj: Any) -> str:
    if isinstance(obj, functools.partial):
        obj = obj.func
    return getattr(obj, "__module__", "") or ""


def _is_api_object(obj: Any) -> bool:
    if isinstance(obj, types.ModuleType) or not callable(obj):
        return False
    # Excludes typing aliases (Params, Schedule, ...) and re-exported stdlib objects.
    return _origin_module(obj).startswith("optax")


def discover_namespaces(optax: types.ModuleType) -> list[tuple[str, types.ModuleType]]:
    """[(relative dotted name, module)], top level first, then NAMESPACE_PRIORITY order."""
    found: dict[str, types.ModuleType] = {}

    def walk(prefix: str, mod: types.ModuleType) -> None:
        for name in dir(mod):
            sub = getattr(mod, name, None)
            if name.startswith("_") or not isinstance(sub, types.ModuleType):
                continue
            # Only the module's own children: skips `from optax import tree` style
            # imports inside a namespace (experimental.aggregating.tree, ...).
            if not sub.__name__.startswith(mod.__name__ + "."):
                continue
            rel = f"{prefix}{name}"
            if all(sub is not m for m in found.values()):
                found[rel] = sub
                walk(rel + ".", sub)

    walk("", optax)
    order = {name: i for i, name in enumerate(NAMESPACE_PRIORITY)}
    names = sorted(found, key=lambda n: (order.get(n, len(order)), n))
    return [("", optax)] + [(n, found[n]) for n in names]


class Entry:
    """One public object and every public dotted path (relative to optax) reaching it."""

    def __init__(self, obj: Any) -> None:
        self.obj = obj
        self.paths: list[str] = []
        self.deprecated_paths: list[str] = []
        self.key = ""


def _join(ns: str, name: str) -> str:
    return f"{ns}.{name}" if ns else name


def collect(optax: types.ModuleType) -> tuple[dict[int, Entry], dict[str, dict[str, Any]]]:
    """Entries by id(obj), plus the access-time deprecation tables of every namespace."""
    namespaces = discover_namespaces(optax)
    entries: dict[int, Entry] = {}
    deprecated: dict[str, dict[str, Any]] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for ns, mod in namespaces:
            for name in sorted(dir(mod)):
                obj = getattr(mod, name)
                if name.startswith("_") or not _is_api_object(obj):
                    continue
                entries.setdefault(id(obj), Entry(obj)).paths.append(_join(ns, name))
        # Names served by a module __getattr__ with a DeprecationWarning (or removed).
        for ns, mod in namespaces:
            table = getattr(mod, "_deprecations", None)
            if not isinstance(table, dict):
                continue
            for name, (message, obj) in sorted(table.items()):
                path = _join(ns, name)
                deprecated[path] = {"message": message, "removed": obj is None, "obj": obj}
                if obj is not None and _is_api_object(obj):
                    entries.setdefault(id(obj), Entry(obj)).deprecated_paths.append(path)
    ranks = {ns: i for i, (ns, _) in enumerate(namespaces)}
    for entry in entries.values():
        entry.key = _canonical(entry, ranks)
    return entries, deprecated


def _canonical(entry: Entry, ranks: dict[str, int]) -> str:
    paths = entry.paths or entry.deprecated_paths
    own_name = getattr(entry.obj, "__name__", None)

    def rank(path: str) -> tuple[Any, ...]:
        ns, _, leaf = path.rpartition(".")
        return (ranks.get(ns, len(ranks)), leaf not in PREFERRED_NAMES, leaf != own_name, leaf)

    return min(paths, key=rank)


# --- classification --------------------------------------------------------------

def _signature(obj: Any) -> inspect.Signature | None:
    try:
        return inspect.signature(obj)
    except (TypeError, ValueError):
        return None


def _returns_gt(key: str, sig: inspect.Signature | None) -> bool:
    if key in RETURNS_GT_UNANNOTATED:
        return True
    return sig is not None and "GradientTransformation" in str(sig.return_annotation)


def _takes_gt(sig: inspect.Signature | None) -> bool:
    return sig is not None and any(
        "GradientTransformation" in str(p.annotation) for p in sig.parameters.values())


def classify(entry: Entry) -> str:
    key, obj = entry.key, entry.obj
    if key in WRAPPERS:
        return "wrapper"
    if inspect.isclass(obj):
        return "other"
    sig = _signature(obj)
    params = sig.parameters if sig is not None else {}
    returns_gt = _returns_gt(key, sig)
    is_alias = _origin_module(obj) == "optax._src.alias" or (
        key.startswith("contrib.") and returns_gt and "learning_rate" in params
        and not key.rpartition(".")[2].startswith("scale_by_"))
    if is_alias:
        return "alias"
    if _takes_gt(sig) and key not in GT_PARAM_TRANSFORMS:
        raise SystemExit(f"gen_optax_api: classify {key!r} (takes a GradientTransformation)")
    if any(p.startswith("schedules.") for p in entry.paths) and not returns_gt:
        return "schedule"
    return "transform" if returns_gt else "other"


# --- table -----------------------------------------------------------------------

def _literal(value: Any) -> bool:
    return type(value) in (bool, int, float, str)


def signature_fields(obj: Any) -> dict[str, Any]:
    sig = _signature(obj)
    out: dict[str, Any] = {"params": [], "kwonly": [], "varargs": "", "varkw": "",
                           "required": [], "defaults": {}, "none_defaults": []}
    if sig is None:
        out["signature_known"] = False
        return out
    posonly = []
    for p in sig.parameters.values():
        if p.kind is p.VAR_POSITIONAL:
            out["varargs"] = p.name
            continue
        if p.kind is p.VAR_KEYWORD:
            out["varkw"] = p.name
            continue
        out["params"].append(p.name)
        if p.kind is p.KEYWORD_ONLY:
            out["kwonly"].append(p.name)
        elif p.kind is p.POSITIONAL_ONLY:
            posonly.append(p.name)
        if p.default is p.empty:
            out["required"].append(p.name)
        elif p.default is None:
            out["none_defaults"].append(p.name)
        elif _literal(p.default):
            out["defaults"][p.name] = p.default
    if posonly:
        out["posonly"] = posonly
    return out


def _same_as(path: str, obj: Any, key_of: dict[int, str]) -> str:
    """Canonical key of the object a deprecated name returns, if it has another name."""
    key = key_of.get(id(obj), "") if obj is not None else ""
    return "" if key == path else key


def build_table(optax: types.ModuleType) -> dict[str, Any]:
    entries, deprecated = collect(optax)
    by_key = {e.key: e for e in entries.values()}
    if len(by_key) != len(entries):
        raise SystemExit("gen_optax_api: two objects share a canonical name")
    declared = (set(WRAPPERS) | set(NEEDS_PARAMS) | set(EXTRA_ARGS) | set(EXPANSIONS)
                | set(BRANCHES) | set(MONOLITHIC_ALIASES) | GT_PARAM_TRANSFORMS
                | RETURNS_GT_UNANNOTATED)
    if missing := sorted(declared - set(by_key)):
        raise SystemExit(f"gen_optax_api: unknown names in hand tables: {missing}")

    callables: dict[str, dict[str, Any]] = {}
    for key, entry in sorted(by_key.items()):
        kind = classify(entry)
        row: dict[str, Any] = {"kind": kind, **signature_fields(entry.obj)}
        row["needs_params"] = key in NEEDS_PARAMS
        row["needs_value"] = "value" in EXTRA_ARGS.get(key, ())
        if key in EXTRA_ARGS:
            row["extra_args"] = list(EXTRA_ARGS[key])
        row["homes"] = sorted(f"optax.{p}" for p in entry.paths)
        if entry.deprecated_paths:
            row["deprecated_homes"] = sorted(f"optax.{p}" for p in entry.deprecated_paths)
        if kind == "alias":
            if key in EXPANSIONS:
                row["expansion"] = EXPANSIONS[key]
            elif key in BRANCHES:
                row["branches"] = BRANCHES[key]
            elif key not in MONOLITHIC_ALIASES:
                raise SystemExit(f"gen_optax_api: alias {key!r} has no expansion entry")
            if key in WRAPPED_IN:
                row["wrapped_in"] = WRAPPED_IN[key]
        elif key in EXPANSIONS or key in BRANCHES:
            raise SystemExit(f"gen_optax_api: {key!r} has an expansion but kind {kind!r}")
        callables[key] = row

    key_of = {id(e.obj): e.key for e in entries.values()}
    aliases: dict[str, str] = {}
    for entry in entries.values():
        leaf = entry.key.rpartition(".")[2]
        for path in entry.paths:
            if path != entry.key and path.rpartition(".")[2] != leaf:
                aliases[path] = entry.key
        for path in entry.deprecated_paths:
            if path != entry.key:
                aliases[path] = entry.key
    deprecated_rows = {
        path: {"message": d["message"], "removed": d["removed"],
               "same_as": _same_as(path, d["obj"], key_of)}
        for path, d in deprecated.items()
    }
    return {
        "optax_version": optax.__version__,
        "aliases": dict(sorted(aliases.items())),
        "deprecated": dict(sorted(deprecated_rows.items())),
        "callables": callables,
    }


# --- TOML rendering ----------------------------------------------------------------
# A small writer (no tomli_w at lint time or here): fixed field order, sorted tables,
# repr() floats (shortest round-trip form, valid TOML incl. inf/nan).

ROW_ORDER = ("kind", "params", "posonly", "kwonly", "varargs", "varkw", "required",
             "defaults", "none_defaults", "signature_known", "needs_params", "needs_value",
             "extra_args", "homes", "deprecated_homes", "wrapped_in", "expansion",
             "branches")
STEP_ORDER = ("step", "when", "pass", "pass_negated", "derived", "const", "masked",
              "from_arg", "private")
_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def _key(name: str) -> str:
    return name if _BARE_KEY.match(name) else json.dumps(name)


def _value(value: Any, order: Iterable[str] = ()) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        text = repr(value)
        return text if any(c in text for c in ".eEn") else text + ".0"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, dict):
        if not value:
            return "{}"
        rank = {k: i for i, k in enumerate(order)}
        keys = sorted(value, key=lambda k: (rank.get(k, len(rank)), k))
        return "{ " + ", ".join(f"{_key(k)} = {_value(value[k])}" for k in keys) + " }"
    raise TypeError(f"cannot render {value!r}")


def _steps(steps: list[Step]) -> str:
    return "[\n" + "".join(f"  {_value(s, STEP_ORDER)},\n" for s in steps) + "]"


def render(table: dict[str, Any]) -> str:
    version = table["optax_version"]
    out = [
        f"# Generated by tools/gen_optax_api.py from optax {version} — do not edit by hand.",
        f"# Regenerate with: {COMMAND}",
        "#",
        "# [callables.<key>]: key = top-level optax name, else '<namespace>.<name>'.",
        "#   kind: alias | transform | wrapper | schedule | other",
        "#   params (signature order, *args/**kwargs excluded), posonly, kwonly, varargs,",
        "#   varkw, required (no default), defaults (literal defaults only), none_defaults.",
        "#   needs_params: update() fails without params (wrappers: own need only, not",
        "#   inherited); needs_value / extra_args: update() keyword arguments required.",
        "#   homes: every public path reaching the same object (identity-checked);",
        "#   deprecated_homes: paths served by a module __getattr__ with a warning.",
        "#   expansion (aliases): primitive steps in chain order, see tools/gen_optax_api.py",
        "#   for step fields; branches: per-label chains of a partition (contrib.muon);",
        "#   wrapped_in: wrapper applied around the expansion chain.",
        "#   scale_by_learning_rate(None) is an identity (no sign flip).",
        "# [aliases]: other name -> canonical key, same object. [deprecated]: module",
        "#   __getattr__ deprecations (removed = raises AttributeError).",
        "",
        f"optax_version = {_value(version)}",
        "",
        "[aliases]",
    ]
    out += [f"{_key(k)} = {_value(v)}" for k, v in table["aliases"].items()]
    out.append("")
    for path, row in table["deprecated"].items():
        out.append(f"[deprecated.{_key(path)}]")
        out += [f"{k} = {_value(row[k])}" for k in ("message", "removed", "same_as")]
        out.append("")
    for key, row in table["callables"].items():
        out.append(f"[callables.{_key(key)}]")
        for field in ROW_ORDER:
            if field not in row:
                continue
            value = row[field]
            if field == "expansion":
                out.append(f"expansion = {_steps(value)}")
            elif field == "branches":  # dotted keys: inline tables cannot span lines
                for branch, steps in sorted(value.items()):
                    out.append(f"branches.{_key(branch)} = {_steps(steps)}")
            elif field == "wrapped_in":
                out.append(f"wrapped_in = {_value(value, STEP_ORDER)}")
            else:
                out.append(f"{field} = {_value(value)}")
        out.append("")
    return "\n".join(out).rstrip("\n") + "\n"


def generate() -> str:
    import optax  # imported here so the module can be loaded without optax

    return render(build_table(optax))


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
