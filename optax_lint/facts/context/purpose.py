"""What the code an optimizer sits in is for: a training run, or not, with the evidence.

`ModuleFacts.purpose` is a `Purpose`. Advice about how to train (the catalogue's
`speaks_about = "training-runs"`) applies to a training run only; a defect rule
speaks wherever its defect is real, except in a test that never steps an optimizer
(it builds one to read its state layout). The engine applies both (engine/filters.py).

A training run: an optimizer stepped repeatedly, by a loop around its update (`for`,
`while`, a `lax.scan` / `fori_loop` / `while_loop` body, `self.train_step(...)` in a
trainer's loop), a trainer's `fit` / `train` call, or a project `train(...)` function handed
the optimizer, outside tests. Not one:

- a test: a test file (`test_*.py`, `*_test.py`, `conftest.py`, under `tests/`), or
  code whose only optimizer use sits in `test*` functions / TestCase classes
  (parameterised sweeps over optimizers included);
- a benchmark: a loop that applies the same inputs between two clock reads
  (`time.perf_counter()` ... `block_until_ready`), or a file or folder named
  bench/benchmark without a loop that trains;
- a toy demo: a loop of at most a thousand steps over a few literal rows of data or
  one random batch; a loop of any length whose every batch is cut from random inputs
  and random labels drawn once (a sharding walkthrough); batches made from a paragraph
  written in the file (a character-level demo); batches made from random numbers drawn
  once and handed down through the functions that train (a mock run of a pipeline);
- a building block: a function returns the optimizer and nothing in the file steps it;
- otherwise, code that never steps its optimizer repeatedly.

Evidence has a strength: a loop known to step the optimizer only because the callee
is named like a step (`train_step` imported from a package not read), a trainer known
by its name, or a training loop in a file named like a benchmark is `weak`. Findings
resting on weak evidence are advice (info), and say what was inferred from where.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Optional

import libcst as cst

from optax_lint.facts.context.evidence import code_text, last_name
from optax_lint.facts.context.loops import step_functions, steps_optimizer
from optax_lint.facts.context.made_up_data import (
    TOY_TEXT,
    Parts,
    RandomCalls,
    random_draw,
    root_object,
    single_value,
    small_literal_array,
    synthetic_data,
    written_text_size,
)
from optax_lint.facts.context.region import calls_of_local_functions
from optax_lint.facts.file_role import in_test_function, is_test_file
from optax_lint.facts.state.walks import names_read
from optax_lint.syntax.arguments import param_arg
from optax_lint.syntax.names import lookup
from optax_lint.syntax.nodes import assigned_names, over_range, spells_test_case
from optax_lint.syntax.values import value_of
from optax_lint.syntax.walker import Scope, enclosing_function, inside_scope

TRAINING_RUN = "training run"
TEST = "test"
BENCHMARK = "benchmark"
TOY = "toy demo"
BUILDING_BLOCK = "building block"
NOT_STEPPED = "no training loop"

_BENCH_PART = re.compile(r"(^|[_\-.])(bench|benchmarks?|benchmarking)($|[_\-.])", re.IGNORECASE)
_TIMERS = frozenset({"perf_counter", "perf_counter_ns", "monotonic", "default_timer", "timeit", "repeat"})
_SCAN_BODY = {"jax.lax.scan": 0, "jax.lax.fori_loop": 2, "jax.lax.while_loop": 1}
_TRAINER_CALLS = frozenset({"fit", "train"})
_LOOP_CALLS = frozenset({"run_loop", "train_loop", "training_loop", "train_and_evaluate", "run_training", "train_model"})
# Calls known to run a training loop by their name alone (`trainer.fit()`, `train_and_evaluate(...)`).
TRAINING_CALL_NAMES = _TRAINER_CALLS | _LOOP_CALLS
_FRAMEWORK_EXPERIMENTS = ("AbstractExperiment",)  # jaxline
_DATA_WORDS = re.compile(r"load|dataset|dataloader|read_|tfds|from_tensor|download|fetch", re.IGNORECASE)
_STEP_NAME = re.compile(r"(^|_)(pre)?(train|update)(_|$)|^(p_)?(do_)?step(_fn)?$|train_fn|apply_gradients", re.IGNORECASE)
_NOT_A_STEP = re.compile(r"eval|test|predict|valid|infer|sample|metric|env|restore|save|log|summar|should|denoise", re.IGNORECASE)
_STEPPER = re.compile(r"^(opt|optim|optimizer|tx|solver|updater|trainer|learner|train_state|state)(_\w*)?$", re.IGNORECASE)
_OPT_STATE = re.compile(r"^(opt_state|optimizer_state|optim_state)$")
# Builtins that hold the optimizer state (a checkpoint's `dict(opt_state=opt_state)`),
# never step it.
_CONTAINERS = frozenset({"dict", "list", "tuple", "print", "len", "isinstance", "getattr", "setattr", "id", "type", "repr", "str"})
_TOY_STEPS = 1000


@dataclass(frozen=True)
class Purpose:
    kind: str
    evidence: str  # what was read, in words: "a loop steps the optimizer (`state.apply_gradients`)"
    node: Optional[cst.CSTNode] = None  # where (shown as file:line), when one place says it
    facts: object = field(default=None, repr=False, compare=False)
    weak: bool = False  # rests on a name alone (of a file, function or class)
    declared: bool = False  # the user declared the run context

    @property
    def trains(self) -> bool:
        return self.kind == TRAINING_RUN

    @property
    def location(self) -> Optional[str]:
        if self.node is None or self.facts is None:
            return None
        from optax_lint.facts.project.found import Origin

        return Origin(self.facts, self.node).location()

    def describe(self) -> str:
        """`training run: a loop steps the optimizer (train.py:42)`."""
        where = self.location
        text = f"{self.kind}: {self.evidence}"
        return f"{text} ({where})" if where else text


def find_purpose(facts) -> Purpose:
    if facts.declares_context:
        return Purpose(TRAINING_RUN, "the run context is declared (command line, pragma or config)", declared=True)
    if is_test_file(facts.path):
        return Purpose(TEST, "a test file (by its name or folder)")
    return _Reader(facts).read()


class _Reader:
    def __init__(self, facts) -> None:
        self.facts = facts
        self.inf = facts.inference
        self._loop_calls: dict = {}

    def purpose(self, kind: str, evidence: str, node=None, weak: bool = False) -> Purpose:
        return Purpose(kind, evidence, node, self.facts, weak)

    def read(self) -> Purpose:
        facts = self.facts
        bench_named = _bench_named(facts.path)
        strong, weak, timing, toy = [], [], [], []
        for loop, call, stepped in self._stepping_loops():
            if self._timing(loop):
                timing.append((loop, call))
            elif self._short_and_dataless(loop) and (demo := self._demo(loop, call)) is not None:
                toy.append((call, demo))
            elif (noise := self._trains_on_noise(loop, call) or self._trains_on_written_text(loop)
                   or self._handed_random_batches(loop, call)) is not None:
                toy.append((call, noise))
            else:
                (strong if stepped else weak).append((loop, call))
        scanned = self._scanned_steps()
        if strong or scanned:
            node, text = (strong[0][1], f"a loop steps the optimizer (`{_short(strong[0][1])}`)") if strong else scanned
            if bench_named:
                return self.purpose(TRAINING_RUN, text + ", but the file is named like a benchmark", node, weak=True)
            return self.purpose(TRAINING_RUN, text, node)
        if bench_named:
            return self.purpose(BENCHMARK, "the file or its folder is named like a benchmark, and no loop in it trains")
        if timing:
            return self.purpose(BENCHMARK, "a loop repeats the update on the same inputs between clock reads", timing[0][1])
        if weak:
            call = weak[0][1]
            return self.purpose(TRAINING_RUN, f"a loop calls `{_short(call)}`, a step known only by its name", call, weak=True)
        trainer = self._trainer_call()
        if trainer is not None:
            noise = self._trainer_fed_noise(trainer[0])
            if noise is not None:
                return self.purpose(TOY, noise, trainer[0])
            return self.purpose(TRAINING_RUN, trainer[1], trainer[0], weak=True)
        if toy:
            return self.purpose(TOY, toy[0][1], toy[0][0])
        used = [p for p in facts.pipelines if not _in_test(p.record.scope)]
        if facts.pipelines and not used:
            return self.purpose(TEST, "every optimizer is built inside a test")
        if used and all(p.function is not None for p in used) and not facts.update_sites:
            return self.purpose(BUILDING_BLOCK, "a function returns the optimizer and nothing here steps it", used[0].call)
        return self.purpose(NOT_STEPPED, "nothing in the file steps an optimizer repeatedly")

    # -- loops ---------------------------------------------------------------
    def _stepping_loops(self) -> list:
        """(loop, call, strong) for the innermost loop around each optimizer step outside
        tests; `strong` false when the call is known as a step only by its name."""
        facts = self.facts
        if not facts.raw.loops:
            return []
        by_node = {loop.node: loop for loop in facts.raw.loops}
        parents = facts.raw.parent_stmt
        best: dict = {}
        for record in facts.raw.calls:
            if record.loop_depth == 0 or _in_test(record.scope):
                continue
            if steps_optimizer(self.inf, record.node, record.scope, by_name=False):
                stepped = True
            elif _named_like_a_step(record.node, record.scope):
                stepped = False
            else:
                continue
            stmt, loop = record.statement, None
            while stmt in parents and loop is None:
                stmt = parents[stmt]
                if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
                    break
                loop = by_node.get(stmt)
            if loop is None:
                continue
            known = best.get(loop.node)
            if known is None or (stepped and not known[2]):
                best[loop.node] = (loop, record.node, stepped)
        return list(best.values())

    def _calls_in(self, loop) -> list:
        """The call records inside a loop's body."""
        found = self._loop_calls.get(loop.node)
        if found is None:
            parents = self.facts.raw.parent_stmt
            found = []
            for record in self.facts.raw.calls:
                if record.loop_depth == 0 or not inside_scope(record.scope, loop.scope):
                    continue
                stmt = record.statement
                while stmt in parents:
                    stmt = parents[stmt]
                    if stmt is loop.node:
                        found.append(record)
                        break
            self._loop_calls[loop.node] = found
        return found

    def _draws_data(self, loop) -> bool:
        node = loop.node
        if isinstance(node, cst.For) and not over_range(node.iter):
            return True  # iterates over something: a data loader, batches
        return self._calls_for_data(loop)

    def _calls_for_data(self, loop) -> bool:
        """A call in the loop draws data: `next(it)`, or one named like loading."""
        return any(last_name(r.node.func) == "next" or _DATA_WORDS.search(last_name(r.node.func)) for r in self._calls_in(loop))

    def _timing(self, loop) -> bool:
        """Clock reads and block_until_ready around a loop that draws no data; or a short
        loop (a literal range of at most a thousand steps) over the same data that reads
        the clock on both sides of each step, a throughput check."""
        if self._draws_data(loop):
            return False
        function = enclosing_function(loop.scope)
        calls = [r for r in self.facts.raw.calls if enclosing_function(r.scope) is function]
        if any(_reads_clock(r) for r in calls) and any(last_name(r.node.func) == "block_until_ready" for r in calls):
            return True
        if not _short_range(loop.node, loop.scope):
            return False
        return sum(1 for r in self._calls_in(loop) if _reads_clock(r) and enclosing_function(r.scope) is function) >= 2

    def _short_and_dataless(self, loop) -> bool:
        """A `for` over a literal range of at most a thousand steps that draws no data, in
        a file that loads none: the shape both kinds of demo share."""
        if not _short_range(loop.node) or self._draws_data(loop):
            return False
        return not self._file_loads_data

    def _demo(self, loop, call: cst.Call) -> Optional[str]:
        """What makes a short, dataless loop a demo, or None: a few literal rows of data in
        the file, or one batch of random numbers fed to the step every time."""
        if any(small_literal_array(r.node) for r in self.facts.raw.calls):
            return "a loop of a few steps over a few literal rows of data"
        if self._one_random_batch(loop, call):
            return "a loop of a few steps that feeds the step one batch of random numbers, made once"
        return None

    def _one_random_batch(self, loop, call: cst.Call) -> bool:
        """A short, dataless loop whose step is fed the same batch every time, a batch of
        random numbers made once before the loop (`tokens = jax.random.randint(key,
        (batch, seq), 1, vocab)`): a walkthrough that shows the step runs (or traces it
        for a profiler), not a run whose stability matters."""
        scope = self._call_scope(loop, call)
        fixed = [a.value for a in call.args if isinstance(a.value, cst.Name) and not self._bound_in(a.value, scope, loop)]
        return any(self._random(name, scope, 3) for name in fixed)

    def _call_scope(self, loop, call: cst.Call) -> Scope:
        """The scope the loop's step call is made in."""
        return next((r.scope for r in self._calls_in(loop) if r.node is call), loop.scope)

    @functools.cached_property
    def _file_loads_data(self) -> bool:
        """Some call in the file is named like loading data (`load_dataset`, `tfds.load`).
        A function the file defines is judged by the calls in its body, which are among
        the file's own, not by its name (`build_dataset(teacher, prompts)`)."""
        return any(_loads_data(r) for r in self.facts.raw.calls)

    def _trains_on_noise(self, loop, call: cst.Call) -> Optional[str]:
        """Every batch the step gets is cut from random numbers drawn once before the
        loop, inputs and targets alike (`input_ids = jax.random.randint(...)`, `labels =
        jax.random.randint(...)`, then `input_ids[i:i + batch_size]`), in a file that
        loads no data: noise with nothing to learn, a walkthrough of the step (a sharding
        demo) however many steps it takes, not a run whose stability matters."""
        if self._draws_data(loop) or self._file_loads_data:
            return None
        record = next((r for r in self._calls_in(loop) if r.node is call), None)
        scope = record.scope if record is not None else loop.scope
        carried = assigned_names(record.statement) if record is not None else set()
        drawn: set[str] = set()
        fed = False
        for arg in call.args:
            value = arg.value
            if not isinstance(value, cst.Name) or value.value in carried or not self._bound_in(value, scope, loop):
                continue  # the model, the optimizer, the state the step hands back
            fed = True
            if not self._cut_from_noise(value, scope, loop, drawn, 4):
                return None
        if not fed or len(drawn) < 2:
            return None
        names = ", ".join(sorted(drawn))
        return f"every batch the step trains on is cut from random numbers drawn once before the loop ({names})"

    def _trains_on_written_text(self, loop) -> Optional[str]:
        """The loop iterates over batches made from a short text of several lines written
        in the file (`batches = create_dataset(SAMPLE_TEXT * 20, ...)`): a character-level
        demo that memorises a paragraph. A one-line string (a path, a dataset's name)
        is not such a text."""
        node = loop.node
        if not isinstance(node, cst.For):
            return None
        it = _iterated(node.iter)
        if not isinstance(it, cst.Name):
            return None
        made = single_value(it, loop.scope)
        if not isinstance(made, cst.Call):
            return None
        for arg in made.args:
            size = written_text_size(arg.value, loop.scope)
            if size is not None and size <= TOY_TEXT:
                return f"the batches are made from a text of {size} characters written in the file"
        return None

    def _handed_random_batches(self, loop, call: cst.Call) -> Optional[str]:
        """The loop iterates over, or hands its step, batches of random numbers that the
        file draws once and passes down through the functions that train
        (`prompt_batches = [jax.random.randint(k, ...) for k in keys]`, then
        `train(..., prompt_batches)`, `for tokens in prompt_batches:`), in a file that
        loads no data: a mock run that shows the pieces fit, not a run whose stability
        matters."""
        if self._file_loads_data or not isinstance(loop.node, cst.For):
            return None
        if self._calls_for_data(loop):
            return None  # a draw of data in the loop (the loop's own iterable is judged below)
        scope = self._call_scope(loop, call)
        candidates = [(_iterated(loop.node.iter), loop.scope)] + [(a.value, scope) for a in call.args]
        for expr, where in candidates:
            if isinstance(expr, cst.Name) and self._random_passed_down(expr, where, 4):
                return f"its batches ({expr.value}) are random numbers drawn once and handed down to the training functions"
        return None

    def _random_passed_down(self, name: cst.Name, scope: Scope, depth: int, hops: int = 0) -> bool:
        """`name` is a parameter that every call of its function in this file passes
        random numbers drawn once (a name bound once to a draw, or to something made from
        one: `dataset = build_dataset(teacher, prompts)`), followed `depth` calls up. At
        least one call is crossed: a batch drawn beside its loop is the other demo
        checks' business."""
        _, bindings = lookup(name.value, scope)
        if len(bindings) != 1 or depth < 0:
            return False
        binding = bindings[0]
        if binding.kind in ("assign", "annassign", "unpack"):
            if binding.value is None:
                return False
            if hops > 0 and binding.kind != "unpack" and self._random(name, scope, 3):
                return True
            # made from another name that is handed random numbers (`dataset = build(prompts)`)
            return any(self._random_passed_down(n, binding.scope, depth - 1, hops)
                       for n in names_read(binding.value) if n.value != name.value)
        fn = binding.scope.node if binding.kind == "param" else None
        if not isinstance(fn, cst.FunctionDef):
            return False
        calls = [r for r in self.facts.raw.calls if isinstance(r.node.func, cst.Name) and r.node.func.value == fn.name.value
                 and any(b.kind == "def" and b.node is fn for b in lookup(fn.name.value, r.scope)[1])]
        if not calls:
            return False
        for record in calls:
            arg = param_arg(record.node, fn, name.value)
            if not isinstance(arg, cst.Name) or not self._random_passed_down(arg, record.scope, depth - 1, hops + 1):
                return False
        return True

    def _cut_from_noise(self, name: cst.Name, scope: Scope, loop, drawn: set, depth: int, seen: frozenset = frozenset()) -> bool:
        """`name`, bound inside the loop, is built only by slicing, indexing, placing and
        regrouping arrays drawn at random before the loop (added to `drawn`), with loop
        counters and other names that hold no array sliced; no draw or call for data is
        made inside the loop. Every binding of it in the loop must be so (`batch = {...}`
        then `batch = jax.tree.map(place, batch)`)."""
        _, bindings = lookup(name.value, scope)
        inside = [b for b in bindings if self._stmt_in(b.node, loop)]
        if depth < 0 or not inside or any(b.kind not in ("assign", "annassign") or b.value is None for b in inside):
            return False
        seen = seen | {name.value}
        for binding in inside:
            parts = Parts()
            binding.value.visit(parts)
            if parts.calls_random:
                return False  # fresh noise each step (a diffusion or GAN step's own draw)
            for sliced in parts.sliced:
                if self._drawn_before(sliced, scope, loop):
                    drawn.add(sliced.value)
                elif sliced.value in seen:
                    continue
                elif not self._bound_in(sliced, scope, loop) or not self._cut_from_noise(sliced, scope, loop, drawn, depth - 1, seen):
                    return False
            for other in parts.names:
                if other.value in parts.lambda_params or other.value in seen or any(other is s for s in parts.sliced):
                    continue
                _, found = lookup(other.value, scope)
                if any(self._stmt_in(b.node, loop) and b.kind in ("assign", "annassign") for b in found):
                    if not self._cut_from_noise(other, scope, loop, drawn, depth - 1, seen):
                        return False
        return True

    def _drawn_before(self, name: cst.Name, scope: Scope, loop) -> bool:
        """`name` is bound once, before the loop, to a random draw (`.astype(...)` allowed)."""
        _, bindings = lookup(name.value, scope)
        if len(bindings) != 1 or bindings[0].kind not in ("assign", "annassign") or self._stmt_in(bindings[0].node, loop):
            return False
        value = bindings[0].value
        while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value == "astype":
            value = value.func.value
        return isinstance(value, cst.Call) and random_draw(value)

    def _stmt_in(self, stmt, loop) -> bool:
        """`stmt` sits inside `loop`."""
        return self.facts.raw.statement_inside(stmt, loop.node)

    def _bound_in(self, name: cst.Name, scope: Scope, loop) -> bool:
        """Some binding of `name` sits inside `loop` (it changes from step to step)."""
        _, bindings = lookup(name.value, scope)
        if any(self._stmt_in(binding.node, loop) for binding in bindings):
            return True
        return not bindings  # unknown: treat as changing

    def _random(self, name: cst.Name, scope: Scope, depth: int) -> bool:
        """`name` is bound once to random numbers, directly or through the names its
        value is built from (`Batch(inputs=jnp.pad(tokens, ...), labels=tokens)`)."""
        _, bindings = lookup(name.value, scope)
        if len(bindings) != 1 or bindings[0].kind not in ("assign", "annassign") or bindings[0].value is None:
            return False
        value, home = bindings[0].value, bindings[0].scope
        found = RandomCalls(home)
        value.visit(found)
        if found.random:
            return True
        return depth > 0 and any(self._random(n, home, depth - 1) for n in found.names)

    def _scanned_steps(self) -> Optional[tuple]:
        """A lax.scan / fori_loop / while_loop whose body takes an optimizer step."""
        facts = self.facts
        steppers = step_functions(self.inf)
        for name, index in _SCAN_BODY.items():
            for record in facts.calls_by_name.get(name, ()):
                if _in_test(record.scope):
                    continue
                positional = [a for a in record.node.args if a.keyword is None]
                body = positional[index].value if len(positional) > index else None
                if isinstance(body, cst.Name):
                    _, bindings = lookup(body.value, record.scope)
                    if len(bindings) == 1 and bindings[0].kind == "def" and bindings[0].node in steppers:
                        return record.node, f"`{name.rsplit('.', 1)[-1]}` steps the optimizer in `{body.value}`"
        return None

    def _trainer_fed_noise(self, call: cst.Call) -> Optional[str]:
        """The training function is handed arrays of random numbers drawn once, in a file
        that loads no data (`X_np = rng.rand(512, 3, 224, 224)`, then
        `train(model, optimizer, X_train=jnp.array(X_np[:400]), ...)`): a smoke test that
        shows the pieces fit, not a run whose stability matters. Data loads are looked
        for beside the call (a model module's weight loaders elsewhere feed no run)."""
        record = self.facts.record_of.get(call)
        if record is None or any(r.scope is record.scope and _loads_data(r) for r in self.facts.raw.calls):
            return None
        for arg in call.args:
            value = arg.value
            while isinstance(value, cst.Call) and last_name(value.func) in ("array", "asarray") and value.args:
                value = value.args[0].value  # jnp.array(X_train)
            if isinstance(value, cst.Name) and self._drawn_once(value, record.scope):
                return f"`{_short(call)}` is handed data drawn at random or generated once ({value.value}), and nothing beside the call loads data"
        return None

    def _drawn_once(self, name: cst.Name, scope: Scope, depth: int = 3) -> bool:
        """`name` holds random numbers drawn once: bound to a draw (or to synthetic data,
        see `synthetic_data`), or unpacked from slices or columns of one (`X_train, X_val
        = X_np[:400], X_np[400:]`, `X, y = df.drop(columns=["y"]).values, df["y"].values`),
        or from a split of such arrays (`train_test_split(X, y)`)."""
        if self._random(name, scope, 3) or self._synthetic(name, scope):
            return True
        _, bindings = lookup(name.value, scope)
        if depth <= 0 or len(bindings) != 1 or bindings[0].kind != "unpack" or bindings[0].value is None:
            return False
        binding, value = bindings[0], bindings[0].value
        if isinstance(value, cst.Tuple) and len(binding.index) == 1 and binding.index[0] < len(value.elements):
            value = value.elements[binding.index[0]].value
        if isinstance(value, cst.Call) and isinstance(value.func, cst.Name):
            # a split of the arrays (`train_test_split(X, y, test_size=0.2)`)
            arrays = [a.value for a in value.args if a.keyword is None and not a.star]
            return bool(arrays) and all(isinstance(a, cst.Name) and self._drawn_once(a, binding.scope, depth - 1) for a in arrays)
        root = root_object(value)
        return root is not None and (self._random(root, binding.scope, 3) or self._synthetic(root, binding.scope))

    def _synthetic(self, name: cst.Name, scope: Scope) -> bool:
        """`name` is bound once to a synthetic data set (`df = generate_data()` from a
        `fake_data` module, `X, y = make_moons(...)`)."""
        _, bindings = lookup(name.value, scope)
        if len(bindings) != 1 or bindings[0].kind not in ("assign", "annassign", "unpack"):
            return False
        value = bindings[0].value
        return isinstance(value, cst.Call) and synthetic_data(value, bindings[0].scope)

    def _trainer_call(self) -> Optional[tuple]:
        """A training loop that lives elsewhere, known by a name: `trainer.fit(...)`,
        `run_loop(agent, env)`, a jaxline experiment (jaxline calls its `step`)."""
        for record in self.facts.raw.calls:
            func = record.node.func
            name = last_name(func)
            if _in_test(record.scope) or _in_evaluation(record.scope):
                continue
            if name in _LOOP_CALLS or (name in _TRAINER_CALLS and isinstance(func, cst.Attribute)
                                       and "trainer" in code_text(func.value).lower()):
                return record.node, f"`{_short(record.node)}` is known as a training loop only by its name"
            if name in _TRAINER_CALLS and isinstance(func, cst.Name) and handed_an_optimizer(self.facts, record):
                # `model, stats = train(model, optim, loader, ...)` from the project's own module
                return record.node, f"`{_short(record.node)}` is handed the optimizer and named like a training loop"
        for scope in self.facts.raw.scopes:
            node = scope.node
            if scope.kind == "class" and isinstance(node, cst.ClassDef) and any(
                    code_text(base.value).endswith(_FRAMEWORK_EXPERIMENTS) for base in node.bases):
                return node, f"class {scope.name} is a training framework's experiment, known by its base class"
        return None


