"""The purpose fact (facts/context/purpose.py): what the code an optimizer sits in is
for, with its evidence, and how the engine uses it (engine/filters.py)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import libcst as cst
import pytest

from optax_lint.core.catalogue import load_catalogue
from optax_lint.core.diagnostics import Severity
from optax_lint.engine import lint as engine
from optax_lint.facts.context import purpose as kinds
from optax_lint.facts.module import ModuleFacts

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def purpose_of(src: str, path: str = "train.py"):
    text = textwrap.dedent(src)
    return ModuleFacts(cst.parse_module(text), path, text=text).purpose


def lint(src: str, path: str, codes: set[str]):
    return engine.lint_text(textwrap.dedent(src), path, codes).findings


@pytest.mark.parametrize(
    "fixture, kind, weak",
    [
        ("OPX104/good_nnx_state_layout_test.py", kinds.TEST, False),
        ("OPX201/good_step_timing_loop.py", kinds.BENCHMARK, False),
        ("OPX201/good_toy_tiny_transformer_demo.py", kinds.TOY, False),
        ("OPX201/good_parallelism_demo_on_one_random_batch.py", kinds.TOY, False),
        ("OPX201/good_mock_run_on_random_prompts.py", kinds.TOY, False),
        ("OPX108/good_optimizer_factory.py", kinds.BUILDING_BLOCK, False),
        ("OPX201/good_optimizer_sweep_checks.py", kinds.TEST, False),
        ("OPX201/bad_flax_lm_bare_adamw.py", kinds.TRAINING_RUN, False),
        ("OPX201/bad_bench_utils_real_training.py", kinds.TRAINING_RUN, True),
        ("OPX201/bad_imported_step_by_name.py", kinds.TRAINING_RUN, True),
    ],
)
def test_purpose_of_fixtures(fixture: str, kind: str, weak: bool) -> None:
    path = FIXTURES / fixture
    got = purpose_of(path.read_text(encoding="utf-8"), str(path))
    assert (got.kind, got.weak) == (kind, weak), got.describe()
    assert got.trains == (kind == kinds.TRAINING_RUN)


TRAIN = textwrap.dedent("""
    import jax
    import optax

    tx = optax.adam(1e-3)
    opt_state = tx.init(params)

    def step(params, opt_state, batch):
        grads = jax.grad(loss)(params, batch)
        updates, opt_state = tx.update(grads, opt_state)
        return optax.apply_updates(params, updates), opt_state
