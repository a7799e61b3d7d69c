"""Weight-decay mask extraction and rules beyond the fixtures: what the compiler
reads and refuses, the project-level scan check, the fix that adds `decay_mask` once,
and the lint path staying free of jax."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import libcst as cst
import pytest

from optax_lint.engine import lint as engine
from optax_lint.facts.masks import expr as mx
from optax_lint.facts.module import ModuleFacts

ROOT = Path(__file__).resolve().parent.parent


def _facts(text: str) -> ModuleFacts:
    text = textwrap.dedent(text)
    return ModuleFacts(cst.parse_module(text), "train.py", text=text)


def _codes(text: str, codes: set[str], path: str = "train.py", root=None) -> list[tuple[int, str]]:
    run = engine.lint_text(textwrap.dedent(text), path, codes, root=root)
    assert run.internal_errors == 0
    return [(f.span.line, f.code) for f in run.findings]


def _only_site(text: str):
    facts = _facts(text)
    (site,) = facts.mask_sites
    return facts, site


def test_helper_closures_are_inlined() -> None:
    facts, site = _only_site(
        """
        import optax
        from flax import traverse_util
        decay_path = lambda p: not any(x in p for x in ["bias", "LayerNorm.weight"])
        def traverse(fn):
            def mask(data):
                flat = traverse_util.flatten_dict(data)
                return traverse_util.unflatten_dict({k: fn(k, v) for k, v in flat.items()})
            return mask
        tx = optax.masked(optax.adamw(1e-3, weight_decay=0.1), mask=traverse(lambda path, _: decay_path(path)))
        """
    )
    fn = site.function(facts)
    assert fn is not None and fn.path_kind == mx.NAMES and fn.is_callable
    assert fn.value(("Dense_0", "kernel"), (8, 8)) is True
    assert fn.value(("Dense_0", "bias"), (8,)) is False


@pytest.mark.parametrize(
    "mask, reason",
    [
        ("make_mask(config)", "call to mylib.make_mask"),
        ("lambda p: jax.tree.map(lambda x: x.ndim > cfg.min_ndim, p)", "'cfg'"),
        ("lambda p: jax.tree.map(lambda x, y: x.ndim > 1, p, p)", "over several trees"),
        ("lambda p: traverse_util.path_aware_map(lambda path, _: re.match('bias', path[-1]), p)", "call to re.match"),
    ],
)
def test_masks_outside_the_language_are_not_interpretable(mask: str, reason: str) -> None:
    facts, site = _only_site(
        f"""
        import re
        import jax
        import optax
        from flax import traverse_util
        from mylib import make_mask
        tx = optax.adamw(1e-3, weight_decay=0.1, mask={mask})
        """
    )
    assert site.function(facts) is None
    assert reason in site.why_not()


def test_evaluator_refuses_what_python_would_raise_on() -> None:
    env = {"path": ("a", "bias"), "leaf": mx.Leaf((8,))}
    with pytest.raises(mx.EvalError):
        mx.evaluate(["method", ["path"], "endswith", [["const", "bias"]]], env)  # tuple.endswith
    with pytest.raises(mx.EvalError):
        mx.evaluate(["attr", ["path"], "__class__"], env)
    assert mx.evaluate(["cmp", "in", ["const", "bias"], ["path"]], env) is True


def test_model_in_an_imported_project_module_counts_for_scanned_layers(tmp_path: Path) -> None:
    (tmp_path / "models.py").write_text(textwrap.dedent(
        """
        import flax.linen as nn

        class Block(nn.Module):
            @nn.compact
            def __call__(self, x, _):
                return x + nn.Dense(x.shape[-1])(nn.LayerNorm()(x)), None

        Stack = nn.scan(Block, variable_axes={"params": 0}, split_rngs={"params": True}, length=12)
        """
    ))
    train = """
        import jax
        import optax
        from models import Stack
        tx = optax.adamw(6e-4, weight_decay=0.1, mask=lambda p: jax.tree.map(lambda x: x.ndim > 1, p))
        """
    (tmp_path / "train.py").write_text(textwrap.dedent(train))  # project reads start from a file on disk
    assert _codes(train, {"OPX110"}, str(tmp_path / "train.py"), root=str(tmp_path)) == [(5, "OPX110")]
    (tmp_path / "models.py").write_text("import flax.linen as nn\n")
    assert _codes(train, {"OPX110"}, str(tmp_path / "train.py"), root=str(tmp_path)) == []


def test_decay_mask_function_is_added_once_for_two_optimizers() -> None:
    text = textwrap.dedent(
        """\
        # optax-lint: context arch=transformer
        import optax
        from flax import traverse_util

        encoder_tx = optax.adamw(1e-4, weight_decay=0.1)
        decoder_tx = optax.adamw(3e-4, weight_decay=0.1)
        """
    )
    fixed = engine.fix_text(text, "train.py", {"OPX108"}, unsafe=True)
    out = fixed.text
    assert out.count("def decay_mask(params):") == 1
    assert out.count("mask=decay_mask") == 2
    assert "from flax import traverse_util\n" in out and out.count("import traverse_util") == 1
    assert _codes(out, {"OPX108"}) == []


def test_opx104_leaves_a_negative_alias_rate_to_opx113() -> None:
    text = """
        import optax
        schedule = optax.cosine_decay_schedule(-1e-3, 1000)
        tx = optax.adam(schedule)
        """
    assert _codes(text, {"OPX104", "OPX113"}) == [(4, "OPX113")]


def test_lint_path_imports_no_jax() -> None:
    fixture = ROOT / "fixtures" / "OPX109" / "bad_hf_glue_multi_optimizer.py"
    code = (
        "import sys; from optax_lint.engine import lint as engine; "
        f"engine.lint_text(open({str(fixture)!r}).read(), 'x.py', {{'OPX108','OPX109','OPX110','OPX111','OPX112','OPX113'}}); "
        "print(sorted(m for m in ('jax', 'optax', 'flax') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.stdout.strip() == "[]", out.stderr


def test_opx108_leaves_a_decay_below_the_recommended_range_alone() -> None:
    head = "# optax-lint: context arch=transformer\nimport optax\n"
    # adamw's own default (1e-4, never chosen) and a small explicit decay count as none
    assert _codes(head + "tx = optax.adamw(3e-4)\n", {"OPX108"}) == []
    assert _codes(head + "tx = optax.adamw(3e-4, weight_decay=1e-3)\n", {"OPX108"}) == []
    assert _codes(head + "WD = 1e-3\ntx = optax.adamw(3e-4, weight_decay=WD)\n", {"OPX108"}) == []
    # the low end of the recommended range, and lion's own default 1e-3 is below it too
    assert _codes(head + "tx = optax.adamw(3e-4, weight_decay=0.01)\n", {"OPX108"}) == [(3, "OPX108")]
    assert _codes(head + "tx = optax.lion(3e-5)\n", {"OPX108"}) == []
    # a decay known only at run time is still judged
    assert _codes(head + "import sys\ntx = optax.adamw(3e-4, weight_decay=float(sys.argv[1]))\n", {"OPX108"}) == [(4, "OPX108")]


def _messages(text: str, codes: set[str]) -> list[tuple[int, str]]:
    run = engine.lint_text(textwrap.dedent(text), "train.py", codes)
    assert run.internal_errors == 0
    return [(f.span.line, f.message) for f in run.findings]


GRID = """
    import flax.linen as nn
    import optax
    from flax import traverse_util


    class Grid(nn.Module):
        @nn.compact
        def __call__(self, x):
            return x * self.param("grid", nn.initializers.zeros, (8,))
    """


def test_opx109_says_a_negative_comparison_is_true_for_every_parameter() -> None:
    # `!=` on a name no parameter has holds everywhere: "never true" would be wrong.
    text = GRID + """
    tx = optax.masked(optax.adam(1e-3), lambda p: traverse_util.path_aware_map(lambda path, _: path[-1] != "offset", p))
    """
    (only,) = _messages(text, {"OPX109"})
    assert only[0] == 12
    assert 'path[-1] != "offset" in this mask is true for every parameter: the parameters of Grid are named grid, and none of them matches' in only[1]


def test_opx109_layers_from_a_local_partial_leave_the_names_open() -> None:
    # A second root whose Dense layers come through functools.partial: its names are
    # unknown, so Grid's complete tree is not the file's, and a custom name may exist.
    text = GRID + """
    import functools


    class Field(nn.Module):
        @nn.compact
        def __call__(self, x):
            dense = functools.partial(nn.Dense, use_bias=False)
            return dense(1)(x)


    tx = optax.masked(optax.adam(1e-3), lambda p: traverse_util.path_aware_map(lambda path, _: path[-1] == "offset", p))
    """
    assert _messages(text, {"OPX109"}) == []
    # Without the second root, Grid's tree is exact and the name is impossible.
    alone = GRID + """
    tx = optax.masked(optax.adam(1e-3), lambda p: traverse_util.path_aware_map(lambda path, _: path[-1] == "offset", p))
    """
    (only,) = _messages(alone, {"OPX109"})
    assert "can never be true: the parameters of Grid are named grid" in only[1]


# A fine-tune's loop, after `tx` and `model` are built.
_TRAIN_LOOP = textwrap.dedent("""
    params = model.params
    opt_state = tx.init(params)
    for batch in load_batches():
        grads = jax.grad(loss)(params, batch)
        updates, opt_state = tx.update(grads, opt_state, params)
        params = optax.apply_updates(params, updates)
