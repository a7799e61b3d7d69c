"""Updates and optimizer state (docs/protocol.md: optimizer state and updates,
reading hyperparameters back with `inject_hyperparams` from a chained state).

Every rule here links an update call or a state access back to the pipeline that built
the state (see `extract/state_access.py`) and judges it against the state's layout.
"""

from __future__ import annotations

from typing import Iterator, Optional

import libcst as cst

from optax_lint.facts.pipelines.build import Pipeline, TxNode
from optax_lint.facts.state.access import (
    JIT_WRAPPERS,
    TREE_GET,
    TREE_SET,
    FunctionInfo,
    Held,
    HyperparamsAccess,
    Layout,
    StateFacts,
    TreeAccess,
    key_literal,
    name_uses,
    path_expr,
    path_text,
    state_facts,
    walk_scope,
)
from optax_lint.rules.base import Context, Rule, describe, register
from optax_lint.syntax import edits as fixes
from optax_lint.syntax.arguments import bind
from optax_lint.syntax.values import value_of
from optax_lint.syntax.walker import CallRecord, Scope, walk

# Prefilter (optax_lint/engine/prefilter.py): optimizer state comes from optax, a TrainState
# (`apply_gradients`), nnx.Optimizer, or a `tx` / `opt_state` / `x.update(...)` in the file.
TRIGGERS = ("optax", "apply_gradients", "Optimizer", "opt_state", "hyperparams", r"\btx\b", r"\.update\(")

# Primitive states holding a field named like a hyperparameter, so that
# tree_get(opt_state, name) finds them without inject_hyperparams (checked against the
# installed optax by tests/test_state_runtime.py).
STATE_FIELD_HOLDERS: dict[str, frozenset[str]] = {
    "learning_rate": frozenset({"lbfgs", "scale_by_backtracking_linesearch", "scale_by_zoom_linesearch"}),
    "b1": frozenset({"contrib.schedule_free", "contrib.schedule_free_adamw", "contrib.schedule_free_sgd"}),
    "gamma": frozenset({"contrib.momo", "contrib.momo_adam"}),
    "scale": frozenset({"contrib.cocob", "contrib.scale_by_cocob", "contrib.reduce_on_plateau"}),
    "ns_coeffs": frozenset({"contrib.muon", "contrib.scale_by_muon"}),
    "count": frozenset(),  # nearly every state has a count: never judged
    "params": frozenset({"lbfgs", "scale_by_lbfgs"}),
    "updates": frozenset({"lbfgs", "scale_by_lbfgs"}),
    "grad": frozenset({"lbfgs", "scale_by_backtracking_linesearch", "scale_by_zoom_linesearch"}),
    "value": frozenset({"lbfgs", "scale_by_backtracking_linesearch", "scale_by_zoom_linesearch"}),
    "key": frozenset({"contrib.sophia", "contrib.hutchinson_estimator_diag_hessian"}),
    "gradient_step": frozenset({"MultiSteps"}),
}

# inject_hyperparams(f) turns every int/float argument into a traced array and every
# callable into a schedule. For these factories that breaks: parameter -> what happens
# (measured with optax 0.2.8; tests/test_state_runtime.py re-checks every entry).
INJECT_NEEDS_STATIC: dict[str, dict[str, tuple[str, bool]]] = {
    "adafactor": {"min_dim_size_to_factor": ("is compared in Python, so the jitted update raises TracerBoolConversionError", True)},
    "lookahead": {"sync_period": ("is compared in Python, so the jitted update raises TracerBoolConversionError", True)},
    "contrib.adopt": {"clip_value_fn": ("is a function, so it is called as a schedule and update raises TypeError", False)},
}
_DTYPE_NAMES = frozenset({
    "float16", "bfloat16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint32",
    "float8_e4m3fn", "float8_e5m2", "complex64", "complex128", "dtype",
})

# Primitives whose state holds no arrays (EmptyState), so dropping the new state loses nothing.
STATELESS_PRIMITIVES = frozenset({
    "clip_by_global_norm", "clip", "clip_by_block_rms", "scale", "add_decayed_weights", "identity",
    "keep_params_nonnegative", "centralize", "set_to_zero", "scale_by_trust_ratio",
    "adaptive_grad_clip", "normalize_by_update_norm", "scale_by_param_block_norm", "scale_by_param_block_rms",
})

TREE_MAPS = frozenset({"jax.tree.map", "jax.tree_util.tree_map", "jax.tree_map", "jax.tree_util.tree_multimap"})
SUBTRACT_FUNCS = {"jax.numpy.subtract": "add", "numpy.subtract": "add", "operator.sub": "add"}
TREE_SUBS = frozenset({"optax.tree_utils.tree_sub"})


def _code(node: cst.CSTNode) -> str:
    return " ".join(cst.Module([]).code_for_node(node).split())


def _call_text(call: cst.Call, limit: int = 60) -> str:
    """`optimizer.update(grads, opt_state)`: the call with its receiver, shortened."""
    text = _code(call)
    if len(text) <= limit:
        return text
    return _code(call.func) + "(...)" if len(_code(call.func)) < limit else describe(call)


def _describe_node(node: Optional[TxNode]) -> str:
    if node is None:
        return "the optimizer"
    return describe(node.call) if node.call is not None else node.short


def _under_condition(node: TxNode) -> bool:
    current: Optional[TxNode] = node
    while current is not None:
        if current.conditional:
            return True
        current = current.parent
    return False


def _uses_jit(sf: StateFacts) -> bool:
    if any(info.jitted for info in sf.functions.values()):
        return True
    return any(name in sf.facts.calls_by_name for name in JIT_WRAPPERS)


def _positional(call: cst.Call) -> list[cst.Arg]:
    return [a for a in call.args if a.keyword is None and not a.star]


def _keyword(call: cst.Call, name: str) -> Optional[cst.Arg]:
    return next((a for a in call.args if a.keyword is not None and a.keyword.value == name), None)


def _update_pipeline(sf: StateFacts, site) -> Optional[Pipeline]:
    if site.receiver is None:
        return None
    return sf.tx_of(site.receiver, site.record.scope) or site.pipeline


