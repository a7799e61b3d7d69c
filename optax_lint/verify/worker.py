"""The verification worker: a child process that imports jax and optax once, then
builds chains from specs (JSON lines on stdin) and measures their behaviour.

It interprets specs only: every callable is looked up by its key in the optax table
and must be a whitelisted optax constructor. No user code reaches this process.
Run as `python -m optax_lint.verify.worker`; one JSON request per line in, one JSON
response per line out.
"""

from __future__ import annotations

import json
import math
import os
import sys
import traceback
from typing import Any

ALLOWED_KINDS = ("alias", "transform", "wrapper", "schedule")


def _setup_jax() -> None:
    cache = os.environ.get("OPTAX_LINT_JAX_CACHE")
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import jax

    if cache:
        try:
            jax.config.update("jax_compilation_cache_dir", cache)
            jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
            jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
        except Exception:  # an older jax without these flags: run uncached
            pass


class SpecError(Exception):
    pass


class Interpreter:
    """Builds optax objects from specs, touching nothing outside the whitelist."""

    def __init__(self, table: dict) -> None:
        import optax

        self.optax = optax
        self.callables = table.get("callables", {})

    def lookup(self, key: str):
        entry = self.callables.get(key)
        if entry is None or entry.get("kind") not in ALLOWED_KINDS:
            raise SpecError(f"{key} is not a whitelisted optax constructor")
        obj = self.optax
        for part in key.split("."):
            if part.startswith("_"):
                raise SpecError(f"private name in {key}")
            obj = getattr(obj, part)
        return obj

    def value(self, spec: Any):
        if not isinstance(spec, dict):
            raise SpecError("malformed spec")
        if "lit" in spec:
            value = spec["lit"]
            if value is not None and not isinstance(value, (bool, int, float, str)):
                raise SpecError("literal of a forbidden type")
            return value
        if "list" in spec:
            return [self.value(v) for v in spec["list"]]
        if "tuple" in spec:
            return tuple(self.value(v) for v in spec["tuple"])
        if "dict" in spec:
            return {self._key(k): self.value(v) for k, v in spec["dict"]}
        if "fn" in spec:
            return self.lookup(spec["fn"])
        if "method" in spec:
            if spec["method"] != "gradient_transformation":
                raise SpecError("forbidden method")
            return self.value(spec["of"]).gradient_transformation()
        if "call" in spec:
            fn = self.lookup(spec["call"])
            result = fn(*[self.value(a) for a in spec.get("args", [])], **{k: self.value(v) for k, v in spec.get("kwargs", {}).items()})
            then = spec.get("then")
            if then is not None:
                result = result(*[self.value(a) for a in then.get("args", [])], **{k: self.value(v) for k, v in then.get("kwargs", {}).items()})
            return result
        raise SpecError("unknown spec form")

    def has_schedule(self, spec: Any) -> bool:
        """Whether the spec builds a schedule anywhere (so the LR changes with the step)."""
        if isinstance(spec, dict):
            key = spec.get("call") or spec.get("fn")
            if key is not None and (self.callables.get(key) or {}).get("kind") == "schedule":
                return True
            return any(self.has_schedule(v) for v in spec.values())
        if isinstance(spec, (list, tuple)):
            return any(self.has_schedule(v) for v in spec)
        return False

    def _key(self, spec):
        key = self.value(spec)
        if isinstance(key, list):
            key = tuple(key)
        return key


# ---------------------------------------------------------------------------
# Measurements


def synthetic_params(jnp, shapes: dict | None = None):
    """Weight matrix, bias and a LayerNorm scale (or the shapes the file states)."""
    if shapes:
        return {name: jnp.ones(tuple(shape), jnp.float32) for name, shape in shapes.items()}
    return {
        "dense": {"kernel": jnp.full((8, 4), 0.5, jnp.float32), "bias": jnp.zeros((4,), jnp.float32)},
        "norm": {"scale": jnp.ones((4,), jnp.float32)},
    }


def _finite(x) -> float:
    x = float(x)
    return x if math.isfinite(x) else float("nan")


# Probed steps when looking for the schedule's peak: 0, 1, 2, 4, ... 131072.
_PROBE_STEPS = (0,) + tuple(2**i for i in range(18))
# A loss "falls" only if it falls by more than float32 rounding can (about 1e-7 relative).
_LOSS_FALL_RTOL = 1e-6