""")

_FINE_TUNE = textwrap.dedent("""
    import argparse
    import jax
    import optax
    from transformers import FlaxBertForSequenceClassification

    parser = argparse.ArgumentParser()
    parser.add_argument("--learning-rate", type=float, default={lr})
    args = parser.parse_args()
    model = FlaxBertForSequenceClassification.from_pretrained("bert-base-uncased")
    tx = optax.adamw(learning_rate=args.learning_rate, weight_decay=0.01)
""") + _TRAIN_LOOP


@pytest.mark.parametrize("lr, reported", [("2e-5", False), ("1e-4", False), ("3e-4", True)])
def test_opx108_with_no_run_length_weighs_one_step_of_decay(lr: str, reported: bool) -> None:
    """lr x wd at most 1e-6 per step (1e-4 x 0.01 included, despite its floating-point
    product 1.0000000000000002e-06) needs 50,000+ steps to shrink a scale by 5%."""
    codes = [code for _, code in _codes(_FINE_TUNE.format(lr=lr), {"OPX108"})]
    assert codes == (["OPX108"] if reported else [])


_TWO_BRANCHES = textwrap.dedent("""
    import os
    import jax
    import optax
    from transformers import FlaxBertForSequenceClassification

    WARMUP = int(os.environ.get("WARMUP", "0"))
    model = FlaxBertForSequenceClassification.from_pretrained("bert-base-uncased")
    if WARMUP > 0:
        lr = optax.linear_schedule(0.0, {warm}, WARMUP)
    else:
        lr = optax.constant_schedule({flat})
    tx = optax.adamw(learning_rate=lr, weight_decay=0.01)
""") + _TRAIN_LOOP


@pytest.mark.parametrize(
    "warm, flat, reported",
    [("1e-4", "2e-5", False), ("2e-5", "3e-4", True), ("3e-4", "1e-5", True), ("1e-4", "rate_from_elsewhere()", True)],
)
def test_opx108_rate_bound_in_branches_peaks_at_the_highest(warm: str, flat: str, reported: bool) -> None:
    """A rate bound in two branches is weighed at the higher branch's peak; a branch
    whose value is unknown leaves the peak unknown."""
    codes = [code for _, code in _codes(_TWO_BRANCHES.format(warm=warm, flat=flat), {"OPX108"})]
    assert codes == (["OPX108"] if reported else [])
