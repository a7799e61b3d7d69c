"""Whether training goes on after a point in the file. A resume is a restore that
training continues from: a trainer that reloads its best epoch's params once training
is over (`trainer.train_model(...)`, then `trainer.load_model()`, then an evaluation)
rebuilds a state nothing trains, and loses no optimizer state."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from optax_lint.facts.context.loops import training_loops
from optax_lint.facts.context.purpose import TRAINING_CALL_NAMES
from optax_lint.syntax.arguments import param_arg
from optax_lint.syntax.nodes import node_code
from optax_lint.syntax.walker import Scope

# How many callers up a restore helper's use is followed (load -> resume_or_init -> main).
_CALLER_DEPTH = 2


def _function(scope: Optional[Scope]) -> Optional[Scope]:
    """The function (or the module) a scope's code runs in."""
    while scope is not None and scope.kind not in ("function", "module"):
        scope = scope.parent
    return scope


class TrainingCalls:
    """The training loops of a module, and the functions that run one (directly, or by
    calling such a function: `train_model` calls `train_epoch`, whose loop steps). Built
    once per module (ModuleFacts.training_calls)."""

    def __init__(self, facts) -> None:
        self.facts = facts
        self.order = facts.call_order
        self.loops = [(_function(loop.scope), call) for loop, call in training_loops(facts.inference)]
        self.calls_by_function: dict = {}
        functions: dict = {}  # function node -> its scope, for the functions that make calls
        for record in facts.raw.calls:
            fn = _function(record.scope)
            self.calls_by_function.setdefault(id(fn), []).append(record)
            if fn is not None and fn.kind == "function":
                functions[fn.node] = fn
        self.defined = {fn.name for fn in functions.values()}
        self.names: set = set()
        self._close(functions)

    def _close(self, functions: dict) -> None:
        """The names of the functions that train: those with a training loop, then those
        that call one of them, until nothing changes."""
        training = {scope.node for scope, _ in self.loops if scope is not None and scope.kind == "function"}
        for _ in range(4):
            self.names = {functions[node].name for node in training if node in functions}
            grown = {
                fn.node for fn in functions.values()
                if fn.node not in training
                and any(self._trains(record) for record in self.calls_by_function.get(id(fn), ()))
            }
            if not grown:
                return
            training |= grown
        self.names = {functions[node].name for node in training if node in functions}

    def _trains(self, record) -> bool:
        """The call runs a training function of this file (`train_model(...)`,
        `trainer.train_model(...)`, `self.train_epoch(...)`), or one defined elsewhere and
        known by its name (`trainer.fit()`, `train_lib.train_and_evaluate(...)`)."""
        func = record.node.func
        name = func.value if isinstance(func, cst.Name) else func.attr.value if isinstance(func, cst.Attribute) else None
        if name is None:
            return False
        return name in self.names or (name in TRAINING_CALL_NAMES and name not in self.defined)

    def after(self, fn: Scope, position: int, receiver: Optional[str] = None) -> bool:
        """A training loop, or a call that runs one, later in `fn` than `position`. With a
        `receiver` (`trainer`), only a training method called on that object counts: the
        state a method rebuilt lives in its object, and another trainer's run is not its."""
        if receiver is None:
            for scope, call in self.loops:
                if scope is fn and self.order.get(call, -1) > position:
                    return True
        for record in self.calls_by_function.get(id(fn), ()):
            if self.order.get(record.node, -1) <= position or not self._trains(record):
                continue
            func = record.node.func
            if receiver is None or (isinstance(func, cst.Attribute) and node_code(func.value) == receiver):
                return True
        return False

    def callers(self, fn: Scope) -> list:
        """Calls of `fn` in this module: by its name, or, for a method, as `obj.fn(...)`."""
        method = _is_method(fn)
        out = []
        for record in self.facts.raw.calls:
            func = record.node.func
            if isinstance(func, cst.Name) and func.value == fn.name and not method:
                out.append(record)
            elif isinstance(func, cst.Attribute) and func.attr.value == fn.name and method:
                out.append(record)
        return out