def _state_held(sf: StateFacts, site) -> Optional[Held]:
    arg = site.arg(1, "state")
    held = sf.held(arg.value, site.record.scope) if arg is not None else None
    return held if held is not None and held.kind == "state" else None


# ---------------------------------------------------------------------------
# OPX601


def params_needer(pipeline: Pipeline) -> Optional[TxNode]:
    """The first transformation of a pipeline whose update needs params (wrappers inherit)."""
    for node in pipeline.nodes():
        if node.entry is not None and node.entry.needs_params and node.kind != "unknown" and not _under_condition(node):
            return node
    return None


@register
class UpdateWithoutParams(Rule):
    code = "OPX601"

    def check(self, ctx: Context) -> None:
        facts = ctx.facts
        sites = [s for s in facts.update_sites if s.kind == "update"]
        if not sites:
            return
        sf = state_facts(facts)
        for site in sites:
            call = site.call
            if site.has_star or len(_positional(call)) != 2 or _keyword(call, "params") is not None:
                continue
            pipeline = _update_pipeline(sf, site)
            if pipeline is None:
                continue
            needer = params_needer(pipeline)
            if needer is None:
                continue
            detail = ""
            if needer.args is not None and "weight_decay" in (needer.entry.params if needer.entry else ()):
                wd = needer.args.value("weight_decay")
                if isinstance(wd, (int, float)) and not isinstance(wd, bool) and wd == 0:
                    detail = " (a weight_decay of 0 does not help: optax checks for params first)"
            bare = pipeline.root is needer and needer.kind == "transform"
            ctx.report(
                call,
                call=_call_text(call),
                needer=_describe_node(needer),
                detail=detail,
                exception="TypeError (missing 'params')" if bare else "ValueError (\"...requires the current value of parameters\")",
                fix=self._fix(sf, site),
                related=[(pipeline.call, "optimizer built here")],
            )

    @staticmethod
    def _fix(sf: StateFacts, site):
        scope = site.record.scope
        owner = scope
        bindings = owner.bindings.get("params")
        if bindings:
            return fixes.replace(site.call, fixes.insert_positional(site.call, cst.Name("params")))
        state_arg = site.arg(1, "state")
        if state_arg is not None and isinstance(state_arg.value, cst.Attribute) and state_arg.value.attr.value == "opt_state":
            holder = state_arg.value.value
            held = sf.held(holder, scope)
            if held is not None and held.kind == "train_state":
                value = cst.Attribute(value=holder, attr=cst.Name("params"))
                return fixes.replace(site.call, fixes.insert_positional(site.call, value))
        return None


# ---------------------------------------------------------------------------
# OPX602 / OPX603: reading hyperparams


class _AccessVerdict:
    def __init__(self, access: HyperparamsAccess, layout: Layout, reached: Optional[Layout], error: str) -> None:
        self.access = access
        self.layout = layout
        self.reached = reached
        self.error = error


def _judge(sf: StateFacts, access: HyperparamsAccess) -> Optional[tuple[str, _AccessVerdict]]:
    """('ok' | 'wrong' | 'none', verdict) for a `.hyperparams` read; None when unknown."""
    held = access.held
    if held is None or access.guarded:
        return None
    layout = sf.layout(held.pipeline)
    reached, error = layout.follow(held.path)
    verdict = _AccessVerdict(access, layout, reached, error)
    if reached is None and not error:
        return None
    if reached is not None and reached.kind in ("inject", "unknown"):
        return ("ok", verdict) if reached.kind == "inject" else None
    if layout.injects():
        return "wrong", verdict
    if layout.complete:
        return "none", verdict
    return None


def _what(reached: Optional[Layout]) -> str:
    if reached is None:
        return "not a state"
    if reached.kind == "opaque" and reached.node is not None:
        return f"the state of {_describe_node(reached.node)}"
    return reached.state_name or "a state"


def _base_text(access_base: Optional[cst.BaseExpression], held: Optional[Held]) -> tuple[str, tuple]:
    if access_base is not None and held is not None:
        return _code(access_base), held.path
    return "opt_state", ()


@register
class HyperparamsWrongIndex(Rule):
    code = "OPX602"

    def check(self, ctx: Context) -> None:
        if not any(r.node.attr.value == "hyperparams" for r in ctx.facts.raw.attributes):
            return
        sf = state_facts(ctx.facts)
        for access in sf.hyperparams_accesses():
            judged = _judge(sf, access)
            if judged is None or judged[0] != "wrong":
                continue
            verdict = judged[1]
            injects = verdict.layout.injects()
            key = access.key
            candidates = [
                (path, inj) for path, inj in injects
                if key is None or not inj.hyper_complete or key in inj.hyper
            ] or injects
            base_text, base_path = _base_text(access.base, access.base_held)
            targets = []
            for path, inj in candidates:
                if path is not None and path[: len(base_path)] == base_path:
                    targets.append(path_text(base_text, path[len(base_path):]) + ".hyperparams")
                else:
                    targets.append("at an index that depends on a condition")
            target = targets[0] if len(targets) == 1 else "one of " + ", ".join(targets)
            problem = verdict.error or f"{_code(access.node.value)} is {_what(verdict.reached)}, which has no hyperparams"
            fix = None
            if len(candidates) == 1 and candidates[0][0] is not None and access.base_held is not None:
                path = candidates[0][0]
                if path[: len(base_path)] == base_path:
                    new_value = path_expr(access.base, path[len(base_path):])
                    fix = fixes.replace(access.node, access.node.with_changes(value=new_value))
            ctx.report(
                access.node,
                access=describe(access.node),
                problem=problem,
                inject=_describe_node(candidates[0][1].node),
                target=target,
                fix=fix,
                fix_title=f"Read {target}" if fix is not None else None,
                related=[(access.held.pipeline.call, "optimizer built here")],
            )