""")


def test_a_loop_around_a_local_step_is_strong_evidence_with_its_place() -> None:
    got = purpose_of(TRAIN + "\nfor batch in loader:\n    params, opt_state = step(params, opt_state, batch)\n")
    assert got.trains and not got.weak
    assert got.location == "train.py:14"
    assert "a loop steps the optimizer (`step`)" in got.describe()


def test_a_scan_whose_body_steps_is_a_training_run() -> None:
    src = TRAIN + "\ndef body(carry, batch):\n    return step(*carry, batch), None\n\nfinal, _ = jax.lax.scan(body, (params, opt_state), batches)\n"
    got = purpose_of(src)
    assert got.trains and not got.weak and "`scan` steps the optimizer in `body`" in got.evidence


def test_a_trainer_known_by_name_is_a_weak_training_run() -> None:
    got = purpose_of("import optax\ntx = optax.adam(1e-3)\ntrainer = Trainer(model, tx)\ntrainer.fit(data)\n")
    assert got.trains and got.weak


def test_a_checkpoint_dict_of_the_state_is_not_the_step() -> None:
    """`dict(opt_state=opt_state)` for a save comes first in the loop; the step known by
    name is the call whose result rebinds the state, and the evidence names it."""
    src = """
    import optax
    from utils import update_parameters, save
    tx = optax.adam(1e-4)
    for step in range(1000):
        save(step, items=dict(params=params, opt_state=opt_state))
        params, opt_state, loss = update_parameters(params=params, opt_state=opt_state, batch=step)
    """
    got = purpose_of(src)
    assert got.trains and got.weak
    assert "`update_parameters`" in got.evidence and "`dict`" not in got.evidence


def test_no_loop_no_training_run() -> None:
    got = purpose_of(TRAIN)
    assert got.kind == kinds.NOT_STEPPED and not got.trains


def test_a_bench_folder_without_a_training_loop_is_a_benchmark() -> None:
    assert purpose_of(TRAIN, "benchmarks/adam_step.py").kind == kinds.BENCHMARK
    assert purpose_of(TRAIN, "workbench/adam_step.py").kind == kinds.NOT_STEPPED  # `bench` as a word only


def test_declared_context_makes_a_training_run() -> None:
    text = "# optax-lint: context arch=transformer\n" + textwrap.dedent(TRAIN)
    got = ModuleFacts(cst.parse_module(text), "tests/test_x.py", text=text).purpose
    assert got.trains and got.declared


def test_weak_evidence_is_info_and_says_so() -> None:
    path = FIXTURES / "OPX201/bad_imported_step_by_name.py"
    findings = engine.lint_text(path.read_text(encoding="utf-8"), str(path), {"OPX201"}).findings
    assert [f.severity for f in findings] == [Severity.INFO]
    assert "advice only: whether this is a training run rests on a weak signal: a loop calls `train_step`" in findings[0].message
    assert "bad_imported_step_by_name.py:29" in findings[0].message


def trains_imported_model(model_import: str) -> str:
    """A training script whose model class comes from `model_import` (bound as Model)."""
    return textwrap.dedent("""
        import optax
        from flax.training import train_state
        {model_import}

        def train_step(state, batch):
            return state.apply_gradients(grads=grads_of(state, batch))

        def main(loader):
            model = Model()
            state = train_state.TrainState.create(apply_fn=model.apply, params=model.init(0), tx=optax.adam(1e-4))
            for batch in loader:
                state = train_step(state, batch)
    """).format(model_import=model_import)


def test_a_model_known_by_its_class_name_alone_makes_advice_info() -> None:
    (finding,) = lint(trains_imported_model("from mylab.models import GPT as Model"), "train.py", {"OPX201"})
    assert finding.severity is Severity.INFO
    assert "the model is known as a transformer by its class name alone" in finding.message


def test_defect_rules_are_silent_only_in_tests_that_never_step() -> None:
    src = """
        import optax
        from flax import nnx

        def test_layout():
            optimizer = nnx.Optimizer(Net(nnx.Rngs(0)), optax.scale_by_adam(), wrt=nnx.Param)
            assert optimizer.opt_state[0].mu

        def test_training_climbs():
            model = Net(nnx.Rngs(0))
            optimizer = nnx.Optimizer(model, optax.scale_by_adam(), wrt=nnx.Param)
            optimizer.update(model, nnx.grad(loss)(model))
    """
    lines = [f.span.line for f in lint(src, "opt_test.py", {"OPX104"})]
    assert lines == [11]


def test_catalogue_says_which_rules_speak_only_about_training_runs() -> None:
    catalogue = load_catalogue()
    training = {c for c, s in catalogue.items() if s.speaks_about == "training-runs"}
    assert "OPX108" in training and {c for c in catalogue if c.startswith("OPX2")} <= training
    assert {"OPX101", "OPX104", "OPX305", "OPX306", "OPX502"}.isdisjoint(training)
    assert catalogue["OPX701"].speaks_about == "any-code"


def test_a_model_defined_in_a_benchmark_makes_advice_info(tmp_path) -> None:
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "benchmarks" / "__init__.py").write_text("")
    (tmp_path / "benchmarks" / "models.py").write_text(textwrap.dedent("""
        import flax.linen as nn

        class Tiny(nn.Module):
            @nn.compact
            def __call__(self, x):
                for _ in range(4):
                    x = x + nn.SelfAttention(num_heads=2)(x)
                return x
    """))
    src = trains_imported_model("from benchmarks.models import Tiny as Model")
    path = tmp_path / "train.py"
    path.write_text(src)
    (finding,) = engine.lint_text(src, str(path), {"OPX201"}, root=str(tmp_path)).findings
    assert finding.severity is Severity.INFO
    assert "the model is defined in a test or benchmark (benchmarks/models.py:" in finding.message


ONE_BATCH = TRAIN + textwrap.dedent("""
    import numpy as np

    x = jax.random.normal(jax.random.PRNGKey(0), (256, 32))
    batch = (x, x.sum(axis=1))