def handed_an_optimizer(facts, record) -> bool:
    """An argument of the call is an optimizer the file builds (`optim`, `optax.adamw(...)`)."""
    return any(facts.pipeline_for(arg.value, record.scope) is not None for arg in record.node.args)


def fed_made_up_data(facts, call: cst.Call) -> Optional[str]:
    """Why `call` (a training function handed the optimizer) trains on data made up
    once, with nothing beside it loading data; None when it may train on real data."""
    return _Reader(facts)._trainer_fed_noise(call)


def _test_functions(facts) -> list[Scope]:
    """The outermost `test*` functions (and methods of Test classes) of the file."""
    return [s for s in facts.raw.scopes if s.kind == "function" and _outermost_test(s) is s]


def unstepped_tests(facts) -> tuple[tuple[int, int], ...]:
    """Line ranges (first, last) of the test functions in which no optimizer takes a
    step: a defect rule has nothing to say there, the optimizer is built to look at."""
    tests = _test_functions(facts)
    if not tests:
        return ()
    stepping = set()
    for site in facts.update_sites:
        stepping.add(id(_outermost_test(site.record.scope)))
    for record, target in calls_of_local_functions(facts):
        if any(inside_scope(site.record.scope, target) for site in facts.update_sites):
            stepping.add(id(_outermost_test(record.scope)))
    out = []
    for scope in tests:
        if id(scope) in stepping:
            continue
        span = facts.source_positions.span(scope.node)
        out.append((span.line, span.end_line))
    return tuple(out)