@register
class HyperparamsNotInjected(Rule):
    code = "OPX603"

    def check(self, ctx: Context) -> None:
        facts = ctx.facts
        has_attr = any(r.node.attr.value == "hyperparams" for r in facts.raw.attributes)
        if not has_attr and TREE_GET not in facts.calls_by_name:
            return
        sf = state_facts(facts)
        for access in sf.hyperparams_accesses() if has_attr else ():
            judged = _judge(sf, access)
            if judged is None or judged[0] != "none":
                continue
            pipeline = access.held.pipeline
            ctx.report(
                access.node,
                access=describe(access.node),
                outcome="raises AttributeError",
                pipeline=_describe_node(pipeline.root),
                fix=_inject_fix(sf, pipeline, access.key, access=access),
                related=[(pipeline.call, "optimizer built here")],
            )
        for tree in sf.tree_accesses():
            if tree.kind != "get" or tree.held is None or tree.key is None or not tree.complete:
                continue
            pipeline = tree.held.pipeline
            layout = sf.layout(pipeline)
            if tree.held.path or not layout.complete or layout.injects():
                continue
            if not _is_hyperparameter(pipeline, tree.key) or _field_holder(pipeline, tree.key):
                continue
            default = tree.call.args[2] if len(_positional(tree.call)) > 2 else _keyword(tree.call, "default")
            outcome = "returns None" if default is None else f"returns its default ({_code(default.value)})"
            ctx.report(
                tree.call,
                access=_call_text(tree.call),
                outcome=outcome,
                pipeline=_describe_node(pipeline.root),
                fix=_inject_fix(sf, pipeline, tree.key, tree=tree),
                related=[(pipeline.call, "optimizer built here")],
            )


def _is_hyperparameter(pipeline: Pipeline, name: str) -> bool:
    return any(node.entry is not None and name in node.entry.params for node in pipeline.nodes())


def _field_holder(pipeline: Pipeline, name: str) -> bool:
    holders = STATE_FIELD_HOLDERS.get(name)
    if holders is None:
        return False
    if not holders:
        return True
    for node in pipeline.nodes():
        if node.key in holders:
            return True
        if node.entry is not None and any(step.step in holders for step in node.entry.expansion):
            return True
    return False


def _inject_fix(sf: StateFacts, pipeline: Pipeline, name: Optional[str], *, access: Optional[HyperparamsAccess] = None, tree: Optional[TreeAccess] = None):
    """Wrap the transformation that takes `name` in inject_hyperparams and point the
    access at its new state (unsafe: it changes the state's layout)."""
    if name is None:
        return None
    facts = sf.facts
    owners = [n for n in pipeline.nodes() if n.kind in ("alias", "transform") and n.entry is not None and name in n.entry.params]
    if len(owners) != 1:
        return None
    node = owners[0]
    call = node.call
    if call is None or node.args is None or node.args.has_star or node.key in INJECT_NEEDS_STATIC:
        return None
    root = pipeline.root
    if node is root:
        element_path: tuple = ()
    elif node.parent is root and root.short == "chain" and node.slot is not None:
        layout = sf.layout(pipeline)
        index = root.children.index(node)
        if layout.exact_upto <= index:
            return None
        element_path = (("index", index),)
    else:
        return None
    for arg_name, arg in node.args.by_name.items():
        if arg_name.endswith("dtype"):
            return None
    func = call.func
    if not isinstance(func, cst.Attribute) or facts.canonical(func.value, node.scope) != "optax":
        return None
    inject = cst.Call(func=cst.Attribute(value=func.value, attr=cst.Name("inject_hyperparams")), args=[cst.Arg(value=func)])
    wrapped = call.with_changes(func=inject)
    edits: list[tuple[cst.CSTNode, cst.CSTNode]] = [(call, wrapped)]
    if access is not None and access.held.path != element_path:
        base_path = access.base_held.path if access.base_held is not None else None
        if base_path is None or element_path[: len(base_path)] != base_path:
            return None
        edits.append((access.node, access.node.with_changes(value=path_expr(access.base, element_path[len(base_path):]))))
    for read, _scope, held in sf.state_reads():
        if held.pipeline is not pipeline or len(held.path) != len(element_path) + 1 or held.path[: len(element_path)] != element_path:
            continue
        if held.path[-1] == ("attr", "inner_state"):
            continue
        inner = read.value
        moved = cst.Attribute(value=inner, attr=cst.Name("inner_state"))
        edits.append((read, read.with_changes(value=moved)))
    if tree is not None:
        kind = sf.classify(node.args.expr(name), node.scope) if node.args.given(name) else "const"
        if kind != "const":
            if tree.held.path != () or tree.state_arg is None:
                return None
            direct = cst.Subscript(
                value=cst.Attribute(value=path_expr(tree.state_arg.value, element_path), attr=cst.Name("hyperparams")),
                slice=[cst.SubscriptElement(slice=cst.Index(value=cst.SimpleString(key_literal(name))))],
            )
            edits.append((tree.call, direct))

    return fixes.rewrite_nodes([(old, lambda _updated, new=new: new) for old, new in edits])


# ---------------------------------------------------------------------------
# OPX604


def _holders(sub: Layout, key: str, pipeline: Pipeline) -> tuple[int, list[str], list[tuple[Optional[tuple], Layout]]]:
    """How many state nodes surely hold `key`, descriptions, and the injects holding it."""
    count = 0
    described = []
    owners = []
    for path, inj in sub.injects():
        kind = inj.hyper.get(key)
        if kind == "const":
            count += 1
            owners.append((path, inj))
            described.append(f"the injected {key} of {_describe_node(inj.node)}")
        elif kind == "sched":
            count += 2
            owners.append((path, inj))
            described.append(f"the injected {key} of {_describe_node(inj.node)} and the state of the schedule driving it")
    if _field_holder(pipeline, key) and STATE_FIELD_HOLDERS.get(key):
        count += 1
        described.append(f"a field named {key} in a transformation's own state")
    return count, described, owners


