"""`--verify` for weight-decay masks: which leaves does the mask really decay?

The parent compiles the mask function into `extract.mask_expr`'s predicate language
(a mask it cannot read is "not verifiable": user code is never run) and sends it with
a synthetic params tree shaped like the file's model (Dense kernels and biases,
LayerNorm scales and biases, stacked layers when the file scans them). The worker
builds that tree with jax, evaluates the predicate on the real key paths and arrays,
hands the mask to `optax.add_decayed_weights` the way the file does (a function or a
tree), and reads which leaves moved with zero gradients. One table row per leaf.
"""

from __future__ import annotations

from typing import Optional

from optax_lint.facts.masks import expr as mx
from optax_lint.facts.masks.param_tree import synthetic_tree
from optax_lint.syntax.positions import Positions
from optax_lint.verify.pipeline_report import PipelineReport

_EXPECTED = {"kernel": "decayed", "embedding": "decayed", "bias": "not decayed", "scale": "not decayed"}


def _params_tree(facts):
    """The file's model, else the model of a project module it imports, else a small
    synthetic Transformer (stacked when the file scans layers)."""
    tree = facts.model_tree
    if tree is not None and tree.leaves:
        return tree

    for module in facts.project.imported_modules(("flax",)):
        tree = module.model_tree
        if tree is not None and tree.leaves:
            return tree
    return synthetic_tree(scanned=bool(facts.stacked_layers))


def mask_reports(facts, worker) -> list[PipelineReport]:
    positions = Positions(facts.module)
    reports = []
    for site in facts.mask_sites:
        kind = site.role()
        if kind not in ("decay", "no_decay"):
            continue
        name = f"{site.pipeline.name or site.owner.short}: decay mask"
        report = PipelineReport(facts.path, name, positions.span(site.expr), True)
        fn = site.function(facts)
        if fn is None:
            report.verifiable = False
            report.reason = f"the mask function is not one optax-lint can interpret ({site.why_not()})"
            reports.append(report)
            continue
        tree = _params_tree(facts)
        request = {
            "op": "mask",
            "pred": fn.pred,
            "path_kind": fn.path_kind,
            "is_callable": fn.is_callable,
            "kind": kind,
            "leaves": [[list(leaf.names), list(leaf.shape), leaf.role] for leaf in tree.leaves],
        }
        response = worker.request(request)
        if response.get("error"):
            report.error = response["error"]
        report.results = response.get("results", [])
        reports.append(report)
    return reports


# ---------------------------------------------------------------------------
# Worker side (runs in the verification worker, with jax and optax imported)


def measure_mask(request: dict) -> dict:
    import jax
    import jax.numpy as jnp
    import optax

    leaves = request["leaves"]
    params: dict = {}
    for names, shape, _ in leaves:
        node = params
        for name in names[:-1]:
            node = node.setdefault(name, {})
        node[names[-1]] = jnp.ones(tuple(shape), jnp.float32)
    kind = request.get("path_kind")
    no_decay = request.get("kind") == "no_decay"

    def value(path, leaf) -> bool:
        names = tuple(k.key for k in path)
        if kind == mx.KEYS:
            path_value = tuple(path)  # jax's own key entries
        else:
            path_value = mx.path_value(names, kind)
        result = mx.evaluate(request["pred"], {"path": path_value, "leaf": leaf})
        if not isinstance(result, bool):
            raise mx.EvalError(f"the mask gives {type(result).__name__}, not bool")
        return (not result) if no_decay else result

    try:
        mask_tree = jax.tree_util.tree_map_with_path(value, params)
    except mx.EvalError as exc:
        return {"error": f"the mask could not be evaluated on the synthetic params: {exc}"}
    mask = (lambda p: mask_tree) if request.get("is_callable") else mask_tree
    tx = optax.add_decayed_weights(0.5, mask=mask)
    zeros = jax.tree.map(jnp.zeros_like, params)
    updates, _ = tx.update(zeros, tx.init(params), params)
    flat_updates = {tuple(k.key for k in path): leaf for path, leaf in jax.tree_util.tree_flatten_with_path(updates)[0]}
    results = []
    for names, shape, role in leaves:
        moved = bool(jnp.any(flat_updates[tuple(names)] != 0))
        measured = "decayed" if moved else "not decayed"
        expected = _EXPECTED.get(role)
        results.append({
            "property": "/".join(names) + f" {tuple(shape)}",
            "expected": expected or "-",
            "measured": measured,
            "ok": None if expected is None else measured == expected,
        })
    return {"built": True, "results": results}


def decayed_leaves(report: PipelineReport) -> Optional[list[str]]:
    """The leaves a verified mask decays (for tests and summaries)."""
    if not report.verifiable or report.error:
        return None
    return [r["property"].split(" ")[0] for r in report.results if r["measured"] == "decayed"]
