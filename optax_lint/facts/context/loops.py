"""The length of the run (the `steps` field): the training loop (`for step in
range(N)` around the train step, times an enclosing `for epoch in range(E)`, or
E x steps_per_epoch around a data loop; `while step < N`; an enclosing loop that
builds a fresh optimizer state on each turn, over seeds or folds, runs several runs
and does not multiply; a loop that only steps an inner optimizer, such as predictive
coding's activity inference, is not the run's), then names
(`num_train_steps`, `total_steps`, `max_steps`, ...), then `epochs * steps_per_epoch`.
Loop iterations are micro-batches under MultiSteps(k): steps = iterations // k."""

from __future__ import annotations

import re
from typing import Optional

import libcst as cst

from optax_lint.facts.checkpoints.vocabulary import opt_name
from optax_lint.facts.context.evidence import Evidence, code_text, last_name
from optax_lint.facts.context.inner_optimizers import inner_step_calls
from optax_lint.facts.context.run_context import ContextValue
from optax_lint.facts.project.found import Found, Origin, weaker
from optax_lint.syntax.names import lookup
from optax_lint.syntax.values import Unknown, value_of
from optax_lint.syntax.walker import Scope

STEP_NAMES = frozenset(
    {
        "num_train_steps", "total_steps", "max_steps", "train_steps", "num_steps", "total_train_steps",
        "n_steps", "num_updates", "total_updates", "max_iters", "num_iterations", "training_steps",
        "total_training_steps", "max_train_steps", "num_training_steps", "n_iters", "num_iters",
    }
)
EPOCH_NAMES = frozenset({"num_epochs", "epochs", "n_epochs", "total_epochs", "max_epochs", "num_train_epochs", "train_epochs"})
STEPS_PER_EPOCH_NAMES = frozenset({"steps_per_epoch", "num_steps_per_epoch", "iters_per_epoch", "batches_per_epoch", "updates_per_epoch"})
_STEP_CALL = re.compile(r"train_step|update_step|train_fn|step_fn|train_batch|train_iter|^update$|^step$|^apply_gradients$|update_model|do_step")


def _step_functions(inf: Evidence) -> set:
    facts = inf.facts

    def compute(_):
        scopes = set()
        for site in facts.update_sites:
            scope = site.record.scope
            while scope is not None and scope.kind not in ("function",):
                scope = scope.parent
            if scope is not None:
                scopes.add(scope.node)
        # One level up: a helper that calls the function that updates.
        callers = set()
        for record in facts.raw.calls:
            if isinstance(record.node.func, cst.Name):
                _, bindings = lookup(record.node.func.value, record.scope)
                if len(bindings) == 1 and bindings[0].kind == "def" and bindings[0].node in scopes:
                    scope = record.scope
                    while scope is not None and scope.kind != "function":
                        scope = scope.parent
                    if scope is not None:
                        callers.add(scope.node)
        return scopes | callers

    if inf.step_functions is None:
        inf.step_functions = compute(None)
    return inf.step_functions


def _is_step_call(inf: Evidence, call: cst.Call, scope: Scope, depth: int = 0, by_name: bool = True) -> bool:
    """The call takes an optimizer step: an update site, or a function (jitted, pmapped,
    partially applied) that holds one. `by_name`: a callee named like a step
    (`train_step`, `update`) counts too, though nothing shows what it does."""
    facts = inf.facts
    sites = facts.update_calls
    if call in sites:
        return True
    func = call.func
    if by_name and _STEP_CALL.search(last_name(func)):
        return True
    if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self":
        return _method_steps(inf, func.attr.value, scope)
    if isinstance(func, cst.Name) and depth < 3:
        _, bindings = lookup(func.value, scope)
        if len(bindings) == 1:
            binding = bindings[0]
            if binding.kind == "def":
                return binding.node in _step_functions(inf)
            if binding.kind in ("assign", "annassign") and isinstance(binding.value, cst.Call) and binding.value.args:
                inner = _wrapped(binding.value)  # jax.pmap(train_step), jax.jit(step), partial(step, ...)
                if isinstance(inner, cst.Name):
                    _, inner_bindings = lookup(inner.value, binding.scope)
                    if len(inner_bindings) == 1 and inner_bindings[0].kind == "def":
                        return inner_bindings[0].node in _step_functions(inf) or (by_name and bool(_STEP_CALL.search(inner.value)))
    return False