def test_code(facts) -> tuple[tuple[int, int], ...]:
    """Line ranges (first, last) of the file's test code: the `test*` functions (and
    methods of Test classes), and the module-level functions that only they call (an
    `_overfit(model, batch)` helper of the tests). Advice about how to train has nothing
    to say there, whatever else the file does: a test is no training run."""
    tests = _test_functions(facts)
    if not tests:
        return ()
    callers: dict[int, list] = {}
    for record, target in calls_of_local_functions(facts):
        if target.parent is facts.raw.module_scope:
            callers.setdefault(id(target), []).append(record.scope)
    helpers = [
        scope for scope in facts.raw.functions.values()
        if scope.parent is facts.raw.module_scope and _outermost_test(scope) is None
        and callers.get(id(scope)) and all(_outermost_test(c) is not None for c in callers[id(scope)])
    ]
    out = []
    for scope in tests + helpers:
        span = facts.source_positions.span(scope.node)
        out.append((span.line, span.end_line))
    return tuple(out)


def _in_test(scope: Optional[Scope]) -> bool:
    """Inside a `test*` function, a Test class, or a class deriving from a TestCase."""
    if in_test_function(scope):
        return True
    while scope is not None:
        if scope.kind == "class" and isinstance(scope.node, cst.ClassDef) and any(
                spells_test_case(base.value) for base in scope.node.bases):
            return True
        scope = scope.parent
    return False