def _object_trains_after(training: TrainingCalls, method: Scope, depth: int) -> bool:
    """The object whose `method` ran is trained afterwards: `trainer.method()` then
    `trainer.fit()`; `self.method()` inside another method of the class, followed up
    from there; for `__init__`, the object a constructor call builds (`trainer =
    Trainer(...)`, then `trainer.fit()`)."""
    cls = method.parent
    if method.name == "__init__":
        for record in training.facts.raw.calls:
            func = record.node.func
            built = func.value if isinstance(func, cst.Name) else func.attr.value if isinstance(func, cst.Attribute) else None
            target = record.assigned_to
            if built != cls.name or not isinstance(target, cst.Name):
                continue
            caller = _function(record.scope)
            if caller is not None and training.after(caller, training.order.get(record.node, -1), target.value):
                return True
        return False
    for call in training.callers(method):
        caller = _function(call.scope)
        if caller is None:
            continue
        receiver = node_code(call.node.func.value)
        if training.after(caller, training.order.get(call.node, -1), receiver):
            return True
        if receiver == "self" and depth < _CALLER_DEPTH and _is_method(caller) and caller.parent is cls:
            if _object_trains_after(training, caller, depth + 1):
                return True
    return False


def _is_method(fn: Scope) -> bool:
    return fn.parent is not None and fn.parent.kind == "class"


def trains_after(facts, record) -> bool:
    """Training runs after the call `record`: later in its own function (or module); for
    a method, on the same object after the method ran (`_object_trains_after`); for a
    function, after a call of it in a caller, up to two callers up. False when no path
    from it reaches a training step, or when nothing in the file calls it."""
    training = facts.training_calls
    fn = _function(record.scope)
    if fn is None:
        return False
    if training.after(fn, training.order.get(record.node, -1)):
        return True
    if _is_method(fn):
        return _object_trains_after(training, fn, 0)
    # Each function reached, with the parameters its callers must pass for the restore
    # to run: `get_model(config)` skips the load behind `if load_from:`.
    frontier, seen = [(fn, _switches(facts, record, fn))], {id(fn)}
    for _ in range(_CALLER_DEPTH):
        upper = []
        for callee, switches in frontier:
            if callee.kind != "function" or _is_method(callee):
                continue
            for call in training.callers(callee):
                if switches and not _passes_any(call.node, callee, switches):
                    continue
                caller = _function(call.scope)
                if caller is None:
                    continue
                if training.after(caller, training.order.get(call.node, -1)):
                    return True
                if id(caller) not in seen:
                    seen.add(id(caller))
                    upper.append((caller, _switches(facts, call, caller)))
        frontier = upper
    return False


# Defaults that leave a switch off: `def build(config, load_from=""):`.
_OFF = ("None", "False", "0", '""', "''")


def _switches(facts, record, fn: Scope) -> list[str]:
    """Parameters of `fn`, off by default, that the call `record` needs on: it sits in
    the body of `if load_from:` (or `if load_from is not None:`) inside `fn`."""
    if fn.kind != "function" or not isinstance(fn.node, cst.FunctionDef):
        return []
    off = {
        p.name.value for p in (*fn.node.params.params, *fn.node.params.kwonly_params)
        if p.default is not None and node_code(p.default) in _OFF
    }
    names = []
    for branch, in_body in facts.raw.enclosing_ifs(record.statement, fn.node):
        if not in_body:
            continue
        test = branch.test
        if isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and isinstance(test.comparisons[0].operator, cst.IsNot) \
                and node_code(test.comparisons[0].comparator) == "None":
            test = test.left
        if isinstance(test, cst.Name) and test.value in off:
            names.append(test.value)
    return names


def _passes_any(call: cst.Call, fn: Scope, names: list[str]) -> bool:
    """The call gives one of the parameters `names` a value (by keyword, by position,
    or through `*args`/`**kwargs`, which may hold it)."""
    return any(a.star for a in call.args) or any(param_arg(call, fn.node, name) is not None for name in names)
