"""Property-based and mutation fuzzing: whatever the input, optax-lint reports findings
or one clean syntax error (OPX001) with a line and a column, and never raises.

- `hypothesmith.from_grammar()` / `from_node()` generate Python modules; a strategy
  splices optax chains, schedules, update calls and train loops into them (at module
  level and inside any indented block), so the rules, not just the parser, are fuzzed;
- a mutation fuzzer deletes, duplicates and swaps tokens of the fixtures, truncates
  them, and inserts stray brackets, quotes and tabs;
- fixes are fuzzed too: `fix_text(..., unsafe=True)` must keep a CPython-parseable
  file parseable and converge (fix(fix(x)) == fix(x));
- a multi-file CLI run over mutants checks that the other files are still linted.

Example counts are CI-sized (the suite takes well under a minute); set
OPTAX_LINT_FUZZ_EXAMPLES=N to run N examples per property (e.g. 2000 overnight).
"""

from __future__ import annotations

import ast
import io
import os
import re
import tokenize
import warnings
from functools import lru_cache
from pathlib import Path

import libcst as cst
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optax_lint.cli import main
from optax_lint.core import meta
from optax_lint.core.catalogue import load_catalogue
from optax_lint.engine import lint as engine
from optax_lint.rules import registry

# Its module fixtures are costly: one xdist worker computes them once (--dist loadgroup).
pytestmark = pytest.mark.xdist_group("fuzz")

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = sorted(p for p in (ROOT / "fixtures").glob("OPX*/*.py") if not p.name.endswith(".fixed.py"))
CODES = set(load_catalogue()) | set(registry.load_all())
_SCALE = int(os.environ.get("OPTAX_LINT_FUZZ_EXAMPLES", "0") or 0)


def examples(default: int) -> int:
    return _SCALE or default


def fuzz_settings(default: int):
    return settings(
        max_examples=examples(default),
        deadline=None,
        suppress_health_check=list(HealthCheck),
        print_blob=True,
    )


# --- the property ------------------------------------------------------------------


def cpython_parses(text: str) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(text)
        return True
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False


def libcst_parses(text: str) -> bool:
    try:
        cst.parse_module(text)
        return True
    except Exception:
        return False


def _allowed_internal(finding) -> bool:
    return "too deeply nested" in finding.message


def check_findings(text: str, findings) -> None:
    n_lines = text.count("\n") + text.count("\r") - text.count("\r\n") + 1
    for f in findings:
        assert f.span.line >= 1 and f.span.column >= 1, (f.code, f.span, f.message)
        assert f.span.line <= n_lines + 1, (f.code, f.span, n_lines)
        if f.code == meta.INTERNAL_ERROR:
            assert _allowed_internal(f), f.message
    if not cpython_parses(text) and not libcst_parses(text):
        assert [f.code for f in findings] == [meta.SYNTAX_ERROR], [(f.code, f.message) for f in findings]


def lint_and_check(text: str, path: str = "fuzz.py"):
    run = engine.lint_text(text, path, CODES)  # must not raise
    check_findings(text, run.findings)
    return run


def fix_and_check(text: str, path: str = "fuzz.py") -> None:
    fixed = engine.fix_text(text, path, CODES, unsafe=True)
    check_findings(fixed.text, fixed.findings)
    if fixed.text == text:
        return
    if cpython_parses(text):
        assert cpython_parses(fixed.text), "a fix broke a file CPython could parse"
        if _compiles(text):
            assert _compiles(fixed.text), "a fix broke a file that compiled"
    assert libcst_parses(fixed.text)
    again = engine.fix_text(fixed.text, path, CODES, unsafe=True)
    assert again.text == fixed.text, "fixes did not converge: fix(fix(x)) != fix(x)"


def _compiles(text: str) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(text, "x.py", "exec", dont_inherit=True)
        return True
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False


# --- optax snippets ------------------------------------------------------------------