def _outermost_test(scope: Optional[Scope]) -> Optional[Scope]:
    """The outermost `test*` function (or method of a Test class) around a scope."""
    found = None
    while scope is not None:
        if scope.kind == "function" and in_test_function(scope):
            found = scope
        scope = scope.parent
    return found


def _named_like_a_step(call: cst.Call, scope: Scope) -> bool:
    """`train_step(...)`, `p_main_step_G(...)`, `opt.update(...)`, `trainer.step()`, or a
    call handed the optimizer state, outside evaluation code: what a step looks like,
    by its names alone."""
    func = call.func
    name = last_name(func)
    if _NOT_A_STEP.search(name) or _in_evaluation(scope) or isinstance(func, cst.Name) and name in _CONTAINERS:
        return False
    if name[:1].isupper():
        return False  # a class built (a TrainState handed opt_state) holds the state; it takes no step
    if isinstance(func, cst.Attribute) and name in ("train", "eval") and not call.args:
        return False  # `block.dropout.train()`: a switch into training mode (nnx, PyTorch), no step
    handed_state = any(isinstance(arg.value, cst.Name) and _OPT_STATE.search(arg.value.value) for arg in call.args)
    if isinstance(func, cst.Attribute) and name in ("update", "step", "apply"):
        return bool(_STEPPER.search(code_text(func.value).rsplit(".", 1)[-1])) or handed_state
    return bool(_STEP_NAME.search(name)) or handed_state