@register
class AmbiguousTreeGet(Rule):
    code = "OPX604"

    def check(self, ctx: Context) -> None:
        facts = ctx.facts
        if TREE_GET not in facts.calls_by_name and TREE_SET not in facts.calls_by_name:
            return
        sf = state_facts(facts)
        for tree in sf.tree_accesses():
            if tree.held is None or not tree.complete or tree.filtered:
                continue
            pipeline = tree.held.pipeline
            sub, _ = sf.layout(pipeline).follow(tree.held.path)
            if sub is None:
                continue
            if tree.kind == "get":
                self._get(ctx, tree, sub, pipeline)
            else:
                self._set(ctx, tree, sub, pipeline)

    def _get(self, ctx: Context, tree: TreeAccess, sub: Layout, pipeline: Pipeline) -> None:
        if tree.key is None:
            return
        count, described, owners = _holders(sub, tree.key, pipeline)
        if count < 2:
            return
        fix, title = None, None
        only_injected = len(owners) == 1 and not (_field_holder(pipeline, tree.key) and STATE_FIELD_HOLDERS.get(tree.key))
        if only_injected and tree.state_arg is not None:
            path, _ = owners[0]
            if path is not None:
                direct = cst.Subscript(
                    value=cst.Attribute(value=path_expr(tree.state_arg.value, path), attr=cst.Name("hyperparams")),
                    slice=[cst.SubscriptElement(slice=cst.Index(value=cst.SimpleString(key_literal(tree.key))))],
                )
                fix = fixes.replace(tree.call, direct)
                title = f"Read {_code(direct)}"
            else:
                lam = cst.parse_expression('lambda path, value: hasattr(value, "dtype")')
                fix = fixes.replace(tree.call, fixes.add_keyword(tree.call, "filtering", lam))
                title = "Select the array leaf with filtering=lambda path, value: hasattr(value, \"dtype\")"
        ctx.report(
            tree.call,
            call=_call_text(tree.call),
            problem=f"finds {count} values named {tree.key!r} ({'; '.join(described)}): optax raises KeyError (\"Found multiple values\")",
            fix=fix,
            fix_title=title,
            related=[(pipeline.call, "optimizer built here")],
        )

    def _set(self, ctx: Context, tree: TreeAccess, sub: Layout, pipeline: Pipeline) -> None:
        for name in tree.names:
            for path, inj in sub.injects():
                if inj.hyper.get(name) == "sched":
                    ctx.report(
                        tree.call,
                        call=_call_text(tree.call),
                        problem=(
                            f"also overwrites the state of the schedule driving {name} in {_describe_node(inj.node)}: "
                            "the next update fails with AttributeError (and a scheduled value is recomputed anyway)"
                        ),
                        related=[(pipeline.call, "optimizer built here")],
                    )
                    return


# ---------------------------------------------------------------------------
# OPX605


def _static_args(wrapper: cst.Call, scope: Scope) -> tuple[Optional[set[str]], Optional[cst.Arg]]:
    arg = _keyword(wrapper, "static_args")
    positional = _positional(wrapper)
    if arg is None and len(positional) > 1:
        arg = positional[1]
    if arg is None:
        return set(), None
    value = value_of(arg.value, scope)
    if isinstance(value, str):
        return {value}, arg
    if isinstance(value, (tuple, list)) and all(isinstance(v, str) for v in value):
        return set(value), arg
    return None, arg


def _is_dtype(expr: cst.BaseExpression, facts, scope: Scope) -> bool:
    name = facts.canonical(expr, scope) if isinstance(expr, (cst.Name, cst.Attribute)) else None
    if isinstance(expr, cst.Call):
        name = facts.canonical(expr.func, scope)
        return name in ("jax.numpy.dtype", "numpy.dtype")
    if name is None:
        return False
    root, _, last = name.rpartition(".")
    return root.split(".")[0] in ("jax", "numpy", "ml_dtypes") and last in _DTYPE_NAMES


@register
class InjectHyperparamsStaticArgs(Rule):
    code = "OPX605"

    def check(self, ctx: Context) -> None:
        facts = ctx.facts
        builder = facts.builder
        sf = None
        for record in facts.raw.calls:
            call = record.node
            if not isinstance(call.func, cst.Call):
                continue
            entry = builder.inject_inner(call, record.scope)
            if entry is None or entry.kind == "unknown":
                continue
            wrapper = call.func
            static, static_arg = _static_args(wrapper, record.scope)
            if static is None:
                continue
            problems: list[tuple[str, str]] = []
            for param, (reason, needs_jit) in INJECT_NEEDS_STATIC.get(entry.key, {}).items():
                if param in static:
                    continue
                if needs_jit:
                    sf = sf or state_facts(facts)
                    if not _uses_jit(sf):
                        continue
                problems.append((param, f"{param} {reason}"))
            bound = bind(call, record.scope, entry)
            for param, arg in bound.by_name.items():
                if param not in static and _is_dtype(arg.value, facts, record.scope):
                    problems.append((param, f"{param}={_code(arg.value)} is callable, so it is treated as a schedule and init raises TypeError"))
            if not problems:
                continue
            names = [p for p, _ in problems]
            new_static = tuple(sorted(static)) + tuple(n for n in names if n not in static)
            text = repr(new_static[0]) if len(new_static) == 1 else "(" + ", ".join(repr(n) for n in new_static) + ")"
            value = cst.parse_expression(text.replace("'", '"'))
            if static_arg is None:
                new_wrapper = fixes.add_keyword(wrapper, "static_args", value)
            else:
                new_wrapper = wrapper.deep_replace(static_arg, static_arg.with_changes(value=value))
            ctx.report(
                call,
                inject=describe(call),
                problems="; ".join(text for _, text in problems),
                static=_code(value),
                fix=fixes.replace(wrapper, new_wrapper),
            )


# ---------------------------------------------------------------------------
# OPX606


def _construction_sites(sf: StateFacts, pipeline: Pipeline) -> list[CallRecord]:
    """Where a pipeline is built: its own call, or the calls of the helper returning it."""
    if pipeline.function is None:
        return [pipeline.record]
    info = sf.functions.get(pipeline.function.node)
    return list(info.calls) if info is not None else []


def _target_name(record: CallRecord) -> Optional[str]:
    return record.assigned_to.value if isinstance(record.assigned_to, cst.Name) else None