_NUMBERS = st.one_of(
    st.sampled_from(["1e-3", "3e-4", "0.1", "0.0", "1.0", "-1.0", "0", "1_000", "10_000", "1e9", "lr", "cfg.lr",
                     "config.learning_rate", "None", "'0.1'", "steps // 10", "-lr", "float('inf')", "2 ** -10",
                     "learning_rate * 0.1", "schedule", "args.steps"]),
    st.floats(allow_nan=False, allow_infinity=False, width=32).map(repr),
    st.integers(-(10**6), 10**9).map(str),
)
_NAMES = st.sampled_from(["tx", "optimizer", "base", "inner", "opt", "self.tx", "state.tx", "make_tx()", "extra"])


def _call(name: str, positional: list[str], keywords: dict[str, str]) -> str:
    args = positional + [f"{k}={v}" for k, v in keywords.items()]
    return f"{name}({', '.join(args)})"


@st.composite
def optax_call(draw, names: list[tuple[str, list[str]]]):
    """`optax.NAME(...)` with some of its real parameters, positional or by keyword."""
    name, params = draw(st.sampled_from(names))
    chosen = draw(st.lists(st.sampled_from(params), unique=True, max_size=len(params))) if params else []
    values = [draw(_NUMBERS) for _ in chosen]
    cut = draw(st.integers(0, len(chosen)))
    prefix = draw(st.sampled_from(["optax.", "optax.", "optax.", "ox.", "optax.contrib.", ""]))
    return _call(prefix + name, values[:cut], dict(zip(chosen[cut:], values[cut:])))


SCHEDULES = [
    ("warmup_cosine_decay_schedule", ["init_value", "peak_value", "warmup_steps", "decay_steps", "end_value", "exponent"]),
    ("linear_schedule", ["init_value", "end_value", "transition_steps", "transition_begin"]),
    ("cosine_decay_schedule", ["init_value", "decay_steps", "alpha", "exponent"]),
    ("exponential_decay", ["init_value", "transition_steps", "decay_rate", "transition_begin", "staircase", "end_value"]),
    ("constant_schedule", ["value"]),
    ("warmup_constant_schedule", ["init_value", "peak_value", "warmup_steps"]),
    ("piecewise_constant_schedule", ["init_value", "boundaries_and_scales"]),
    ("polynomial_schedule", ["init_value", "end_value", "power", "transition_steps"]),
    ("schedules.warmup_cosine_decay_schedule", ["init_value", "peak_value", "warmup_steps", "decay_steps"]),
]
TRANSFORMS = [
    ("adam", ["learning_rate", "b1", "b2", "eps"]),
    ("adamw", ["learning_rate", "b1", "b2", "eps", "weight_decay", "mask"]),
    ("sgd", ["learning_rate", "momentum", "nesterov"]),
    ("lion", ["learning_rate", "b1", "b2", "weight_decay"]),
    ("lamb", ["learning_rate", "weight_decay"]),
    ("adafactor", ["learning_rate", "weight_decay_rate"]),
    ("rmsprop", ["learning_rate", "decay", "eps"]),
    ("clip_by_global_norm", ["max_norm"]),
    ("clip", ["max_delta"]),
    ("add_decayed_weights", ["weight_decay", "mask"]),
    ("scale_by_adam", ["b1", "b2", "eps"]),
    ("scale", ["step_size"]),
    ("scale_by_learning_rate", ["learning_rate", "flip_sign"]),
    ("scale_by_schedule", ["step_size_fn"]),
    ("trace", ["decay", "nesterov"]),
    ("zero_nans", []),
    ("identity", []),
    ("ema", ["decay"]),
]


def _transforms(inner):
    return st.one_of(
        st.builds(lambda ts, comma: f"optax.chain({', '.join(ts)}{',' if comma and ts else ''})",
                  st.lists(inner, max_size=5), st.booleans()),
        st.builds(lambda t, m: f"optax.masked({t}, {m})", inner, st.sampled_from(["mask", "lambda p: p", "mask_fn", "{'w': True}"])),
        st.builds(lambda t, k: f"optax.MultiSteps({t}, every_k_schedule={k})", inner, _NUMBERS),
        st.builds(lambda t, n: f"optax.apply_if_finite({t}, {n})", inner, _NUMBERS),
        st.builds(lambda n, ks: f"optax.inject_hyperparams(optax.{n})({', '.join(ks)})",
                  st.sampled_from(["adam", "adamw", "sgd"]),
                  st.lists(st.builds(lambda k, v: f"{k}={v}", st.sampled_from(["learning_rate", "weight_decay", "b1"]), _NUMBERS), max_size=3)),
        st.builds(lambda a, b: f"optax.multi_transform({{'a': {a}, 'b': {b}}}, labels)", inner, inner),
    )