def _wrapped(call: cst.Call, depth: int = 0) -> Optional[cst.BaseExpression]:
    """The function a wrapper call wraps: jax.jit(f), jax.pmap(partial(f, ...))."""
    inner = call.args[0].value if call.args else None
    if isinstance(inner, cst.Call) and depth < 2 and last_name(inner.func) == "partial":
        return _wrapped(inner, depth + 1)
    return inner


def _method_steps(inf: Evidence, name: str, scope: Scope) -> bool:
    """`self.name(...)`: a method of the enclosing class that takes an optimizer step."""
    cls = scope.enclosing_class()
    if cls is None:
        return False
    bindings = cls.bindings.get(name, ())
    return len(bindings) == 1 and bindings[0].kind == "def" and bindings[0].node in _step_functions(inf)


def step_functions(inf: Evidence) -> set:
    """The functions that take an optimizer step, and their direct callers."""
    return _step_functions(inf)


def steps_optimizer(inf: Evidence, call: cst.Call, scope: Scope, by_name: bool = True) -> bool:
    return _is_step_call(inf, call, scope, by_name=by_name)


def training_loops(inf: Evidence):
    facts = inf.facts

    def compute(_):
        # From each train-step call, climb the statement tree to the loops around it
        # (no subtree walks): parent_stmt maps every statement to its block's owner.
        if not facts.raw.loops:
            return []
        by_node = {loop.node: loop for loop in facts.raw.loops}
        found: dict = {}
        parents = facts.raw.parent_stmt
        # An inner optimizer's steps (predictive coding's activity inference) make its
        # loop an inner one: the run is counted by the loop that steps the model.
        inner = inner_step_calls(facts)
        for record in facts.raw.calls:
            if record.loop_depth == 0 or record.node in inner or not _is_step_call(inf, record.node, record.scope):
                continue
            stmt = record.statement
            while stmt in parents:
                stmt = parents[stmt]
                if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
                    break
                loop = by_node.get(stmt)
                if loop is not None and loop.node not in found:
                    found[loop.node] = (loop, record.node)
        return [found[loop.node] for loop in facts.raw.loops if loop.node in found]

    if inf.training_loops is None:
        inf.training_loops = compute(None)
    return inf.training_loops


def _loop_count(inf: Evidence, loop) -> tuple[object, str]:
    node = loop.node
    if isinstance(node, cst.For):
        call = _find_range(node.iter)
        if call is None:
            bounded = _break_bound(inf, loop)
            return bounded if bounded is not None else (Unknown("iterates over data"), "")
        callee = last_name(call.func)
        args = [a for a in call.args if a.keyword is None and not a.star]
        if callee == "islice":
            stop = args[-1].value if len(args) >= 2 else None
            start = None
        elif len(args) == 1:
            start, stop = None, args[0].value
        elif len(args) == 2:
            start, stop = args[0].value, args[1].value
        else:
            return Unknown("range with a step"), ""
        found = inf.ev.eval(stop, loop.scope)
        if not isinstance(found, Found) or not isinstance(found.value, (int, float)) or isinstance(found.value, bool):
            return (found if isinstance(found, Unknown) else Unknown("loop bound not a number")), ""
        count = int(found.value)
        text = f"{callee}({code_text(stop)})"
        if start is not None:
            first = value_of(start, loop.scope)
            if isinstance(first, int) and not isinstance(first, bool):
                count -= first
                text = f"{callee}({code_text(start)}, {code_text(stop)})"
            else:
                text = f"{callee}(..., {code_text(stop)})"
        return Found(count, found.confidence, found.origin, found.detail), text
    if isinstance(node, cst.While):
        test = node.test
        if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
            target = test.comparisons[0]
            if isinstance(target.operator, (cst.LessThan, cst.LessThanEqual)):
                found = inf.ev.eval(target.comparator, loop.scope)
                if isinstance(found, Found) and isinstance(found.value, (int, float)) and not isinstance(found.value, bool):
                    count = int(found.value) + (1 if isinstance(target.operator, cst.LessThanEqual) else 0)
                    return Found(count, found.confidence, found.origin, found.detail), f"while ... < {code_text(target.comparator)}"
        return Unknown("while loop with an unknown bound"), ""
    return Unknown("loop"), ""