def _calls_in(sf: StateFacts, ancestor: cst.CSTNode, scope: Scope) -> Iterator[CallRecord]:
    for record in sf.raw.calls:
        if record.scope is scope and sf.inside(record.statement, ancestor):
            yield record


@register
class OptimizerRebuiltInLoop(Rule):
    code = "OPX606"

    def check(self, ctx: Context) -> None:
        facts = ctx.facts
        if not facts.pipelines or not (facts.raw.loops or facts.raw.functions):
            return
        sf = state_facts(facts)
        seen: set = set()
        for pipeline in facts.pipelines:
            for site in _construction_sites(sf, pipeline):
                if site.node in seen:
                    continue
                found = self._loop_case(sf, pipeline, site) or self._jit_case(sf, pipeline, site)
                if found is None:
                    continue
                seen.add(site.node)
                where, consequence, related = found
                ctx.report(
                    site.node,
                    optimizer=describe(site.node),
                    where=where,
                    consequence=consequence,
                    related=related,
                )

    def _loop_case(self, sf: StateFacts, pipeline: Pipeline, site: CallRecord):
        found = list(self._loop_evidence(sf, pipeline, site))
        if not found:
            return None
        where = found[0][0]
        consequence = "; ".join(dict.fromkeys(c for _, c, _ in found))
        related = [r for _, _, rel in found for r in rel]
        return where, consequence, related

    def _loop_evidence(self, sf: StateFacts, pipeline: Pipeline, site: CallRecord):
        """What goes wrong when this construction runs on every pass of its loop. State
        resets, recompiles and swaps count only when the loop carries training state
        across passes (a variable bound before the loop and rebound in it): a loop that
        starts every pass from fresh parameters is a hyperparameter sweep, where a new
        optimizer per trial is the point."""
        loop, conditional = sf.enclosing_loop(site.statement)
        if loop is None or conditional:
            return
        facts = sf.facts
        scope = site.scope
        name = _target_name(site)
        reset = "so the moment estimates (momentum, Adam's mu and nu) and the step count restart"
        parent = site.parent_call
        if parent is not None and _is_state_holder(facts, parent, scope) and _carried_arg(sf, parent, loop, scope):
            yield "inside the training loop", f"the optimizer state is created afresh on every pass, {reset}", []
        if name is None:
            return
        for record in _calls_in(sf, loop, scope):
            call = record.node
            func = call.func
            if isinstance(func, cst.Attribute) and func.attr.value == "init" and _is_name(func.value, name):
                if _carried_arg(sf, call, loop, scope):
                    yield "inside the training loop", f"{name}.init(...) then resets the optimizer state on every pass, {reset}", [(call, "state re-initialised here")]
            elif _is_state_holder(facts, call, scope) and any(_is_name(a.value, name) for a in call.args):
                if _carried_arg(sf, call, loop, scope, skip=name):
                    yield "inside the training loop", f"a new optimizer state is created from it on every pass, {reset}", [(call, "state re-created here")]
            elif isinstance(func, cst.Attribute) and func.attr.value == "replace":
                tx_arg = _keyword(call, "tx")
                base = _base_name(func.value)
                if tx_arg is not None and _is_name(tx_arg.value, name) and base is not None and _carried(sf, base, loop, scope):
                    yield "inside the training loop", "TrainState.tx is a static field, so every jitted step recompiles for each new optimizer", [(call, "swapped in here")]
            info = sf.callee(call, record.scope)
            if info is not None and info.jitted and _carried_arg(sf, call, loop, scope, skip=name):
                for param in info.params + info.kwonly:
                    arg = info.arg_for(call, param)
                    if arg is not None and _is_name(arg.value, name) and param in info.static:
                        yield (
                            "inside the training loop",
                            f"{info.name} is jitted with it as the static argument {param!r}, so it recompiles on every pass and its cache keeps growing",
                            [(call, "jitted step called here")],
                        )
        # A jitted function reading the optimizer from the enclosing scope keeps the
        # first one it was traced with (unless the function itself is redefined per pass).
        for info in sf.functions.values():
            if not info.jitted or info.scope is scope or name in info.scope.bindings or sf.inside(info.node, loop):
                continue
            if _owner(name, info.scope) is not scope or not name_uses(info.node.body, name):
                continue
            if any(sf.inside(r.statement, loop) for r in info.calls):
                yield (
                    "inside the training loop",
                    f"the jitted {info.name} reads {name} from the enclosing scope, so it keeps the optimizer it was first traced with and the new one is ignored",
                    [(info.node.name, "jitted function")],
                )

    def _jit_case(self, sf: StateFacts, pipeline: Pipeline, site: CallRecord):
        info = sf.function_of(site.scope)
        if info is None or not info.jitted or site.scope is not info.scope:
            return None
        name = _target_name(site)
        if name is not None:
            for record in _calls_in(sf, info.node, site.scope):
                func = record.node.func
                if isinstance(func, cst.Attribute) and func.attr.value == "init" and _is_name(func.value, name):
                    return (
                        f"inside the jitted {info.name}",
                        f"{name}.init(...) there creates a fresh optimizer state on every call, so the moment estimates and the step count never accumulate",
                        [(record.node, "state created here")],
                    )
        statics = sorted(p for p in info.static if p != "*" and any(name_uses(arg.value, p) for arg in site.node.args))
        for param in statics:
            for record in info.calls:
                loop, _ = sf.enclosing_loop(record.statement)
                arg = info.arg_for(record.node, param) if loop is not None else None
                if arg is not None and _varies_in(sf, arg.value, loop, record.scope):
                    return (
                        f"inside the jitted {info.name}",
                        f"it depends on the static argument {param!r}, which changes on every pass of the loop calling {info.name}, so it recompiles each time",
                        [(record.node, "called here with a new value each pass")],
                    )
        return None


def _is_name(expr: cst.BaseExpression, name: str) -> bool:
    return isinstance(expr, cst.Name) and expr.value == name


def _base_name(expr: cst.BaseExpression) -> Optional[str]:
    while isinstance(expr, (cst.Attribute, cst.Subscript)):
        expr = expr.value
    return expr.value if isinstance(expr, cst.Name) else None


