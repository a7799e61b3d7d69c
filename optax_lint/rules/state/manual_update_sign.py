"""OPX610 manual-update-sign: Params updated by hand as `p - u` with `u` from an optax
update, which is already negated."""

from __future__ import annotations

import libcst as cst

from optax_lint.facts.pipelines.build import Pipeline
from optax_lint.facts.state.access import StateFacts
from optax_lint.facts.state.walks import negated, walk_scope
from optax_lint.rules.base import Context, Rule
from optax_lint.rules.state.call_args import positional_args
from optax_lint.rules.state.pipelines import update_pipeline
from optax_lint.rules.state.wording import call_text, describe_node
from optax_lint.syntax import edits as fixes
from optax_lint.syntax.nodes import node_text
from optax_lint.syntax.walker import Scope

TREE_MAPS = frozenset({"jax.tree.map", "jax.tree_util.tree_map", "jax.tree_map", "jax.tree_util.tree_multimap"})


SUBTRACT_FUNCS = {"jax.numpy.subtract": "add", "numpy.subtract": "add", "operator.sub": "add"}


TREE_SUBS = frozenset({"optax.tree_utils.tree_sub"})


def descends(pipeline: Pipeline) -> bool:
    """Every branch of the pipeline surely negates the update an odd number of times."""
    sequences = pipeline.sequences()
    if not sequences:
        return False
    for sequence in sequences:
        if not sequence or any(step.maybe for step in sequence):
            return False
        signs = [step.negates() for step in sequence]
        if any(s is None for s in signs) or sum(1 for s in signs if s) % 2 == 0:
            return False
    return True


_ASCENT_WORDS = ("ascent", "maximi", "reinforce", "policy_gradient")


# Functions whose gradient is climbed on purpose (maximised objectives).
_OBJECTIVE_WORDS = ("reward", "return", "objective", "log_likelihood", "loglik", "log_prob", "logprob", "advantage", "elbo", "utility", "acquisition")


_GRAD_FUNCS = frozenset({"jax.grad", "jax.value_and_grad", "flax.nnx.grad", "flax.nnx.value_and_grad", "equinox.filter_grad", "equinox.filter_value_and_grad"})


def _maximised(sf: StateFacts, expr: cst.BaseExpression, scope: Scope) -> bool:
    """The gradients come from jax.grad of a function named like an objective to
    maximise (expected_return, log_likelihood, elbo, ...)."""
    if not isinstance(expr, cst.Name):
        return False
    from optax_lint.syntax.names import lookup

    _, bindings = lookup(expr.value, scope)
    for binding in bindings:
        value = binding.value
        if not (isinstance(value, cst.Call) and isinstance(value.func, cst.Call)):
            continue
        inner = value.func
        if sf.facts.canonical(inner.func, binding.scope) in _GRAD_FUNCS and inner.args:
            target = inner.args[0].value
            name = target.value if isinstance(target, cst.Name) else (target.attr.value if isinstance(target, cst.Attribute) else "")
            if any(word in name.lower() for word in _OBJECTIVE_WORDS):
                return True
    return False


class ManualUpdateSign(Rule):
    code = "OPX610"

    def check(self, ctx: Context) -> None:
        facts = ctx.facts
        sites = [s for s in facts.update_sites if s.kind == "update"]
        if not sites:
            return
        sf = facts.state
        seen: set = set()
        for site in sites:
            target = site.record.assigned_to
            if not isinstance(target, (cst.Tuple, cst.List)) or not target.elements or not isinstance(target.elements[0].value, cst.Name):
                continue
            updates = target.elements[0].value.value
            scope = site.record.scope
            if len(scope.bindings.get(updates, [])) != 1:
                continue
            pipeline = update_pipeline(sf, site)
            if pipeline is None or not descends(pipeline):
                continue
            grads = site.arg(0, "updates")
            if grads is None or negated(grads.value, scope) or _maximised(sf, grads.value, scope):
                continue
            if scope.kind == "function" and any(w in scope.name.lower() for w in _ASCENT_WORDS):
                continue
            for node, fix in self._subtractions(facts, scope, updates):
                if node in seen:
                    continue
                seen.add(node)
                ctx.report(
                    node,
                    expr=call_text(node) if isinstance(node, cst.Call) else node_text(node),
                    updates=updates,
                    optimizer=describe_node(pipeline.root),
                    fix=fix,
                    related=[(site.call, f"{updates} comes from this optax update")],
                )

    def _subtractions(self, facts, scope: Scope, updates: str):
        for node in walk_scope(scope.node):
            if isinstance(node, cst.Call):
                name = facts.canonical(node.func, scope)
                positional = positional_args(node)
                if name in TREE_MAPS and len(positional) >= 3:
                    fn, trees = positional[0].value, [a.value for a in positional[1:]]
                    index = next((i for i, t in enumerate(trees) if isinstance(t, cst.Name) and t.value == updates), None)
                    if index is None:
                        continue
                    if isinstance(fn, cst.Lambda):
                        params = [p.name.value for p in fn.params.params]
                        body = fn.body
                        if (
                            len(params) == len(trees) == 2 and isinstance(body, cst.BinaryOperation) and isinstance(body.operator, cst.Subtract)
                            and isinstance(body.left, cst.Name) and isinstance(body.right, cst.Name)
                            and body.right.value == params[index] and body.left.value == params[1 - index]
                        ):
                            yield node, fixes.replace(body.operator, cst.Add(whitespace_before=body.operator.whitespace_before, whitespace_after=body.operator.whitespace_after))
                    else:
                        fname = facts.canonical(fn, scope)
                        if fname in SUBTRACT_FUNCS and len(trees) == 2 and index == 1 and isinstance(fn, cst.Attribute):
                            yield node, fixes.replace(fn, fn.with_changes(attr=cst.Name(SUBTRACT_FUNCS[fname])))
                elif name in TREE_SUBS and len(positional) == 2:
                    second = positional[1].value
                    if isinstance(second, cst.Name) and second.value == updates and isinstance(node.func, cst.Attribute):
                        new_attr = "tree_add" if node.func.attr.value == "tree_sub" else "add"
                        yield node, fixes.replace(node.func, node.func.with_changes(attr=cst.Name(new_attr)))
            elif isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Subtract):
                if isinstance(node.right, cst.Name) and node.right.value == updates:
                    yield node, fixes.replace(node.operator, cst.Add(whitespace_before=node.operator.whitespace_before, whitespace_after=node.operator.whitespace_after))