def _break_bound(inf: Evidence, loop) -> Optional[tuple[Found, str]]:
    """The count of `for step, batch in enumerate(loader):` that leaves at a bound,
    `if step >= N: break` at the top of its body (N steps; `>` gives N + 1)."""
    node = loop.node
    it, target = node.iter, node.target
    if not (isinstance(it, cst.Call) and last_name(it.func) == "enumerate" and isinstance(target, (cst.Tuple, cst.List))
            and target.elements and isinstance(target.elements[0].value, cst.Name)):
        return None
    counter = target.elements[0].value.value
    start = 0
    for index, arg in enumerate(it.args):
        if arg.keyword is not None and arg.keyword.value == "start" or arg.keyword is None and index == 1:
            start = value_of(arg.value, loop.scope)
    if not isinstance(start, int) or isinstance(start, bool):
        return None
    for stmt in node.body.body:
        if not (isinstance(stmt, cst.If) and stmt.orelse is None and _only_break(stmt.body)):
            continue
        test = stmt.test
        if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1):
            continue
        op, left, right = test.comparisons[0].operator, test.left, test.comparisons[0].comparator
        if isinstance(left, cst.Name) and left.value == counter:
            bound, extra = right, {cst.GreaterThanEqual: 0, cst.GreaterThan: 1}.get(type(op))
        elif isinstance(right, cst.Name) and right.value == counter:
            bound, extra = left, {cst.LessThanEqual: 0, cst.LessThan: 1}.get(type(op))
        else:
            continue
        if extra is None:
            continue
        found = inf.ev.eval(bound, loop.scope)
        if isinstance(found, Found) and isinstance(found.value, int) and not isinstance(found.value, bool):
            count = found.value + extra - start
            return Found(count, found.confidence, found.origin, found.detail), f"enumerate(...) until {counter} reaches {code_text(bound)}"
        return None
    return None


def _only_break(body: cst.BaseSuite) -> bool:
    statements = body.body if isinstance(body, (cst.IndentedBlock, cst.SimpleStatementSuite)) else ()
    if isinstance(body, cst.SimpleStatementSuite):
        return len(statements) == 1 and isinstance(statements[0], cst.Break)
    return (len(statements) == 1 and isinstance(statements[0], cst.SimpleStatementLine)
            and len(statements[0].body) == 1 and isinstance(statements[0].body[0], cst.Break))