def _in_evaluation(scope: Optional[Scope]) -> bool:
    """Inside a function or class named for evaluation (`evaluate`, `Evaluator`), not
    for training too (`train_and_evaluate`)."""
    while scope is not None:
        if scope.kind in ("function", "class") and _NOT_A_STEP.search(scope.name) and "train" not in scope.name.lower():
            return True
        scope = scope.parent
    return False


def test_or_benchmark_path(path: Optional[str]) -> bool:
    """A file whose name or folder says it is a test or a benchmark: a model defined
    there says little about what a training run trains."""
    return is_test_file(path) or _bench_named(path)


def _bench_named(path: Optional[str]) -> bool:
    if not path or path.startswith("<"):
        return False
    pure = PurePath(path)
    return any(_BENCH_PART.search(part) for part in (*pure.parts[:-1], pure.stem))


def _iterated(it: cst.BaseExpression) -> cst.BaseExpression:
    """What a `for` iterates over, through `enumerate(...)`, `tqdm(...)`, `iter(...)`, `list(...)`."""
    while isinstance(it, cst.Call) and last_name(it.func) in ("enumerate", "tqdm", "iter", "list") and it.args:
        it = it.args[0].value
    return it


def _loads_data(record) -> bool:
    """The call is named like loading data (`load_dataset`, `tfds.load`); a function the
    file defines is judged by the calls in its body, not by its name."""
    return bool(_DATA_WORDS.search(last_name(record.node.func))) and not _local_def(record)