def _is_state_holder(facts, call: cst.Call, scope: Scope) -> bool:
    name = facts.canonical(call.func, scope) or ""
    return name.endswith("TrainState.create") or name in ("flax.nnx.Optimizer", "flax.nnx.ModelAndOptimizer")


def _carried(sf: StateFacts, name: str, loop: cst.CSTNode, scope: Scope) -> bool:
    """`name` is bound before the loop and rebound in it: training state carried across passes."""
    from optax_lint.syntax.names import lookup

    owner, bindings = lookup(name, scope)
    if owner is None:
        return False
    inside = [b for b in bindings if b.kind != "param" and (b.node is loop or sf.inside(b.node, loop))]
    return bool(inside) and len(inside) < len(bindings)


def _carried_arg(sf: StateFacts, call: cst.Call, loop: cst.CSTNode, scope: Scope, skip: Optional[str] = None) -> bool:
    for arg in call.args:
        base = _base_name(arg.value)
        if base is not None and base != skip and _carried(sf, base, loop, scope):
            return True
    return False


def _varies_in(sf: StateFacts, expr: cst.BaseExpression, loop: cst.CSTNode, scope: Scope) -> bool:
    """Some name in `expr` is bound inside the loop (or is its target)."""
    from optax_lint.syntax.names import lookup

    for node in walk(expr):
        if isinstance(node, cst.Name):
            owner, bindings = lookup(node.value, scope)
            if owner is not None and any(b.kind != "param" and (b.node is loop or sf.inside(b.node, loop)) for b in bindings):
                return True
    return False


def _owner(name: str, scope: Scope) -> Optional[Scope]:
    from optax_lint.syntax.names import lookup

    owner, _ = lookup(name, scope)
    return owner


# ---------------------------------------------------------------------------
# OPX607


def stateful(pipeline: Pipeline) -> Optional[bool]:
    """Whether the pipeline's state changes on update: True, False, or None (unknown)."""
    for node in pipeline.nodes():
        if node.short in ("inject_hyperparams", "inject_stateful_hyperparams", "MultiSteps", "apply_if_finite"):
            return True
    unknown = False
    for sequence in pipeline.sequences():
        for step in sequence:
            if step.primitive == "<unknown>":
                unknown = True
                continue
            if step.primitive == "scale_by_learning_rate":
                lr = step.arg_value("learning_rate")
                if isinstance(lr, (int, float)) or lr is None:
                    continue
                expr = step.origin.args.expr(step.passed.get("learning_rate", "learning_rate")) if step.origin.args is not None else None
                if expr is not None and step.schedules is not None and step.schedules(expr, step.origin.scope) is not None:
                    return True
                unknown = True
                continue
            if step.primitive in STATELESS_PRIMITIVES:
                continue
            return True
    return None if unknown else False


def _threaded_state(sf: StateFacts, info: FunctionInfo) -> Optional[tuple[str, Optional[int], str, Optional[Pipeline]]]:
    """(param, return index, what, pipeline) when the function returns a new version of
    one of its parameters: the optimizer state (from tx.update) or a TrainState."""
    found = None
    for ret in info.scope.returns:
        value = ret.node.value
        if value is None:
            return None
        elements = [e.value for e in value.elements] if isinstance(value, cst.Tuple) else [value]
        for index, element in enumerate(elements):
            hit = _new_version_of(sf, info, element)
            if hit is not None:
                param, what, pipeline = hit
                candidate = (param, index if isinstance(value, cst.Tuple) else None, what, pipeline)
                if found is not None and found[:2] != candidate[:2]:
                    return None
                found = candidate
    return found


def _new_version_of(sf: StateFacts, info: FunctionInfo, expr: cst.BaseExpression):
    scope = info.scope
    if isinstance(expr, cst.Name):
        bindings = [b for b in scope.bindings.get(expr.value, []) if b.kind != "param"]
        if len(bindings) != 1 or bindings[0].value is None:
            return None
        binding = bindings[0]
        value = binding.value
        if binding.kind == "unpack" and binding.index == (1,) and isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value == "update":
            state_arg = value.args[1] if len(value.args) > 1 and value.args[1].keyword is None else _keyword(value, "state")
            if state_arg is not None and isinstance(state_arg.value, cst.Name) and state_arg.value.value in info.params:
                pipeline = sf.tx_of(value.func.value, scope)
                return state_arg.value.value, "optimizer state", pipeline
            return None
        if binding.kind == "assign":
            return _new_version_of(sf, info, value)
        return None
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "apply_gradients":
        receiver = expr.func.value
        if isinstance(receiver, cst.Name) and receiver.value in info.params:
            held = sf.held(receiver, scope)
            if held is not None and held.kind == "train_state":
                return receiver.value, "TrainState", held.pipeline
    return None


def _is_apply_updates(sf: StateFacts, expr: Optional[cst.BaseExpression], scope: Scope) -> bool:
    return isinstance(expr, cst.Call) and sf.facts.canonical(expr.func, scope) == "optax.apply_updates"


def _keeps_applied_params(sf: StateFacts, site) -> bool:
    """The update is a real training step: the updated parameters are returned from the
    function (or rebind the params variable), unlike a probe that only evaluates them."""
    scope = site.record.scope
    params_arg = site.arg(2, "params")
    applied: set[str] = set()
    for name, bindings in scope.bindings.items():
        if any(b.kind in ("assign", "annassign") and _is_apply_updates(sf, b.value, scope) for b in bindings):
            applied.add(name)
    if scope.kind == "function":
        for ret in scope.returns:
            value = ret.node.value
            elements = [e.value for e in value.elements] if isinstance(value, cst.Tuple) else [value]
            for element in elements:
                if _is_apply_updates(sf, element, scope) or (isinstance(element, cst.Name) and element.value in applied):
                    return True
        return False
    return params_arg is not None and isinstance(params_arg.value, cst.Name) and params_arg.value.value in applied