""")


@pytest.mark.parametrize(
    "loop, kind",
    [
        # the same random batch every step, a few hundred times: a walkthrough
        ("for _ in range(300):\n    params, opt_state = step(params, opt_state, batch)\n", kinds.TOY),
        # a fresh random batch drawn inside the loop: synthetic data, but a run
        ("for i in range(300):\n    batch = (jax.random.normal(jax.random.PRNGKey(i), (256, 32)), 0)\n"
         "    params, opt_state = step(params, opt_state, batch)\n", kinds.TRAINING_RUN),
        # the same batch for longer than a demo runs
        ("for _ in range(5000):\n    params, opt_state = step(params, opt_state, batch)\n", kinds.TRAINING_RUN),
        # a loop bound that is not a literal
        ("for _ in range(num_steps):\n    params, opt_state = step(params, opt_state, batch)\n", kinds.TRAINING_RUN),
    ],
)
def test_one_random_batch_repeated_is_a_demo_only_when_short_and_fixed(loop: str, kind: str) -> None:
    assert purpose_of(ONE_BATCH + loop).kind == kind


def test_a_fixed_batch_of_loaded_data_is_full_batch_training() -> None:
    src = TRAIN + "\nX, y = np.load('data.npz').values()\nbatch = (X, y)\nfor _ in range(300):\n    params, opt_state = step(params, opt_state, batch)\n"
    assert purpose_of(src).kind == kinds.TRAINING_RUN


NOISE = TRAIN + textwrap.dedent("""
    n, bs = 512, 32
    inputs = jax.random.randint(jax.random.PRNGKey(0), (n, 16), 0, 100)
    labels = jax.random.randint(jax.random.PRNGKey(1), (n,), 0, 2)