def _local_def(record) -> bool:
    """The call's callee is a plain name bound to a function this file defines."""
    func = record.node.func
    if not isinstance(func, cst.Name):
        return False
    _, bindings = lookup(func.value, record.scope)
    return bool(bindings) and all(b.kind == "def" for b in bindings)


def _short_range(node: cst.CSTNode, scope: Optional[Scope] = None) -> bool:
    """A `for` over `range(N)` with N at most a thousand: a literal, or, given the scope, a
    name bound once to one."""
    if not isinstance(node, cst.For) or not over_range(node.iter):
        return False
    bound = _range_bound(node.iter, scope)
    return bound is not None and bound <= _TOY_STEPS


def _reads_clock(record) -> bool:
    """`time.perf_counter()`, `time.time()`, `timeit(...)`: a read of the clock."""
    return last_name(record.node.func) in _TIMERS or code_text(record.node.func) == "time.time"


def _range_bound(expr: cst.BaseExpression, scope: Optional[Scope] = None) -> Optional[int]:
    """The stop of `range(...)` as a literal, or, given the scope, a name bound once to one
    (`train_steps = 50`)."""
    while isinstance(expr, cst.Call) and last_name(expr.func) not in ("range", "trange") and expr.args:
        expr = expr.args[0].value
    if not isinstance(expr, cst.Call):
        return None
    positional = [a for a in expr.args if a.keyword is None]
    if not positional:
        return None
    stop = positional[-1 if len(positional) <= 2 else 1].value
    if isinstance(stop, cst.Integer):
        return int(stop.evaluated_value)
    if scope is not None and isinstance(stop, cst.Name):
        value = value_of(stop, scope)
        return value if isinstance(value, int) and not isinstance(value, bool) else None
    return None


def _short(node: cst.CSTNode) -> str:
    text = code_text(node.func) if isinstance(node, cst.Call) else code_text(node)
    return text if len(text) <= 40 else text[:37] + "..."
