"""rules/optax_api.toml against the installed optax.

(a) the committed table equals a fresh generation (an optax upgrade shows up here);
(b) every alias expansion matches the chain optax really builds, found by walking
    the closures of the built update functions, each `when` both ways;
(c) needs_params on a sample of callables matches running init + update.
"""

from __future__ import annotations

import importlib.util
import inspect
import tomllib
import warnings
from pathlib import Path
from typing import Any, Callable

import pytest

optax = pytest.importorskip("optax")
jax = pytest.importorskip("jax")
jnp = jax.numpy

REPO = Path(__file__).resolve().parent.parent
TABLE_PATH = REPO / "rules" / "optax_api.toml"


def _load_generator() -> Any:
    spec = importlib.util.spec_from_file_location(
        "gen_optax_api", REPO / "tools" / "gen_optax_api.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GEN = _load_generator()
TABLE = tomllib.loads(TABLE_PATH.read_text(encoding="utf-8"))
CALLABLES: dict[str, dict[str, Any]] = TABLE["callables"]


def resolve(key: str) -> Any:
    obj = optax
    for part in key.split("."):
        obj = getattr(obj, part)
    return obj


# --- (a) freshness -------------------------------------------------------------

def test_committed_table_matches_installed_optax() -> None:
    assert TABLE["optax_version"] == optax.__version__
    fresh = GEN.generate()
    assert fresh == TABLE_PATH.read_text(encoding="utf-8"), (
        "rules/optax_api.toml is stale: run .venv/bin/python tools/gen_optax_api.py")


def test_homes_are_the_same_object() -> None:
    for key, row in CALLABLES.items():
        if not row["homes"]:
            continue
        canonical = resolve(row["homes"][0].removeprefix("optax."))
        for home in row["homes"]:
            assert resolve(home.removeprefix("optax.")) is canonical, (key, home)
    assert TABLE["aliases"]["partition"] == "multi_transform"
    assert optax.partition is resolve(TABLE["aliases"]["partition"])


# --- closure walking -------------------------------------------------------------

def _cells(fn: Callable[..., Any]) -> dict[str, Any]:
    out = {}
    for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
        try:
            out[name] = cell.cell_contents
        except ValueError:  # empty cell
            pass
    return out


def _factory(fn: Callable[..., Any]) -> str:
    """'scale_by_adam' for scale_by_adam.<locals>.update_fn."""
    return fn.__qualname__.split(".<locals>")[0]


def _build_key_index() -> dict[tuple[str, str], str]:
    index = {}
    for key, row in CALLABLES.items():
        if row["kind"] in ("transform", "wrapper", "alias") and row["homes"]:
            obj = resolve(key)
            if inspect.isfunction(obj):
                index[(obj.__module__, obj.__name__)] = key
    return index


KEY_INDEX = _build_key_index()


def _runtime_key(fn: Callable[..., Any]) -> str:
    name = _factory(fn)
    # Non-public primitives are named by module path, like the table's private steps.
    return KEY_INDEX.get((fn.__module__, name),
                         f"{fn.__module__.removeprefix('optax.')}.{name}")


def walk(tx: Any) -> list[dict[str, Any]]:
    """Primitive steps of a built transformation, in update order."""
    return _walk(tx.init, tx.update)


def _walk(init: Callable[..., Any], update: Callable[..., Any]) -> list[dict[str, Any]]:
    while _factory(update) == "with_extra_args_support":
        tx = _cells(update)["tx"]
        init, update = tx.init, tx.update
    name, cells = _factory(update), _cells(update)
    if name == "chain":
        init_fns = _cells(init)["init_fns"]
        return [s for i, u in zip(init_fns, cells["update_fns"]) for s in _walk(i, u)]
    if name == "masked":
        steps = walk(cells["inner"])
        for s in steps:
            s.setdefault("mask", cells["mask"])
        return steps
    node = {"key": _runtime_key(update), "vars": {**_cells(init), **cells}}
    if name == "schedule_free":
        node["inner"] = walk(cells["base_optimizer"])
    if name == "partition":
        node["branches"] = {label: walk(t) for label, t in cells["transforms"].items()}
    return [node]


def test_walker_sees_adamw_chain() -> None:
    steps = walk(optax.adamw(0.5, b1=0.8, weight_decay=0.25))
    assert [s["key"] for s in steps] == ["scale_by_adam", "add_decayed_weights", "scale"]
    assert steps[0]["vars"]["b1"] == 0.8
    assert steps[1]["vars"]["weight_decay"] == 0.25
    assert steps[2]["vars"]["step_size"] == -0.5


# --- (b) expansions ----------------------------------------------------------------

LR = 0.0123
REQUIRED = {"learning_rate": LR, "l2_norm_clip": 1.0, "noise_multiplier": 0.1, "seed": 0}
# Overrides that keep builds quiet or valid (noisy_sgd warns without a key).
BASE_ARGS = {"noisy_sgd": {"key": 0}}
def _cond_value(arg: str) -> Any:
    if arg == "linesearch":
        return optax.scale_by_zoom_linesearch(max_linesearch_steps=7)
    return LR if arg == "learning_rate" else 0.05


def _holds(when: dict[str, str] | None, args: dict[str, Any]) -> bool:
    if when is None:
        return True
    value, test = args[when["arg"]], when["is"]
    return {"not_none": value is not None, "none": value is None, "truthy": bool(value),
            "falsy": not value, "nonzero": value != 0}[test]


def _satisfying(when: dict[str, str], truth: bool) -> Any:
    arg, test = when["arg"], when["is"]
    if test in ("truthy", "falsy"):
        return (test == "truthy") == truth
    if test == "nonzero":
        return 0.05 if truth else 0.0
    wants_value = (test == "not_none") == truth
    return _cond_value(arg) if wants_value else None


def _all_steps(row: dict[str, Any]) -> list[dict[str, Any]]:
    steps = list(row.get("expansion", []))
    for branch in row.get("branches", {}).values():
        steps += branch
    return steps


def _variants(key: str, row: dict[str, Any]) -> list[dict[str, Any]]:
    """Keyword-argument sets: defaults, perturbed, and each condition both ways."""
    base = {p: REQUIRED[p] for p in row["required"]} | BASE_ARGS.get(key, {})
    steps = _all_steps(row)
    cond_args = {s["when"]["arg"] for s in steps if "when" in s}
    fed = {a for s in steps for a in s.get("pass", {}).values()}
    masks = {s["masked"] for s in steps if "masked" in s} | {
        s["pass"]["mask"] for s in steps if "mask" in s.get("pass", {})}
    # Distinct values for every fed hyperparameter, so miswiring (b1 <-> b2) shows.
    perturbed = dict(base)
    for i, name in enumerate(row["params"]):
        default = row["defaults"].get(name)
        if name in cond_args or name in base:
            continue
        if name in masks:  # a distinct object, checked by identity on the mask
            perturbed[name] = lambda tree: jax.tree.map(lambda _: True, tree)
        elif name not in fed:
            continue
        elif isinstance(default, bool):
            perturbed[name] = not default
        elif isinstance(default, float):
            perturbed[name] = default + (i + 1) * 1e-5
    variants = [base, perturbed]
    if "learning_rate" in row["none_defaults"]:
        variants.append(base | {"learning_rate": LR})
    for s in steps:
        if "when" in s:
            for truth in (True, False):
                variants.append(perturbed | {s["when"]["arg"]: _satisfying(s["when"], truth)})
    return variants


def _bound(fn: Callable[..., Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    bound = inspect.signature(fn).bind_partial(**kwargs)
    bound.apply_defaults()
    return dict(bound.arguments)


def _same(observed: Any, expected: Any) -> bool | None:
    """True/False when comparable, None when the closure value cannot be compared."""
    if isinstance(expected, (bool, int, float, str)) and isinstance(
            observed, (bool, int, float, str)):
        # bool is an int subclass: only a bool may match a bool (True != 1 here).
        return isinstance(observed, bool) == isinstance(expected, bool) and observed == expected
    if expected is None or not isinstance(observed, (bool, int, float, str)):
        return observed is expected or None
    return None


class Stats:
    checked = 0
    unchecked = 0


_MISSING = object()


def _lookup(vars_: dict[str, Any], name: str, depth: int = 2) -> Any:
    """A closure variable, also searched in helper closures (novograd's update_mu)."""
    if name in vars_:
        return vars_[name]
    if depth:
        for value in vars_.values():
            if inspect.isfunction(value):
                found = _lookup(_cells(value), name, depth - 1)
                if found is not _MISSING:
                    return found
    return _MISSING


def _check_value(stats: type[Stats], where: str, vars_: dict[str, Any], name: str,
                 expected: Any) -> None:
    observed = _lookup(vars_, name)
    if observed is _MISSING:
        stats.unchecked += 1
        return
    verdict = _same(observed, expected)
    if verdict is None:
        stats.unchecked += 1
        return
    stats.checked += 1
    assert verdict, f"{where}: {name} = {observed!r}, expected {expected!r}"


def _lr_value(s: dict[str, Any], args: dict[str, Any]) -> tuple[bool, Any]:
    """(known, value) of the learning rate reaching scale_by_learning_rate."""
    if "learning_rate" in s.get("const", {}):
        return True, s["const"]["learning_rate"]
    if "learning_rate" in s.get("pass", {}):
        return True, args[s["pass"]["learning_rate"]]
    return False, None  # derived: only its sign can be checked


def check_steps(where: str, expected: list[dict[str, Any]], observed: list[dict[str, Any]],
                args: dict[str, Any], stats: type[Stats]) -> None:
    present = [s for s in expected if _holds(s.get("when"), args)]
    runtime = []
    for s in present:
        if s["step"] == "scale_by_learning_rate":
            known, lr = _lr_value(s, args)
            runtime.append("identity" if known and lr is None else "scale")
        elif "from_arg" in s:
            runtime.append(walk(args[s["from_arg"]])[0]["key"])
        else:
            runtime.append(s["step"])
    assert [o["key"] for o in observed] == runtime, where
    for s, o in zip(present, observed):
        here = f"{where} step {s['step']}"
        vars_ = o["vars"]
        if s["step"] == "scale_by_learning_rate" and o["key"] == "scale":
            sign = -1 if s["const"]["flip_sign"] else 1
            known, lr = _lr_value(s, args)
            if known:
                _check_value(stats, here, vars_, "step_size", sign * lr)
            else:
                assert (vars_["step_size"] < 0) == (sign < 0), here
            continue
        for prim, alias_arg in s.get("pass", {}).items():
            if prim == "mask":
                mask = args[alias_arg]
                assert (o.get("mask", None) is mask) if mask is not None else "mask" not in o, here
                stats.checked += 1
                continue
            _check_value(stats, here, vars_, prim, args[alias_arg])
        for prim, alias_arg in s.get("pass_negated", {}).items():
            _check_value(stats, here, vars_, prim, -args[alias_arg])
        for prim, value in s.get("const", {}).items():
            _check_value(stats, here, vars_, prim, value)
        if "masked" in s:
            assert o.get("mask", "unmasked") is args[s["masked"]], here
            stats.checked += 1
        elif "mask" not in s.get("pass", {}):
            assert "mask" not in o, f"{here}: unexpectedly masked"


ALIASES = sorted(k for k, r in CALLABLES.items()
                 if r["kind"] == "alias" and ("expansion" in r or "branches" in r))


@pytest.mark.parametrize("key", ALIASES)
def test_alias_expansion_matches_built_chain(key: str) -> None:
    row, factory = CALLABLES[key], resolve(key)
    stats = type("S", (Stats,), {})
    seen: dict[int, set[bool]] = {}  # conditional step index -> condition values seen
    for kwargs in _variants(key, row):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tx = factory(**kwargs)
        args = _bound(factory, kwargs)
        for i, s in enumerate(_all_steps(row)):
            if "when" in s:
                seen.setdefault(i, set()).add(_holds(s["when"], args))
        observed = walk(tx)
        where = f"{key}({kwargs})"
        if "wrapped_in" in row:
            (outer,) = observed
            wrapper = row["wrapped_in"]
            assert outer["key"] == wrapper["step"], where
            for prim, alias_arg in wrapper.get("pass", {}).items():
                _check_value(stats, where, outer["vars"], prim, args[alias_arg])
            observed = outer["inner"]
        if "branches" in row:
            (outer,) = observed
            assert outer["key"] == "multi_transform", where
            assert sorted(outer["branches"]) == sorted(row["branches"]), where
            for label, steps in row["branches"].items():
                check_steps(f"{where}[{label}]", steps, outer["branches"][label], args, stats)
        else:
            check_steps(where, row["expansion"], observed, args, stats)
    assert all(v == {True, False} for v in seen.values()), f"{key}: a `when` not tried both ways"
    assert stats.checked > 0 or not any(s.get("pass") for s in _all_steps(row)), key


def test_expansions_cover_every_top_level_alias() -> None:
    top = {k for k, r in CALLABLES.items() if r["kind"] == "alias" and "." not in k}
    assert {"adam", "adamw", "sgd", "lamb", "lars", "lion", "adafactor", "lbfgs",
            "polyak_sgd", "rprop", "sm3", "fromage"} <= top
    assert all("expansion" in CALLABLES[k] for k in top)
    contrib = {k for k, r in CALLABLES.items() if r["kind"] == "alias" and k.startswith("contrib.")}
    without = {k for k in contrib if "expansion" not in CALLABLES[k] and "branches" not in CALLABLES[k]}
    assert without == {"contrib.dadapt_adamw", "contrib.prodigy", "contrib.momo",
                        "contrib.momo_adam"}


def test_step_names_are_public_unless_marked_private() -> None:
    for key in ALIASES:
        for s in _all_steps(CALLABLES[key]) + [CALLABLES[key].get("wrapped_in", {"step": "chain"})]:
            if s.get("private"):
                assert s["step"] not in CALLABLES, (key, s)
            else:
                assert CALLABLES[s["step"]]["kind"] in ("transform", "wrapper"), (key, s)
            for alias_arg in [*s.get("pass", {}).values(), *s.get("pass_negated", {}).values()]:
                assert alias_arg in CALLABLES[key]["params"], (key, s)
            if "when" in s:
                assert s["when"]["arg"] in CALLABLES[key]["params"], (key, s)


def test_lbfgs_linesearch_step_is_the_argument() -> None:
    tx = optax.lbfgs(linesearch=optax.scale_by_backtracking_linesearch(5))
    assert walk(tx)[-1]["key"] == "scale_by_backtracking_linesearch"
    assert walk(optax.lbfgs())[-1]["key"] == "scale_by_zoom_linesearch"


def test_adadelta_default_learning_rate_does_not_flip_sign() -> None:
    # scale_by_learning_rate(None) is an identity: adadelta() ascends unless lr is given.
    assert [s["key"] for s in walk(optax.adadelta())][-1] == "identity"
    assert walk(optax.adadelta(1.0))[-1]["vars"]["step_size"] == -1.0


def test_alias_needs_params_follows_its_steps() -> None:
    for key in ALIASES:
        row = CALLABLES[key]
        steps = _all_steps(row) + ([row["wrapped_in"]] if "wrapped_in" in row else [])
        known = [s for s in steps if s["step"] in CALLABLES]
        if any("when" not in s and CALLABLES[s["step"]]["needs_params"] for s in known):
            assert row["needs_params"], key
        elif len(known) == len(steps) and not any(
                CALLABLES[s["step"]]["needs_params"] for s in known):
            assert not row["needs_params"], key


# --- (c) needs_params by running init + update --------------------------------------

PARAMS_SAMPLE: dict[str, Callable[[], Any]] = {
    # needs_params = true
    "adamw": lambda: optax.adamw(0.1),
    "lamb": lambda: optax.lamb(0.1),  # default weight_decay = 0.0 still needs params
    "adafactor": lambda: optax.adafactor(0.1, multiply_by_parameter_scale=False),
    "add_decayed_weights": lambda: optax.add_decayed_weights(1e-4),
    "scale_by_trust_ratio": lambda: optax.scale_by_trust_ratio(),
    "novograd": lambda: optax.novograd(0.1),  # fails by tree-mapping over None
    "lookahead": lambda: optax.lookahead(optax.sgd(0.1), 2, 0.5),
    "contrib.prodigy": lambda: optax.contrib.prodigy(),
    "contrib.schedule_free_adamw": lambda: optax.contrib.schedule_free_adamw(),
    # needs_params = false
    "adam": lambda: optax.adam(0.1),
    "sgd": lambda: optax.sgd(0.1, momentum=0.9),
    "rmsprop": lambda: optax.rmsprop(0.1),
    "clip_by_global_norm": lambda: optax.clip_by_global_norm(1.0),
    "chain": lambda: optax.chain(optax.scale_by_adam(), optax.scale(-0.1)),
    "contrib.adopt": lambda: optax.contrib.adopt(0.1),
    "polyak_sgd": lambda: optax.polyak_sgd(),  # needs value=, not params
}


@pytest.mark.parametrize("key", sorted(PARAMS_SAMPLE))
def test_needs_params_matches_update_without_params(key: str) -> None:
    row = CALLABLES[key]
    params = {"w": jnp.ones((3, 2)), "b": jnp.ones((2,))}
    grads = jax.tree.map(lambda x: 0.5 * x, params)
    if key == "lookahead":
        params = optax.LookaheadParams(params, params)
    tx = PARAMS_SAMPLE[key]()
    state = tx.init(params)
    extra = {"value": jnp.asarray(1.0)} if row["needs_value"] else {}
    try:
        tx.update(grads, state, **extra)
    except (ValueError, TypeError):
        raised = True
    else:
        raised = False
    assert raised == row["needs_params"], key
    if raised:  # and the failure really is about params: passing them fixes it
        tx.update(grads, state, params, **extra)


def test_params_sample_has_both_answers() -> None:
    answers = {CALLABLES[k]["needs_params"] for k in PARAMS_SAMPLE}
    assert answers == {True, False}