""")


@pytest.mark.parametrize(
    "loop, kind",
    [
        # inputs and labels both drawn once, sliced and placed each step, however long: a walkthrough
        ("for epoch in range(num_epochs):\n    for i in range(0, n, bs):\n"
         "        batch = {'x': inputs[i:i + bs], 'y': labels[i:i + bs]}\n"
         "        batch = jax.tree.map(lambda a: jax.device_put(a, sharding), batch)\n"
         "        params, opt_state = step(params, opt_state, batch)\n", kinds.TOY),
        # labels computed from the inputs: a synthetic task with a rule to learn
        ("targets = inputs.sum(axis=1) % 2\nfor i in range(0, n, bs):\n"
         "    batch = (inputs[i:i + bs], targets[i:i + bs])\n    params, opt_state = step(params, opt_state, batch)\n",
         kinds.TRAINING_RUN),
        # fresh noise drawn at every step, beside the drawn arrays: a diffusion-like step
        ("for i in range(0, n, bs):\n    noise = jax.random.normal(jax.random.PRNGKey(i), (bs, 16))\n"
         "    batch = (inputs[i:i + bs] + noise, labels[i:i + bs])\n    params, opt_state = step(params, opt_state, batch)\n",
         kinds.TRAINING_RUN),
        # a batch from a helper the file defines: what it returns is not known to be noise
        ("for i in range(0, n, bs):\n    batch = get_batch(i)\n    params, opt_state = step(params, opt_state, batch)\n",
         kinds.TRAINING_RUN),
    ],
)
def test_training_on_noise_drawn_once_is_a_walkthrough(loop: str, kind: str) -> None:
    assert purpose_of(NOISE + loop).kind == kind


def test_a_noise_walkthrough_in_a_file_that_loads_data_is_a_run() -> None:
    loop = ("ds = tfds.load('imdb_reviews')\nfor i in range(0, n, bs):\n"
            "    batch = (inputs[i:i + bs], labels[i:i + bs])\n    params, opt_state = step(params, opt_state, batch)\n")
    assert purpose_of(NOISE + loop).kind == kinds.TRAINING_RUN


WRITTEN = TRAIN + textwrap.dedent('''
    TEXT = """
    Shall I compare thee to a summer's day?
    Thou art more lovely and more temperate:
    Rough winds do shake the darling buds of May,
    """
''')


@pytest.mark.parametrize(
    "loop, kind",
    [
        ("batches = make_batches(TEXT * 20, 32)\nfor epoch in range(50):\n    for batch in batches:\n"
         "        params, opt_state = step(params, opt_state, batch)\n", kinds.TOY),
        ("batches, vocab = make_batches(TEXT, 32)\nfor batch in batches:\n    params, opt_state = step(params, opt_state, batch)\n",
         kinds.TOY),
        # a one-line string is a path or a dataset's name, not a text to learn
        ("batches = make_batches('data/shakespeare.txt', 32)\nfor batch in batches:\n"
         "    params, opt_state = step(params, opt_state, batch)\n", kinds.TRAINING_RUN),
        # the paragraph joined with text from elsewhere: not known to be all of the data
        ("batches = make_batches(TEXT * 20 + more, 32)\nfor batch in batches:\n    params, opt_state = step(params, opt_state, batch)\n",
         kinds.TRAINING_RUN),
        # a text of more than 8,000 characters written in the file is more than a demo's paragraph
        ('BOOK = """' + "a line of a long book\n" * 400 + '"""\nbatches = make_batches(BOOK, 32)\nfor batch in batches:\n'
         "    params, opt_state = step(params, opt_state, batch)\n", kinds.TRAINING_RUN),
    ],
)
def test_batches_from_a_paragraph_written_in_the_file_are_a_demo(loop: str, kind: str) -> None:
    assert purpose_of(WRITTEN + loop).kind == kind


@pytest.mark.parametrize(
    "call, trains",
    [
        ("model, stats = train(model, optim, loader, num_epochs=10)\n", True),
        ("model = train(model=model, optim=optax.adamw(3e-4), data=loader)\n", True),
        # not handed the optimizer: a `train` that could be anything (a data split, a mode switch)
        ("model = train(model, loader)\n", False),
    ],
)
def test_a_project_train_function_handed_the_optimizer_is_a_weak_training_run(call: str, trains: bool) -> None:
    src = "import optax\nfrom mylib.loop import train\noptim = optax.adamw(3e-4)\n" + call
    got = purpose_of(src)
    assert got.trains == trains, got.describe()
    if trains:
        assert got.weak and "handed the optimizer" in got.describe()


_SMOKE = (
    "import numpy as np\nimport optax\nfrom mylib.loop import train\n\n"
    "def load_weights(path):\n    return dict(np.load(path))\n\n"
    "if __name__ == '__main__':\n"
    "    rng = np.random.RandomState(0)\n"
    "    X_np = rng.rand(512, 3, 32, 32).astype('float32')\n"
    "    X_train, X_val = X_np[:400], X_np[400:]\n"
    "    optim = optax.adamw(3e-4)\n"
    "    model = train(model, optim, X_train=jnp.array(X_train), X_val=X_val)\n"
)


@pytest.mark.parametrize(
    "change, trains",
    [
        ((), False),  # random arrays, sliced and unpacked: a smoke test
        (("X_np = rng.rand(512, 3, 32, 32).astype('float32')", "X_np = load_dataset('cifar10')"), True),
        # real data loaded beside the call: the random arrays are not what trains
        (("    optim =", "    extra = tfds.load('cifar10')\n    optim ="), True),
    ],
    ids=["noise", "loaded", "loaded-beside"],
)
def test_a_train_function_handed_noise_is_a_smoke_test(change: tuple, trains: bool) -> None:
    src = _SMOKE.replace(*change) if change else _SMOKE
    got = purpose_of(src)
    assert got.trains == trains, got.describe()
    if not trains:
        assert got.kind == kinds.TOY and "drawn at random or generated once (X_train)" in got.describe()


@pytest.mark.parametrize(
    "source, trains",
    [
        ("from tinylib.fake_data import make_table\n    df = make_table()", False),
        ("from sklearn.datasets import make_moons\n    df = make_moons(1000)", False),
        ("from tinylib.tables import read_table\n    df = read_table(PATH)", True),  # real data
    ],
    ids=["fake-data-module", "sklearn-make", "read"],
)
def test_a_train_function_handed_a_generated_table_is_a_smoke_test(source: str, trains: bool) -> None:
    """Columns of a synthetic table, split by train_test_split, handed to train()."""
    src = (
        "import optax\nfrom sklearn.model_selection import train_test_split\nfrom mylib.loop import train\n\n"
        "if __name__ == '__main__':\n"
        f"    {source}\n"
        "    X, y = df.drop(columns=['y']).values, df['y'].values\n"
        "    X_train, X_val, y_train, y_val = train_test_split(X, y, test_size=0.2)\n"
        "    optim = optax.adamw(3e-4)\n"
        "    model = train(model, optim, X_train, y_train)\n"
    )
    got = purpose_of(src)
    assert got.trains == trains, got.describe()


_MOCK = (FIXTURES / "OPX201" / "good_mock_run_on_random_prompts.py").read_text(encoding="utf-8")
_DRAW = "prompt_batches = [jax.random.randint(key, (4, 8), 0, VOCAB) for key in keys]"


@pytest.mark.parametrize(
    "replacement",
    [
        "prompt_batches = read_prompt_batches(FLAGS_prompts)",  # handed down, but not random
        _DRAW + "\n    prompt_batches = prompt_batches + tfds_batches",  # bound twice: not one draw
    ],
    ids=["real-data", "rebound"],
)
def test_batches_handed_down_are_a_mock_only_when_drawn_at_random(replacement: str) -> None:
    assert _DRAW in _MOCK
    got = purpose_of(_MOCK.replace(_DRAW, replacement))
    assert got.kind == kinds.TRAINING_RUN, got.describe()


def test_a_loop_over_a_datasets_own_enumerate_is_read_promptly() -> None:
    # `ds.enumerate()` (tf.data) takes no argument: reading it as a wrapped range once
    # looped forever, and a pre-commit run over the notebook never returned.
    import subprocess
    import sys

    text = textwrap.dedent(
        """
        import jax
        import optax

        tx = optax.adam(1e-3)
        for n, (image, target) in train_ds.enumerate():
            params, opt_state = step(params, opt_state, image, target)
        """
    )
    code = "import sys; from optax_lint.engine import lint; lint.lint_text(sys.stdin.read(), 'train.py', {'OPX201', 'OPX301'})"
    done = subprocess.run([sys.executable, "-c", code], input=text, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    from optax_lint.syntax.nodes import over_range

    assert not over_range(cst.parse_expression("train_ds.enumerate()"))
    assert over_range(cst.parse_expression("enumerate(tqdm(range(10)))"))


def test_test_code_is_test_functions_and_the_helpers_only_they_call() -> None:
    src = textwrap.dedent("""
        def _only_for_tests():
            pass

        def shared():
            pass

        def main():
            shared()

        def test_a():
            _only_for_tests()
            shared()

        class TestB:
            def test_c(self):
                _only_for_tests()
    """)
    facts = ModuleFacts(cst.parse_module(src), "model.py", text=src)
    assert facts.test_code == ((11, 13), (16, 17), (2, 3))