SCHEDULE = optax_call(SCHEDULES)
LEAF = st.one_of(
    optax_call(TRANSFORMS),
    _NAMES,
    st.sampled_from(["my_transform()", "*extra", "**kw", "optax.scale(-1.0)", "optax.scale(1.0)",
                     "__import__('os').system('touch PWNED')"]),
    st.builds(lambda s: f"optax.adamw(learning_rate={s})", SCHEDULE),
    st.builds(lambda s: f"optax.scale_by_learning_rate({s})", SCHEDULE),
)
# Built once (strategies are lazy, but building them per draw is slow): nesting depth <= 2.
TRANSFORM = st.one_of(LEAF, _transforms(st.one_of(LEAF, _transforms(LEAF))))


def _loop(n: str) -> str:
    return (f"for step in range({n}):\n"
            "    loss, grads = jax.value_and_grad(loss_fn)(params)\n"
            "    updates, opt_state = tx.update(grads, opt_state, params)\n"
            "    params = optax.apply_updates(params, updates)\n")


_STEP = ("@jax.jit\ndef train_step(state, batch):\n"
         "    grads = jax.grad(loss_fn)(state.params, batch)\n"
         "    grads = jax.lax.pmean(grads, axis_name='batch')\n"
         "    return state.apply_gradients(grads=grads)\n")
_TARGETS = st.sampled_from(["tx", "optimizer", "self.tx", "opt"])
_HYPER = st.sampled_from(["lr", "learning_rate", "steps", "num_train_steps", "batch_size", "warmup_steps"])
_SAVED = st.sampled_from(["state", "params", "state.params", "opt_state"])
_UPDATE_TAIL = st.sampled_from(["", ", params", ", params=params"])

OPTAX_STATEMENT = st.one_of(
    st.builds(lambda n, t: f"{n} = {t}\n", _TARGETS, TRANSFORM),
    st.builds(lambda n, t: f"{n} = {t},\n", _TARGETS, TRANSFORM),
    st.builds(lambda t: f"tx = {t}  # noqa: OPX101\n", TRANSFORM),
    st.builds(lambda t: f"tx = {t}  # optax-lint: noqa\n", TRANSFORM),
    st.builds(lambda s: f"schedule = {s}\n", SCHEDULE),
    st.builds(lambda a, b, t: f"def make_optimizer(lr={a}, steps={b}):\n    return {t}\n", _NUMBERS, _NUMBERS, TRANSFORM),
    st.builds(lambda t, s: f"def make_optimizer():\n    return {t}, {s}\n", TRANSFORM, SCHEDULE),
    st.builds(lambda n, tail: f"updates, opt_state = {n}.update(grads, opt_state{tail})\n", _NAMES, _UPDATE_TAIL),
    st.just("params = optax.apply_updates(params, updates)\n"),
    st.just("state = state.apply_gradients(grads=grads)\n"),
    st.builds(lambda n: f"opt_state = {n}.init(params)\n", _NAMES),
    st.builds(_loop, _NUMBERS),
    st.just(_STEP),
    st.builds(lambda h, v: f"{h} = {v}\n", _HYPER, _NUMBERS),
    st.builds(lambda t: f"state = TrainState.create(apply_fn=model.apply, params=params, tx={t})\n", TRANSFORM),
    st.builds(lambda v: f"checkpoints.save_checkpoint(ckpt_dir, {v}, step)\n", _SAVED),
)