class Checks:
    def __init__(self, tx, request: dict, *, scheduled: bool = False) -> None:
        import jax
        import jax.numpy as jnp
        import optax

        self.jax, self.jnp, self.optax = jax, jnp, optax
        self.tx = tx
        self.request = request
        self.params = synthetic_params(jnp, request.get("shapes"))
        self.scheduled = scheduled  # the LR follows a schedule: measure past its warmup
        self._warm = None

    def warm_state(self):
        """(state, step): the optimizer state at the step where a fixed gradient moves the
        weights most, reached with zero gradients so no moment is disturbed.

        A schedule that warms up from 0 makes every step-0 measurement vacuous (nothing
        moves, good chain or bad); its peak is where the chain shows what it does. Without
        a schedule the step does not matter: step 0. Zero gradients leave the state
        independent of the weights' values, so one warm state serves every check.
        """
        jax, jnp = self.jax, self.jnp
        params = self.params
        state = self.tx.init(params)
        if not self.scheduled:
            return state, 0
        if self._warm is not None:
            return self._warm
        zeros = jax.tree.map(jnp.zeros_like, params)
        probe = jax.tree.map(lambda p: jnp.full_like(p, 0.1), params)

        @jax.jit
        def advance(s, n):
            return jax.lax.fori_loop(0, n, lambda _, s: self.tx.update(zeros, s, params)[1], s)

        @jax.jit
        def movement(s):
            updates, _ = self.tx.update(probe, s, params)
            return jnp.max(jnp.stack([jnp.max(jnp.abs(u)) for u in jax.tree.leaves(updates)]))

        best, best_state, best_step, step = -1.0, state, 0, 0
        # Bounded work: 131072 steps of the synthetic 40-weight model take well under a
        # second; on larger declared shapes probe no further than 1024 steps.
        size = sum(int(p.size) for p in jax.tree.leaves(params))
        for target in (t for t in _PROBE_STEPS if size <= 4096 or t <= 1024):
            state = advance(state, target - step)
            step = target
            moved = _finite(movement(state))
            if moved > best:
                best, best_state, best_step = moved, state, step
        self._warm = (best_state, best_step)
        return self._warm

    def _update(self, grads, state, params, **extra):
        return self.tx.update(grads, state, params, **extra)

    def run(self) -> list[dict]:
        out = []
        for name in self.request.get("checks", []):
            method = getattr(self, f"check_{name}", None)
            if method is None:
                out.append({"property": name, "ok": None, "measured": "unknown check"})
                continue
            try:
                out.extend(method())
            except Exception as exc:  # a check that crashes is itself evidence
                out.append({"property": name, "ok": False, "measured": f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"})
        return out

    # init / update with and without params -----------------------------------
    def check_init(self):
        state = self.tx.init(self.params)
        leaves = len(self.jax.tree.leaves(state))
        return [{"property": "init on synthetic params", "expected": "works", "measured": f"works ({leaves} state leaves)", "ok": True}]

    def check_params(self):
        jax = self.jax
        grads = jax.tree.map(lambda p: self.jnp.full_like(p, 0.1), self.params)
        state = self.tx.init(self.params)
        with_params = "works"
        self._update(grads, state, self.params)
        try:
            jax.jit(lambda g, s: self.tx.update(g, s))(grads, state)
            without = "works"
        except (ValueError, TypeError) as exc:
            text = str(exc).splitlines()[0] if str(exc) else ""
            if "requires the current value of parameters" in text:
                text = "requires the current value of parameters"
            without = f"{type(exc).__name__}: {text[:70]}"
        needs = self.request.get("expect_needs_params")
        ok = None if needs is None else (without != "works") == needs
        return [
            {"property": "update with params", "expected": "works", "measured": with_params, "ok": True},
            {
                "property": "update without params",
                "expected": "raises" if needs else "works" if needs is not None else "-",
                "measured": without,
                "ok": ok,
            },
        ]

    # descent on a convex quadratic -------------------------------------------
    def check_descent(self):
        jax, jnp, optax = self.jax, self.jnp, self.optax
        target = jax.tree.map(lambda p: jnp.full_like(p, 2.0), self.params)

        def loss(p):
            return 0.5 * sum(jnp.sum((a - b) ** 2) for a, b in zip(jax.tree.leaves(p), jax.tree.leaves(target)))

        @jax.jit
        def step(p, s):
            value, g = jax.value_and_grad(loss)(p)
            u, s = self.tx.update(g, s, p)
            return optax.apply_updates(p, u), s, value

        params = self.params
        state, start = self.warm_state()
        first = _finite(loss(params))
        steps = int(self.request.get("steps", 20))
        for _ in range(steps):
            params, state, _ = step(params, state)
            jax.block_until_ready(params)
        last = _finite(loss(params))
        # Equal (or equal up to rounding) is not a fall.
        ok = math.isfinite(last) and math.isfinite(first) and first - last > _LOSS_FALL_RTOL * abs(first)
        where = f" (from step {start:,}, near the learning-rate peak)" if start else ""
        return [{"property": f"{steps} steps on a convex quadratic", "expected": "loss falls", "measured": f"loss {first:.6g} -> {last:.6g}{where}", "ok": ok}]

    # clipping before the optimizer -------------------------------------------
    def check_clip(self):
        """The state after a gradient of global norm 1e6 equals the state after the
        clipped gradient: of norm `clip_norm` for a global-norm clip with a known
        threshold; otherwise (block RMS, adaptive or per-leaf clips, an unknown
        threshold) of norm 1e7, since a clip before the optimizer saturates on both."""
        jax, jnp = self.jax, self.jnp
        known = "clip_norm" in self.request
        threshold = float(self.request["clip_norm"]) if known else 1e7
        direction = jax.tree.map(lambda p: jnp.ones_like(p), self.params)
        norm = float(self.optax.tree.norm(direction)) if hasattr(self.optax, "tree") else float(self.optax.global_norm(direction))
        big = jax.tree.map(lambda d: d * (1e6 / norm), direction)
        clipped = jax.tree.map(lambda d: d * (threshold / norm), direction)
        state = self.tx.init(self.params)
        _, after_big = jax.jit(lambda g, s: self.tx.update(g, s, self.params))(big, state)
        _, after_clipped = jax.jit(lambda g, s: self.tx.update(g, s, self.params))(clipped, state)
        big_leaves = [x for x in jax.tree.leaves(after_big) if hasattr(x, "dtype") and jnp.issubdtype(x.dtype, jnp.floating)]
        ref_leaves = [x for x in jax.tree.leaves(after_clipped) if hasattr(x, "dtype") and jnp.issubdtype(x.dtype, jnp.floating)]
        peak = max((float(jnp.max(jnp.abs(x))) for x in big_leaves), default=0.0)
        ref = max((float(jnp.max(jnp.abs(x))) for x in ref_leaves), default=0.0)
        same = all(bool(jnp.allclose(a, b, rtol=1e-4, atol=1e-8)) for a, b in zip(big_leaves, ref_leaves))
        return [{
            "property": "a gradient of global norm 1e6 reaches the optimizer clipped",
            "expected": f"optimizer state as for norm {threshold:g}" if known else "the same optimizer state as for norm 1e7",
            "measured": f"largest state value {peak:.4g} ({'clipped gradient' if known else 'norm 1e7'} gives {ref:.4g})",
            "ok": same,
        }]

    # weight decay direction and rate -----------------------------------------
    def check_decay(self):
        jax, jnp = self.jax, self.jnp
        params = jax.tree.map(lambda p: jnp.ones_like(p), self.params)
        zeros = jax.tree.map(jnp.zeros_like, params)
        state, start = self.warm_state()
        updates, state = jax.jit(lambda g, s, p: self.tx.update(g, s, p))(zeros, state, params)
        # Read the update itself: 1.0 + u rounds away decays below float32's resolution
        # at 1.0 (about 6e-8), and an unchanged weight must never count as shrinking.
        delta = float(updates["dense"]["kernel"][0, 0]) if "dense" in updates else float(jax.tree.leaves(updates)[0].ravel()[0])
        factor = 1.0 + delta
        shown = f"{factor:.8g}"
        if delta and shown == "1":  # a change too small for 8 digits is still shown
            shown = f"1 {'-' if delta < 0 else '+'} {abs(delta):.3g}"
        when = f"one step at step {start:,} (near the learning-rate peak)" if start else "one step"
        out = [{
            "property": "with zero gradients, weights shrink",
            "expected": "factor < 1",
            "measured": f"w: 1.0 -> {shown} after {when}",
            "ok": math.isfinite(delta) and delta < 0.0,
        }]
        expected = self.request.get("expected_decay_rate")
        if expected:
            rate = -delta
            ratio = rate / expected if expected else float("nan")
            out.append({
                "property": "decay rate matches the declared value",
                "expected": f"{expected:.4g} per step",
                "measured": f"{rate:.4g} per step ({ratio:.2f}x)",
                "ok": abs(ratio - 1.0) < 0.05,
            })
        return out

    # hyperparams location --------------------------------------------------------
    def check_hyperparams(self):
        state = self.tx.init(self.params)
        indexes = []
        if isinstance(state, tuple) and not hasattr(state, "_fields"):
            indexes = [i for i, s in enumerate(state) if hasattr(s, "hyperparams")]
        top = hasattr(state, "hyperparams")
        read = self.request.get("read_index")
        where = "opt_state.hyperparams" if top else ", ".join(f"opt_state[{i}].hyperparams" for i in indexes) or "nowhere"
        ok = (read is None and top) or (read is not None and read in indexes)
        wanted = "opt_state.hyperparams" if read is None else f"opt_state[{read}].hyperparams"
        return [{"property": "hyperparams sit where the code reads them", "expected": wanted, "measured": where, "ok": ok}]

    # MultiSteps: the inner schedule advances per real update -------------------------
    def check_multisteps(self):
        jax, jnp = self.jax, self.jnp
        k = int(self.request.get("every_k", 1))
        grads = jax.tree.map(lambda p: jnp.full_like(p, 0.1), self.params)
        state = self.tx.init(self.params)
        update = jax.jit(lambda g, s: self.tx.update(g, s, self.params))
        micro = 3 * k
        for _ in range(micro):
            _, state = update(grads, state)
        counts = [int(x) for path, x in jax.tree_util.tree_flatten_with_path(state)[0] if "count" in jax.tree_util.keystr(path)]
        real = max(counts) if counts else None
        return [{
            "property": "inner schedule advances once per real update",
            "expected": f"{micro // k} after {micro} micro-steps (k={k})",
            "measured": f"{real} after {micro} micro-steps" if real is not None else "no schedule count",
            "ok": real == micro // k,
        }]


def sample_schedule(interp: Interpreter, spec: dict, steps: list[int]) -> list[float]:
    schedule = interp.value(spec)
    return [_finite(schedule(int(s))) for s in steps]


def handle(interp: Interpreter, request: dict) -> dict:
    op = request.get("op")
    if op == "ping":
        return {"ok": True}
    if op == "schedule":
        return {"samples": sample_schedule(interp, request["spec"], request["steps"])}
    if op == "mask":  # which leaves a weight-decay mask decays (verify/masks.py)
        from optax_lint.verify.masks import measure_mask

        return measure_mask(request)
    if op == "verify":
        try:
            tx = interp.value(request["spec"])
        except SpecError as exc:
            return {"built": False, "error": f"not verifiable: {exc}"}
        except Exception as exc:
            return {"built": False, "error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"}
        results = [{"property": "builds", "expected": "works", "measured": type(tx).__name__, "ok": True}]
        results += Checks(tx, request, scheduled=interp.has_schedule(request["spec"])).run()
        samples = {}
        for name, sched in (request.get("schedules") or {}).items():
            try:
                samples[name] = sample_schedule(interp, sched["spec"], sched["steps"])
            except Exception as exc:
                samples[name] = f"{type(exc).__name__}: {exc}"
        return {"built": True, "results": results, "schedules": samples}
    return {"error": f"unknown op {op!r}"}


def main() -> None:
    _setup_jax()
    table = json.loads(sys.stdin.readline())
    interp = Interpreter(table)
    sys.stdout.write(json.dumps({"ready": True}) + "\n")
    sys.stdout.flush()
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        try:
            response = handle(interp, request)
        except Exception as exc:
            response = {"error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc(limit=3)}
        response["id"] = request.get("id")
        sys.stdout.write(json.dumps(response) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