def _used_later(sf: StateFacts, record: CallRecord, name: str) -> bool:
    """Whether the name bound at `record`'s statement may be read afterwards: a later
    statement of its body reads it, or the statement sits in a loop (or other block)
    that reads it anywhere."""
    scope = record.scope
    statement = record.statement
    top = statement
    while True:
        parent = sf.raw.parent_stmt.get(top)
        if parent is None or parent is scope.node:
            break
        top = parent
    body = scope.node.body.body if isinstance(scope.node, cst.FunctionDef) else getattr(scope.node, "body", ())
    if top is not statement or top not in body:
        # Inside a loop or another block: any other use counts.
        return len(name_uses(scope.node, name)) > 1
    later = list(body)[list(body).index(top) + 1:]
    return any(name_uses(stmt, name) for stmt in later)


@register
class OptStateNotThreaded(Rule):
    code = "OPX607"

    def check(self, ctx: Context) -> None:
        facts = ctx.facts
        sites = facts.update_sites
        if not sites:
            return
        sf = state_facts(facts)
        self._discarded_update(ctx, sf)
        self._discarded_apply_gradients(ctx, sf)
        self._loop_passes_initial(ctx, sf)

    def _discarded_update(self, ctx: Context, sf: StateFacts) -> None:
        for site in ctx.facts.update_sites:
            if site.kind != "update":
                continue
            target = site.record.assigned_to
            if not isinstance(target, (cst.Tuple, cst.List)) or len(target.elements) != 2:
                continue
            new_state = target.elements[1].value
            if not isinstance(new_state, cst.Name):
                continue
            pipeline = _update_pipeline(sf, site)
            if pipeline is None or stateful(pipeline) is not True:
                continue
            state_arg = site.arg(1, "state")
            if state_arg is None or not _keeps_applied_params(sf, site):
                continue
            if new_state.value != "_" and _used_later(sf, site.record, new_state.value):
                continue
            ctx.report(
                new_state,
                call=_call_text(site.call),
                problem=f"computes the new optimizer state as {new_state.value}, which is never used",
                consequence=f"every step starts again from {_code(state_arg.value)}, so the step count never passes 1, moment estimates restart and schedules stay at their first value",
                related=[(pipeline.call, "optimizer built here")],
            )

    def _discarded_apply_gradients(self, ctx: Context, sf: StateFacts) -> None:
        for site in ctx.facts.update_sites:
            if site.kind != "apply_gradients" or not site.record.is_expression_statement or site.receiver is None:
                continue
            held = sf.held(site.receiver, site.record.scope)
            if held is None or held.kind != "train_state":
                continue
            ctx.report(
                site.call,
                call=_call_text(site.call),
                problem="returns a new TrainState, and the result is discarded",
                consequence="a flax.training TrainState is immutable, so params, opt_state and step never change",
                related=[],
            )

    def _loop_passes_initial(self, ctx: Context, sf: StateFacts) -> None:
        for info in sf.functions.values():
            if info.method or info.escapes:
                continue
            threaded = _threaded_state(sf, info)
            if threaded is None:
                continue
            param, index, what, pipeline = threaded
            if what == "optimizer state" and (pipeline is None or stateful(pipeline) is not True):
                continue
            for record in info.calls:
                loop, _ = sf.enclosing_loop(record.statement)
                if loop is None:
                    continue
                arg = info.arg_for(record.node, param)
                if arg is None or not isinstance(arg.value, cst.Name):
                    continue
                name = arg.value.value
                owner = _owner(name, record.scope)
                if owner is None:
                    continue
                if any(sf.inside(b.node, loop) or b.node is loop for b in owner.bindings.get(name, [])):
                    continue
                if name in record.scope.declared_global or owner is not record.scope and record.scope.kind == "function":
                    continue
                if what == "optimizer state" and not _carried_arg(sf, record.node, loop, record.scope, skip=name):
                    continue  # nothing is carried across passes: an evaluation or probe loop
                where = f" (element {index} of its result)" if index is not None else ""
                ctx.report(
                    arg.value,
                    call=_call_text(record.node),
                    problem=f"returns the new {what}{where}, but the loop passes {name}, which it never rebinds",
                    consequence=f"every step starts from the initial {what}" + (
                        ", so the step count never passes 1, moment estimates restart and schedules stay at their first value"
                        if what == "optimizer state" else ", so params, opt_state and step never advance"
                    ),
                    related=[(info.node.name, f"{info.name} returns the new {what}")],
                )


# ---------------------------------------------------------------------------
# OPX608


@register
class InitUpdateDifferentOptimizers(Rule):
    code = "OPX608"

    def check(self, ctx: Context) -> None:
        sites = [s for s in ctx.facts.update_sites if s.kind == "update"]
        if not sites:
            return
        sf = state_facts(ctx.facts)
        for site in sites:
            updater = _update_pipeline(sf, site)
            state = _state_held(sf, site)
            if updater is None or state is None or state.inferred or state.path or state.origin is None:
                continue
            builder = state.pipeline
            if builder is updater or _code(builder.call) == _code(updater.call):
                continue
            same_shape = [[s.primitive for s in seq] for seq in builder.sequences()] == [[s.primitive for s in seq] for seq in updater.sequences()]
            consequence = (
                "the state fits, but it was built for other hyperparameters" if same_shape
                else "the state does not fit this optimizer, so update fails (ValueError or AttributeError)"
            )
            ctx.report(
                site.call,
                call=_call_text(site.call),
                updater=_describe_node(updater.root),
                builder=_describe_node(builder.root),
                origin=_call_text(state.origin) if isinstance(state.origin, cst.Call) else describe(state.origin),
                consequence=consequence,
                related=[(state.origin, "state initialised here"), (updater.call, "updating optimizer built here"), (builder.call, "initialising optimizer built here")],
            )


# ---------------------------------------------------------------------------
# OPX609


def _plateau(pipeline: Pipeline) -> Optional[TxNode]:
    for node in pipeline.nodes():
        if node.key == "contrib.reduce_on_plateau" and not _under_condition(node):
            return node
    return None