class _Splice(cst.CSTTransformer):
    """Insert statements into the n-th indented block (n == -1: the module body)."""

    def __init__(self, target: int, fraction: float, statements: list[cst.BaseStatement]) -> None:
        self.target, self.fraction, self.statements, self.seen = target, fraction, statements, -1

    def _insert(self, body):
        body = list(body)
        at = int(self.fraction * len(body))
        return body[:at] + self.statements + body[at:]

    def leave_IndentedBlock(self, original, updated):
        self.seen += 1
        if self.seen == self.target:
            return updated.with_changes(body=self._insert(updated.body))
        return updated

    def leave_Module(self, original, updated):
        if self.target == -1:
            return updated.with_changes(body=self._insert(updated.body))
        return updated


HEADER = "import jax\nimport optax\nimport optax as ox\nfrom flax.training import checkpoints\nfrom flax.training.train_state import TrainState\n"


# Built once: each from_grammar() call compiles a Lark parser (~10 s).
def _hypothesmith():
    # Imported when a fuzz test first draws, not at collection: its import builds the
    # Python grammar (seconds), which every xdist worker would otherwise pay.
    import hypothesmith

    return hypothesmith


GRAMMAR = st.deferred(lambda: _hypothesmith().from_grammar())


@st.composite
def spliced_module(draw, base=GRAMMAR) -> str:
    source = draw(base)
    try:
        module = cst.parse_module(source)
    except Exception:
        module = cst.parse_module("")
    statements = []
    for text in draw(st.lists(OPTAX_STATEMENT, min_size=1, max_size=5)):
        try:
            statements.append(cst.parse_statement(text, config=module.config_for_parsing))
        except Exception:
            continue
    blocks = sum(1 for _ in _iter_blocks(module))
    target = draw(st.integers(-1, blocks - 1)) if blocks else -1
    fraction = draw(st.floats(0, 1, exclude_max=True))
    try:
        spliced = module.visit(_Splice(target, fraction, statements))
        code = spliced.code
    except Exception:  # e.g. a block libcst cannot re-render with our statements
        code = module.code + "".join(cst.Module([]).code_for_node(s) for s in statements)
    return HEADER + code


def _iter_blocks(module: cst.Module):
    stack = [module]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.IndentedBlock):
            yield node
        stack.extend(node.children)


# --- properties over generated modules -------------------------------------------------


@fuzz_settings(25)
@given(GRAMMAR)
def test_generated_modules_never_crash(source: str) -> None:
    lint_and_check(source)
    lint_and_check("import optax\n" + source)  # the full rule path, not only the syntax check


@fuzz_settings(4)
@given(st.deferred(lambda: _hypothesmith().from_node()))
def test_generated_cst_modules_never_crash(source: str) -> None:
    lint_and_check("import optax\n" + source)


@fuzz_settings(60)
@given(spliced_module())
def test_spliced_optax_modules_lint_and_fix_safely(source: str) -> None:
    lint_and_check(source)
    fix_and_check(source)


@fuzz_settings(40)
@given(st.lists(OPTAX_STATEMENT, min_size=1, max_size=12))
def test_training_scripts_made_of_optax_statements(statements: list[str]) -> None:
    source = HEADER + "".join(statements)
    lint_and_check(source)
    fix_and_check(source)


# --- the mutation fuzzer ------------------------------------------------------------------


@lru_cache(maxsize=None)
def _fixture(path: Path) -> tuple[str, tuple[tuple[int, int], ...]]:
    text = path.read_text(encoding="utf-8")
    starts = [0]
    for line in text.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    spans = []
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type in (tokenize.ENDMARKER, tokenize.DEDENT) or tok.start == tok.end:
            continue
        start = starts[tok.start[0] - 1] + tok.start[1]
        end = starts[tok.end[0] - 1] + tok.end[1]
        spans.append((start, end))
    return text, tuple(spans)


_STRAY = ["(", ")", "[", "]", "{", "}", ":", ",", "=", "'", '"', '"""', "\\", "\t", "    ", "\n", "#", "\x0c",
          "lambda", "optax.chain(", "**", "*", "@", "\r", "\u00e9", "\ufeff", "\x00", "if", "else", "yield"]