def _steps_from_loops(inf: Evidence):
    loops = training_loops(inf)
    if not loops:
        return None
    innermost = []
    for scope in dict.fromkeys(loop.scope for loop, _ in loops):
        mine = [(loop, call) for loop, call in loops if loop.scope is scope]
        deepest = max(loop.depth for loop, _ in mine)
        innermost.extend((loop, call) for loop, call in mine if loop.depth == deepest)
    results = []
    for inner, call in innermost:
        count, text = _loop_count(inf, inner)
        outer = [loop for loop, _ in loops if loop.scope is inner.scope and loop.depth < inner.depth and _encloses(inf, loop.node, inner.node)]
        # A loop that starts a fresh optimizer each time round (seeds, folds, a sweep)
        # runs several runs: the run is what is inside it.
        outer.sort(key=lambda l: -l.depth)
        restart = next((i for i, loop in enumerate(outer) if _restarts_optimizer(inf, loop, inner)), None)
        if restart is not None:
            outer = outer[:restart]
        factors = []
        for loop in sorted(outer, key=lambda l: l.depth):
            c, t = _loop_count(inf, loop)
            if not isinstance(c, Found):
                return c if isinstance(c, Unknown) else None
            factors.append((c, t))
        if not isinstance(count, Found):
            if factors and isinstance(count, Unknown) and count.reason == "iterates over data":
                per_epoch = inf.named(STEPS_PER_EPOCH_NAMES, inner.scope)
                if isinstance(per_epoch, Found):
                    count, text = per_epoch, f"{per_epoch.detail or 'steps_per_epoch'} per epoch"
            if not isinstance(count, Found):
                results.append(count)
                continue
        total = count.value
        confidence = count.confidence
        parts = [text]
        for c, t in factors:
            total *= c.value
            confidence = weaker(confidence, c.confidence)
            parts.insert(0, t)
        origin = count.origin if count.origin is not None else inf.here(inner.node)
        detail = "training loop " + " x ".join(p for p in parts if p)
        if count.detail and count.detail not in detail and (
            (count.origin is not None and count.origin.facts is not inf.facts)
            or any(word in count.detail for word in ("default", "config", "flag", "--"))
        ):
            detail += f" ({count.detail})"
        results.append(Found(total, confidence, Origin(inf.facts, inner.node) if origin.facts is inf.facts else origin, detail))
    known = [r for r in results if isinstance(r, Found)]
    if not known:
        return results[0] if results else None
    values = {r.value for r in known}
    if len(values) != 1 or len(known) != len(results):
        return Unknown("several training loops with different lengths")
    return known[0]


def _restarts_optimizer(inf: Evidence, outer, inner) -> bool:
    """`outer` builds a fresh optimizer state outside `inner` on each of its turns:
    `opt_state = tx.init(params)`, `TrainState.create(...)` or `nnx.Optimizer(...)` in
    its body but not in the inner loop's."""
    facts = inf.facts
    for record in facts.raw.calls:
        func = record.node.func
        if not isinstance(func, (cst.Attribute, cst.Name)):
            continue
        name = last_name(func)
        if name == "init":
            # `opt_state = optimizer.init(params)`: the name says what the init built (an
            # optimizer rebound in each notebook cell has no single pipeline to look up)
            fresh = isinstance(func, cst.Attribute) and (
                facts.pipeline_for(func.value, record.scope) is not None
                or (isinstance(record.assigned_to, cst.Name) and opt_name(record.assigned_to.value)))
        elif name in ("create", "Optimizer", "ModelAndOptimizer"):
            fresh = (facts.callee(record) or "").endswith(("TrainState.create", "nnx.Optimizer", "nnx.ModelAndOptimizer"))
        else:
            continue
        if fresh and _encloses(inf, outer.node, record.statement) and not _encloses(inf, inner.node, record.statement):
            if name == "init" and id(facts.pipeline_for(func.value, record.scope)) in facts.side_pipelines:
                continue  # an inner optimizer restarted each pass: the outer loop still trains one run
            return True
    return False


def _encloses(inf: Evidence, outer: cst.CSTNode, inner: cst.CSTNode) -> bool:
    """`inner` sits in `outer`'s body (not `outer` itself)."""
    return inner is not outer and inf.facts.raw.statement_inside(inner, outer)


def infer_steps(inf: Evidence, context) -> Optional[ContextValue]:
    found = _steps_from_loops(inf)
    source = "loop"
    if not isinstance(found, Found):
        loop_reason = found.reason if isinstance(found, Unknown) else "no training loop found"
        found = inf.named(STEP_NAMES)
        source = "name"
        if not isinstance(found, Found):
            epochs = inf.named(EPOCH_NAMES)
            per_epoch = inf.named(STEPS_PER_EPOCH_NAMES)
            if isinstance(epochs, Found) and isinstance(per_epoch, Found):
                found = Found(
                    epochs.value * per_epoch.value, weaker(epochs.confidence, per_epoch.confidence),
                    per_epoch.origin or epochs.origin, f"{epochs.detail} x {per_epoch.detail}",
                )
                source = "epochs"
        if not isinstance(found, Found):
            inf.note("steps", f"training loop: {loop_reason}; no num_train_steps/total_steps/max_steps value")
            return None
    value = int(found.value)
    detail = found.detail
    accum = inf.context.get("grad_accum") if inf.context is not None else None
    if source == "loop" and accum is not None and accum.value > 1:
        value //= accum.value
        detail += f" // {accum.value} micro-batches per update (MultiSteps)"
    if value < 1:
        return None
    return inf.value(found, value=value, detail=detail)