@register
class ReduceOnPlateauWithoutValue(Rule):
    code = "OPX609"

    def check(self, ctx: Context) -> None:
        facts = ctx.facts
        if not any(n.key == "contrib.reduce_on_plateau" for p in facts.pipelines for n in p.nodes()):
            return
        sf = state_facts(facts)
        for site in facts.update_sites:
            if site.receiver is None or site.kind not in ("update", "apply_gradients"):
                continue
            held = sf.held(site.receiver, site.record.scope)
            if site.kind == "apply_gradients":
                if held is None or held.kind != "train_state":
                    continue
                node = _plateau(held.pipeline)
                if node is None:
                    continue
                ctx.report(
                    site.call,
                    call=_call_text(site.call),
                    plateau=_describe_node(node),
                    problem="TrainState.apply_gradients cannot pass value= to tx.update (its keyword arguments only replace fields)",
                    related=[(held.pipeline.call, "optimizer built here")],
                )
                continue
            pipeline = held.pipeline if held is not None and held.kind in ("tx", "nnx") else site.pipeline
            if pipeline is None or site.has_star or _keyword(site.call, "value") is not None:
                continue
            node = _plateau(pipeline)
            if node is None:
                continue
            ctx.report(
                site.call,
                call=_call_text(site.call),
                plateau=_describe_node(node),
                problem="the call passes no value=",
                related=[(pipeline.call, "optimizer built here")],
            )


# ---------------------------------------------------------------------------
# OPX610


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


def _negated_grads(expr: cst.BaseExpression, scope: Scope, depth: int = 0) -> bool:
    """The gradients handed to update are negated (deliberate ascent)."""
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus):
        return True
    if isinstance(expr, cst.Call):
        for node in walk(expr):
            if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
                return True
    if isinstance(expr, cst.Name) and depth < 4:
        from optax_lint.syntax.names import lookup

        _, bindings = lookup(expr.value, scope)
        return any(b.value is not None and _negated_grads(b.value, b.scope, depth + 1) for b in bindings)
    return False


@register
class ManualUpdateSign(Rule):
    code = "OPX610"

    def check(self, ctx: Context) -> None:
        facts = ctx.facts
        sites = [s for s in facts.update_sites if s.kind == "update"]
        if not sites:
            return
        sf = state_facts(facts)
        seen: set = set()
        for site in sites:
            target = site.record.assigned_to
            if not isinstance(target, (cst.Tuple, cst.List)) or not target.elements or not isinstance(target.elements[0].value, cst.Name):
                continue
            updates = target.elements[0].value.value
            scope = site.record.scope
            if len(scope.bindings.get(updates, [])) != 1:
                continue
            pipeline = _update_pipeline(sf, site)
            if pipeline is None or not descends(pipeline):
                continue
            grads = site.arg(0, "updates")
            if grads is None or _negated_grads(grads.value, scope) or _maximised(sf, grads.value, scope):
                continue
            if scope.kind == "function" and any(w in scope.name.lower() for w in _ASCENT_WORDS):
                continue
            for node, fix in self._subtractions(facts, scope, updates):
                if node in seen:
                    continue
                seen.add(node)
                ctx.report(
                    node,
                    expr=_call_text(node) if isinstance(node, cst.Call) else _code(node),
                    updates=updates,
                    optimizer=_describe_node(pipeline.root),
                    fix=fix,
                    related=[(site.call, f"{updates} comes from this optax update")],
                )

    def _subtractions(self, facts, scope: Scope, updates: str):
        for node in walk_scope(scope.node):
            if isinstance(node, cst.Call):
                name = facts.canonical(node.func, scope)
                positional = _positional(node)
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


# ---------------------------------------------------------------------------
# OPX611


def _schedule_args(node: TxNode, inside_inject: bool = False) -> Iterator[tuple[TxNode, cst.BaseExpression]]:
    if node.short in ("inject_hyperparams", "inject_stateful_hyperparams"):
        return
    if node.kind in ("alias", "transform") and node.args is not None:
        param = "step_size_fn" if node.short == "scale_by_schedule" else "learning_rate"
        expr = node.args.expr(param)
        if expr is not None:
            yield node, expr
    for child in node.children:
        yield from _schedule_args(child)


@register
class ScheduleNotObservable(Rule):
    code = "OPX611"

    def check(self, ctx: Context) -> None:
        facts = ctx.facts
        if not facts.pipelines or not facts.schedules:
            return
        sf = state_facts(facts)
        linked = self._linked(sf)
        read = {id(a.held.pipeline) for a in sf.hyperparams_accesses() if a.held is not None}
        read |= {id(t.held.pipeline) for t in sf.tree_accesses() if t.held is not None}
        for pipeline in facts.pipelines:
            if id(pipeline) not in linked or id(pipeline) in read:
                continue
            for node, expr in _schedule_args(pipeline.root):
                schedule = facts.schedule_of(expr, node.scope)
                if schedule is None:
                    continue
                if not isinstance(expr, cst.Call):
                    continue  # a named schedule can be evaluated and logged as name(step)
                ctx.report(
                    expr,
                    optimizer=_describe_node(node),
                    schedule=describe(schedule.call),
                    call=f"{expr.value}(step)" if isinstance(expr, cst.Name) else "the schedule's value at each step",
                    related=[(schedule.call, "schedule built here")],
                )

    @staticmethod
    def _linked(sf: StateFacts) -> set[int]:
        facts = sf.facts
        out: set[int] = set()
        for site in facts.update_sites:
            if site.receiver is not None:
                held = sf.held(site.receiver, site.record.scope)
                if held is not None:
                    out.add(id(held.pipeline))
        for consumer in facts.consumers:
            if consumer.pipeline is not None:
                out.add(id(consumer.pipeline))
            elif consumer.tx_arg is not None:
                pipeline = sf.tx_of(consumer.tx_arg.value, consumer.record.scope)
                if pipeline is not None:
                    out.add(id(pipeline))
        for record in facts.raw.calls:
            func = record.node.func
            if isinstance(func, cst.Attribute) and func.attr.value == "init":
                pipeline = sf.tx_of(func.value, record.scope)
                if pipeline is not None:
                    out.add(id(pipeline))
        return out