@st.composite
def mutant(draw, fixtures=tuple(FIXTURES)) -> tuple[str, str]:
    path = draw(st.sampled_from(fixtures))
    text, spans = _fixture(path)
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(["delete", "duplicate", "swap", "truncate", "stray", "drop_line", "dup_line"]))
        if op in ("delete", "duplicate", "swap") and spans:
            i = draw(st.integers(0, len(spans) - 1))
            a, b = spans[i]
            if b > len(text):
                continue
            if op == "delete":
                text = text[:a] + text[b:]
            elif op == "duplicate":
                text = text[:b] + " " + text[a:b] + text[b:]
            elif i + 1 < len(spans) and spans[i + 1][1] <= len(text):
                c, d = spans[i + 1]
                text = text[:a] + text[c:d] + text[b:c] + text[a:b] + text[d:]
        elif op == "truncate":
            text = text[: draw(st.integers(0, len(text)))]
        elif op == "stray":
            at = draw(st.integers(0, len(text)))
            text = text[:at] + draw(st.sampled_from(_STRAY)) + text[at:]
        else:
            lines = text.splitlines(keepends=True)
            if lines:
                k = draw(st.integers(0, len(lines) - 1))
                lines[k:k + 1] = [] if op == "drop_line" else [lines[k], lines[k]]
                text = "".join(lines)
        # token offsets drift after an edit: later edits are approximate, which is fine
    return f"{path.parent.name}/{path.name}", text


@fuzz_settings(150)
@given(mutant(), st.booleans())
def test_mutated_fixtures_give_findings_or_one_syntax_error(case, also_fix: bool) -> None:
    name, text = case
    run = lint_and_check(text, name)
    if also_fix and run.module is not None:
        fix_and_check(text, name)


COMPANION = "import optax\n\ntx = optax.chain(optax.adamw(1e-3), optax.clip_by_global_norm(1.0))\n"
_LINE = re.compile(r"^(?P<path>[^:]+):(?P<line>\d+):(?P<col>\d+): (?P<code>OPX\d{3}) ")


@fuzz_settings(4)
@given(st.lists(mutant(), min_size=4, max_size=8))
def test_a_run_over_mutants_still_lints_the_other_files(tmp_path_factory, cases) -> None:
    folder = tmp_path_factory.mktemp("mutants")
    (folder / "zz_companion.py").write_text(COMPANION)
    broken = set()
    for i, (_, text) in enumerate(cases):
        name = f"m{i:02d}.py"
        (folder / name).write_bytes(text.encode("utf-8", "surrogatepass"))
        if "\x00" in text or (not cpython_parses(text) and not libcst_parses(text)):
            broken.add(name)
    old = os.getcwd()
    os.chdir(folder)
    try:
        result = CliRunner().invoke(main, ["--output-format", "concise", "-j", "1", "."], catch_exceptions=False)
    finally:
        os.chdir(old)
    assert "Traceback" not in result.output
    rows = [m.groupdict() for m in map(_LINE.match, result.output.splitlines()) if m]
    assert {"path": "zz_companion.py", "line": "3", "col": "37", "code": "OPX101"} in rows, result.output
    for name in broken:
        mine = [r for r in rows if r["path"] == name]
        assert [r["code"] for r in mine] == ["OPX001"], (name, mine)
        assert int(mine[0]["line"]) >= 1 and int(mine[0]["col"]) >= 1
    internal = [r for r in rows if r["code"] == "OPX900"]
    assert result.exit_code == (2 if internal else 1), result.output


# --- fixed regressions the fuzzers found ------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "import optax\nx = " + "(" * 300 + ")" * 300 + "\n",  # beyond CPython's limit: libcst never runs
        "import optax\nif True:\n\tx = 1\n        y = 2\n",  # TabError: CPython's position, not libcst's 1:1
        "import optax\nx = '\\N{NOT A NAME}'\n",  # libcst accepts, CPython refuses: linted, no crash
        "import optax\nf = " + "lambda: " * 400 + "0\n",  # nested scopes beyond the walker: OPX900, no crash
        "import optax\ntx = optax.chain(\n",  # truncated
        "\ufeffimport optax\n",  # a BOM character inside the text (read_source strips real BOMs)
    ],
)
def test_regressions(text: str) -> None:
    lint_and_check(text)