def _find_range(expr: cst.BaseExpression, depth: int = 0) -> Optional[cst.Call]:
    if isinstance(expr, cst.NamedExpr) and depth <= 3:
        return _find_range(expr.value, depth + 1)  # `(pbar := trange(n))`: the bar kept for its messages
    if depth > 3 or not isinstance(expr, cst.Call):
        return None
    name = last_name(expr.func)
    if name in ("range", "trange"):
        return expr
    if name == "islice" and len(expr.args) >= 2:
        return expr
    if name in ("tqdm", "enumerate", "zip", "iter", "list", "progress_bar", "track"):
        for arg in expr.args:
            found = _find_range(arg.value, depth + 1)
            if found is not None:
                return found
    return None


def run_length_expression(facts, at: Scope) -> Optional[cst.BaseExpression]:
    """The expression that bounds the run's one training loop (`args.num_steps` of
    `for step in range(args.num_steps)`, `N` of `while step < N`), when it means the same
    at scope `at` (every name in it resolves to the same binding there); None when the
    run length is a product of loops, several loops disagree, or the expression's names
    are out of reach at `at`. A fix writes it instead of the number it evaluates to."""
    inf = Evidence(facts)
    loops = [loop for loop, _ in training_loops(inf)]
    found: dict[str, tuple[cst.BaseExpression, Scope]] = {}
    for loop in loops:
        if any(other is not loop and (_encloses(inf, other.node, loop.node) or _encloses(inf, loop.node, other.node)) for other in loops):
            return None  # epochs x steps: no one expression holds the length
        bound = _loop_bound(loop.node, loop.scope)
        if bound is None:
            return None
        found.setdefault(code_text(bound), (bound, loop.scope))
    if len(found) != 1:
        return None
    expr, scope = next(iter(found.values()))
    for name in _free_names(expr):
        here, there = lookup(name, at), lookup(name, scope)
        if not there[1] or here[0] is not there[0] or here[1] != there[1]:
            return None
    return expr


def _loop_bound(node: cst.CSTNode, scope: Scope) -> Optional[cst.BaseExpression]:
    if isinstance(node, cst.For):
        call = _find_range(node.iter)
        if call is None or last_name(call.func) not in ("range", "trange"):
            return None
        args = [a for a in call.args if a.keyword is None and not a.star]
        if len(args) == 2 and value_of(args[0].value, scope) == 0:
            args = args[1:]
        return args[0].value if len(args) == 1 else None
    if isinstance(node, cst.While):
        test = node.test
        if isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and isinstance(test.comparisons[0].operator, cst.LessThan):
            return test.comparisons[0].comparator
    return None


def _free_names(expr: cst.BaseExpression) -> list[str]:
    """The names an expression reads (the roots of attribute chains and subscripts)."""
    if isinstance(expr, cst.Name):
        return [expr.value]
    if isinstance(expr, cst.Attribute):
        return _free_names(expr.value)
    if isinstance(expr, (cst.Integer, cst.Float)):
        return []
    if isinstance(expr, cst.BinaryOperation):
        return _free_names(expr.left) + _free_names(expr.right)
    if isinstance(expr, cst.Subscript):
        return _free_names(expr.value) + [n for e in expr.slice if isinstance(e.slice, cst.Index) for n in _free_names(e.slice.value)]
    return ["<unknown>"]  # calls and the rest: not reused in a fix
