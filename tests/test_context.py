"""The run context: declared values and their precedence, inference from the file,
cross-file config resolution (read, never imported), bounds, laziness, and the
`--show-context` report (snapshot-tested on fixtures/projects/lm1b).

Regenerate the snapshots with OPTAX_LINT_UPDATE_SNAPSHOTS=1.
"""

from __future__ import annotations

import os
import re
import textwrap
from pathlib import Path

import libcst as cst
import pytest
from click.testing import CliRunner

from optax_lint.cli import main
from optax_lint.core.config import load_settings
from optax_lint.engine import lint as engine
from optax_lint.facts.context.run_context import (
    ContextError,
    ContextValue,
    RunContext,
    parse_assignments,
    parse_cli,
    parse_config_table,
    parse_pragmas,
    parse_value,
)
from optax_lint.facts.module import ModuleFacts
from optax_lint.facts.project import evaluate as project_evaluate
from optax_lint.facts.project import files as project_files
from optax_lint.run import api
from optax_lint.syntax.values import Unknown

ROOT = Path(__file__).resolve().parent.parent
PROJECT = ROOT / "fixtures" / "projects" / "lm1b"
UPDATE = os.environ.get("OPTAX_LINT_UPDATE_SNAPSHOTS") == "1"
_EXPECT = re.compile(r"#\s*expect:\s*((?:OPX\d+[,\s]*)+)")


# ---------------------------------------------------------------------------
# Helpers


def run_cli(args, cwd: Path):
    runner = CliRunner()
    old = os.getcwd()
    os.chdir(cwd)
    try:
        return runner.invoke(main, args, catch_exceptions=False)
    finally:
        os.chdir(old)


def facts_of(src: str, path: str = "<string>", root=None, context=None) -> ModuleFacts:
    text = textwrap.dedent(src)
    return ModuleFacts(cst.parse_module(text), path, declared_context=context, root=root, text=text)


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(textwrap.dedent(text), encoding="utf-8")


def project_facts(tmp_path: Path, files: dict[str, str], main_file: str = "train.py", project_files=None) -> ModuleFacts:
    write(tmp_path, files)
    path = tmp_path / main_file
    text = path.read_text()
    return ModuleFacts(cst.parse_module(text), str(path), root=str(tmp_path), text=text, project_files=project_files)


def value(facts: ModuleFacts, field: str):
    return facts.run_context.value(field)


LINEN_HEAD = """
import flax.linen as nn
import jax
import jax.numpy as jnp
import optax
"""


# ---------------------------------------------------------------------------
# --show-context on a realistic multi-file project


def _snapshot(path: Path, actual: str) -> None:
    if UPDATE:
        path.write_text(actual, encoding="utf-8")
        return
    assert path.exists(), f"missing snapshot {path.relative_to(ROOT)}; run with OPTAX_LINT_UPDATE_SNAPSHOTS=1"
    assert actual == path.read_text(encoding="utf-8"), f"snapshot mismatch for {path.relative_to(ROOT)}"


def test_show_context_snapshot_multi_file_project():
    result = run_cli(["train.py", "sweep.py", "--show-context", "--select", "OPX2"], PROJECT)
    assert result.exit_code == 0, result.output
    _snapshot(PROJECT / "show_context.expected", result.output)
    # Provenance of each kind is present.
    assert "models.py:" in result.output  # arch read from the imported model module
    assert "configs/default.py:" in result.output  # steps and sizes from the ml_collections config
    assert "declared in pyproject.toml" in result.output
    assert "declared in sweep.py:8" in result.output
    assert "optimizer chosen from a config string: getattr(optax, args.optimizer)" in result.output
    assert "OPX204 fine-tune-learning-rate: needs fine_tune" in result.output


@pytest.mark.parametrize("fixture, said", [
    ("OPX303/good_trainer_module_demo_on_random_images.py",
     "but lines 40-75: a `__main__` demo on made-up data, no advice about training there"),
    ("OPX201/good_library_default_optimizer_overridden_by_callers.py",
     "but line 20: a parameter's default optimizer the module never runs with, no advice about training there"),
])
def test_show_context_names_the_code_that_is_no_run(fixture, said):
    """A training library's file reads as a training run, so the report says which lines
    advice about training is silent on, and why."""
    result = run_cli([str(ROOT / "fixtures" / fixture), "--show-context"], ROOT)
    assert result.exit_code == 0, result.output
    assert said in result.output


def test_project_lint_findings_match_markers_and_snapshot():
    settings = load_settings(start=PROJECT, overrides={"select": ["OPX2"]})
    old = os.getcwd()
    os.chdir(PROJECT)
    try:
        outcome = api.run([Path("train.py"), Path("sweep.py")], settings, api.RunOptions(jobs=1))
    finally:
        os.chdir(old)
    findings = outcome.findings
    assert outcome.internal_errors == 0, [f.message for f in findings]
    for name in ("train.py", "sweep.py"):
        text = (PROJECT / name).read_text()
        marked = [n for n, line in enumerate(text.splitlines(), 1) if _EXPECT.search(line) and "OPX2" in line]
        assert [f.span.line for f in findings if f.path == name] == marked
    lines = "".join(f"{f.path}:{f.span.line}:{f.span.column} {f.code} {f.message}\n" for f in findings)
    _snapshot(PROJECT / "lint.expected", lines)


def test_cli_context_overrides_everything(tmp_path):
    write(tmp_path, {
        "pyproject.toml": "[tool.optax-lint]\n[tool.optax-lint.context]\nsteps = 1000\narch = \"cnn\"\n",
        "train.py": """\
            # optax-lint: context steps=2_000
            import optax
            for step in range(3000):
                pass
            """,
    })
    out = run_cli(["train.py", "--show-context"], tmp_path).output
    assert re.search(r"steps\s+2000\s+declared in train.py:1", out)  # pragma over config
    assert re.search(r"arch\s+cnn\s+declared in pyproject.toml", out)
    out = run_cli(["train.py", "--show-context", "--context", "steps=5k,arch=transformer"], tmp_path).output
    assert re.search(r"steps\s+5000\s+declared on the command line", out)
    assert re.search(r"arch\s+transformer\s+declared on the command line", out)


def test_precedence_config_over_inferred_and_inferred_last(tmp_path):
    loop = """\
        import optax

        def train_step(state):
            return state.apply_gradients(grads=None)

        for step in range(3000):
            state = train_step(state)
        """
    write(tmp_path, {"train.py": loop})
    assert re.search(r"steps\s+3000\s+train.py:6\s+high", run_cli(["train.py", "--show-context"], tmp_path).output)
    write(tmp_path, {"pyproject.toml": "[tool.optax-lint.context]\nsteps = 1000\n"})
    assert re.search(r"steps\s+1000\s+declared in pyproject.toml", run_cli(["train.py", "--show-context"], tmp_path).output)


def test_config_per_path_overrides(tmp_path):
    write(tmp_path, {
        "pyproject.toml": textwrap.dedent("""\
            [tool.optax-lint.context]
            devices = 8
            [[tool.optax-lint.context.overrides]]
            path = "experiments/*.py"
            devices = 1
            fine_tune = true
            """),
        "train.py": "import optax\n",
        "experiments/ft.py": "import optax\n",
    })
    out = run_cli(["train.py", "experiments/ft.py", "--show-context"], tmp_path).output
    sections = {block.split("\n", 1)[0]: block for block in out.split("\n\n")}
    assert re.search(r"devices\s+8\s+declared in pyproject.toml", sections["train.py"])
    assert re.search(r"devices\s+1\s+declared in pyproject.toml", sections["experiments/ft.py"])
    assert re.search(r"fine_tune\s+true\s+declared in pyproject.toml", sections["experiments/ft.py"])


def test_declared_context_reaches_the_rules(tmp_path):
    src = "import optax\ntx = optax.adamw(3e-4)\n"
    write(tmp_path, {"train.py": src})
    assert run_cli(["train.py", "--select", "OPX201"], tmp_path).exit_code == 0
    result = run_cli(["train.py", "--select", "OPX201", "--context", "arch=transformer"], tmp_path)
    assert result.exit_code == 1 and "declared on the command line" in result.output
    write(tmp_path, {"pyproject.toml": "[tool.optax-lint.context]\narch = \"transformer\"\n"})
    result = run_cli(["train.py", "--select", "OPX201", "--output-format", "concise"], tmp_path)
    assert "(declared in pyproject.toml)" in result.output


@pytest.mark.parametrize(
    "args, message",
    [
        (["--context", "arch=lstm2"], "--context: arch: expected one of"),
        (["--context", "steps"], "--context: expected field=value"),
        (["--context", "mesh=4"], "unknown context field 'mesh'"),
        (["--context", "steps=-5"], "steps: expected a positive whole number"),
    ],
)
def test_bad_cli_context_is_a_usage_error(tmp_path, args, message):
    write(tmp_path, {"train.py": "import optax\n"})
    result = run_cli(["train.py", *args], tmp_path)
    assert result.exit_code == 2
    assert message in result.output


@pytest.mark.parametrize(
    "table, message",
    [
        ('steps = "lots"', "pyproject.toml: [tool.optax-lint.context] steps: expected a positive whole number"),
        ('arch = "nonsense"', "pyproject.toml: [tool.optax-lint.context] arch: expected one of transformer"),
        ('[[tool.optax-lint.context.overrides]]\npath = "a/*"\narch = "nonsense"',
         "pyproject.toml: [tool.optax-lint.context] overrides[0] arch: expected one of transformer"),
    ],
)
def test_bad_config_context_is_a_config_error(tmp_path, table, message):
    write(tmp_path, {"pyproject.toml": f"[tool.optax-lint.context]\n{table}\n", "train.py": "import optax\n"})
    result = run_cli(["train.py"], tmp_path)
    assert result.exit_code == 2
    assert message in result.output
    # The field is named once (it was `arch: arch: ...`).
    assert result.output.count(message.rsplit("] ", 1)[1].split(":")[0] + ":") == 1, result.output


# ---------------------------------------------------------------------------
# Declared values


@pytest.mark.parametrize(
    "field, raw, expected",
    [
        ("steps", "50_000", 50_000), ("steps", "5e4", 50_000), ("steps", "50k", 50_000), ("params", "1.3B", 1_300_000_000),
        ("params", "7b", 7_000_000_000), ("params", 1.5e9, 1_500_000_000), ("devices", 8, 8), ("arch", "Transformer", "transformer"),
        ("arch", "vit", "transformer"), ("arch", "resnet", "cnn"), ("fine_tune", "yes", True), ("fine_tune", False, False),
    ],
)
def test_parse_value(field, raw, expected):
    assert parse_value(field, raw) == expected


@pytest.mark.parametrize("field, raw", [("steps", "1.5"), ("steps", "0"), ("devices", True), ("fine_tune", "maybe"), ("arch", 3)])
def test_parse_value_rejects(field, raw):
    with pytest.raises(ContextError):
        parse_value(field, raw)


def test_parse_assignments_aliases_and_problems():
    values, problems = parse_assignments("arch=transformer, steps=50_000 batch=4096 accum=4 bogus=1 lone")
    assert values == {"arch": "transformer", "steps": 50_000, "batch_global": 4096, "grad_accum": 4}
    assert len(problems) == 2 and "bogus" in problems[0] and "lone" in problems[1]
    assert parse_cli(["arch=cnn", "devices=4,steps=10"]) == {"arch": "cnn", "devices": 4, "steps": 10}


def test_pragmas_are_comments_only_and_located():
    text = 's = "# optax-lint: context steps=1"\n\n# optax-lint: context arch=transformer steps=50_000  # long run\n'
    values, problems = parse_pragmas(text, "t.py")
    assert values["steps"].value == 50_000 and values["steps"].location == "t.py:3"
    assert values["arch"].where() == "declared in t.py:3"
    assert problems == []


def test_config_table_validation():
    base, overrides = parse_config_table({"devices": 8, "overrides": [{"path": "a/*", "steps": "20k"}]})
    assert base == {"devices": 8} and overrides == [("a/*", {"steps": 20_000})]
    with pytest.raises(ContextError, match="overrides\\[0\\]: expected a `path`"):
        parse_config_table({"overrides": [{"steps": 1}]})


def test_low_confidence_values_are_shown_but_not_used():
    context = RunContext({"steps": ContextValue(1000, "inferred", "a.py:1", "low", "configs disagree")})
    assert context.entry("steps").value == 1000
    assert context.get("steps") is None and context.value("steps") is None
    assert context.missing(["steps", "arch|steps"]) == ["steps", "arch or steps"]
    assert RunContext({"arch": ContextValue("unknown", "cli")}).get("arch") is None


# ---------------------------------------------------------------------------
# Inference: architecture


@pytest.mark.parametrize(
    "model, arch",
    [
        ("class M(nn.Module):\n    @nn.compact\n    def __call__(self, x):\n        return nn.SelfAttention(num_heads=2)(x)\n\nM()", "transformer"),
        ("class M(nn.Module):\n    @nn.compact\n    def __call__(self, x):\n        return nn.Conv(8, (3, 3))(x)\n\nM()", "cnn"),
        ("class M(nn.Module):\n    @nn.compact\n    def __call__(self, x):\n        return nn.RNN(nn.LSTMCell(8))(x)\n\nM()", "rnn"),
        ("class M(nn.Module):\n    @nn.compact\n    def __call__(self, x):\n        return nn.Dense(1)(nn.relu(nn.Dense(8)(x)))\n\nM()", "mlp"),
        # ViT: a patch-embedding Conv and attention blocks is a Transformer.
        ("class ViT(nn.Module):\n    @nn.compact\n    def __call__(self, x):\n        x = nn.Conv(8, (4, 4))(x)\n        return nn.MultiHeadDotProductAttention(2)(x, x)\n\nViT()", "transformer"),
        # A hand-written attention class, only Dense layers: recognised by its name.
        ("class CausalSelfAttention(nn.Module):\n    @nn.compact\n    def __call__(self, x):\n        return nn.Dense(8)(x)\n\nCausalSelfAttention()", "transformer"),
        # A ViT with hand-written attention: the patch Conv is its only library layer but Dense.
        ("class ViT(nn.Module):\n    @nn.compact\n    def __call__(self, x):\n        x = nn.Conv(8, (4, 4))(x)\n        return nn.Dense(8)(x)\n\nViT()", "transformer"),
        # A CNN with a block named for attention stays a CNN.
        ("class Net(nn.Module):\n    @nn.compact\n    def __call__(self, x):\n        x = nn.Conv(8, (3, 3))(x)\n        return SpatialAttention()(x)\n\n"
         "class SpatialAttention(nn.Module):\n    @nn.compact\n    def __call__(self, x):\n        return x * nn.Dense(1)(x)\n\nNet()", "cnn"),
    ],
)
def test_arch_from_linen_models(model, arch):
    f = facts_of(LINEN_HEAD + model + "\n")
    assert value(f, "arch") == arch


def test_arch_of_nnx_haiku_equinox():
    nnx = "from flax import nnx\nclass M(nnx.Module):\n    def __init__(self, rngs):\n        self.a = nnx.MultiHeadAttention(2, 8, rngs=rngs)\nM(nnx.Rngs(0))\n"
    hk = "import haiku as hk\ndef f(x):\n    return hk.MultiHeadAttention(2, 4, w_init_scale=1.0)(x, x, x)\n"
    eqx = "import equinox as eqx\nclass M(eqx.Module):\n    conv: eqx.nn.Conv2d\n    def __init__(self, key):\n        self.conv = eqx.nn.Conv2d(3, 8, 3, key=key)\nM(None)\n"
    assert value(facts_of(nnx), "arch") == "transformer"
    assert value(facts_of(hk), "arch") == "transformer"
    assert value(facts_of(eqx), "arch") == "cnn"


def test_arch_unclear_or_absent_stays_unknown():
    unet = LINEN_HEAD + (
        "class UNet(nn.Module):\n    @nn.compact\n    def __call__(self, x):\n"
        "        x = nn.Conv(8, (3, 3))(x)\n        return nn.SelfAttention(2)(x)\n\nUNet()\n"
    )
    f = facts_of(unet)
    assert f.run_context.get("arch") is None
    f = facts_of("import optax\nfrom somewhere import build\nmodel = build()\n")
    assert f.run_context.get("arch") is None
    assert "no model code" in f.run_context.note("arch")
    # A recurrent encoder-decoder with one attention layer (Bahdanau) is no Transformer stack.
    seq2seq = LINEN_HEAD + (
        "class Seq2Seq(nn.Module):\n    @nn.compact\n    def __call__(self, x, y):\n"
        "        h = nn.RNN(nn.GRUCell(8))(x)\n        return nn.MultiHeadDotProductAttention(2)(nn.RNN(nn.GRUCell(8))(y), h)\n\nSeq2Seq()\n"
    )
    assert facts_of(seq2seq).run_context.get("arch") is None
    # A jraph graph network that pools its nodes with attention is a graph network.
    gnn = LINEN_HEAD + "import jraph\n" + (
        "class Net(nn.Module):\n    @nn.compact\n    def __call__(self, g):\n"
        "        g = jraph.GraphNetwork(update_edge_fn=None, update_node_fn=None)(g)\n"
        "        return nn.MultiHeadDotProductAttention(2)(g.nodes, g.nodes)\n\nNet()\n"
    )
    assert facts_of(gnn).run_context.get("arch") is None


def test_arch_from_imported_project_module_and_by_name(tmp_path):
    f = project_facts(tmp_path, {
        "models/__init__.py": "",
        "models/lm.py": LINEN_HEAD + "class Block(nn.Module):\n    @nn.compact\n    def __call__(self, x):\n        return nn.MultiHeadDotProductAttention(2)(x, x)\n\n"
        "class Decoder(nn.Module):\n    @nn.compact\n    def __call__(self, x):\n        return Block()(x)\n",
        "train.py": "import optax\nfrom models.lm import Decoder\nmodel = Decoder()\n",
    })
    entry = f.run_context.get("arch")
    assert entry.value == "transformer" and entry.confidence == "high"
    lm = tmp_path / "models" / "lm.py"
    line = next(n for n, text in enumerate(lm.read_text().splitlines(), 1) if "MultiHeadDotProductAttention" in text)
    assert entry.location == f"models/lm.py:{line}"  # relative to the project root, never absolute
    h = facts_of("import optax\nfrom transformers import FlaxAutoModelForSequenceClassification\n"
                 "model = FlaxAutoModelForSequenceClassification.from_pretrained('bert-base-cased')\n")
    assert h.run_context.get("arch").value == "transformer" and h.run_context.get("arch").confidence == "medium"
    g = facts_of("import optax\nfrom hub_models import GPT2\nmodel = GPT2()\n")
    assert g.run_context.get("arch").value == "transformer" and g.run_context.get("arch").confidence == "medium"


SPLIT = """
import jax


class AttentionSplit:
    \"\"\"Scores a tree split by attending over the input features.\"\"\"

    def init_params(self, key, num_features):
        return {"w_q": jax.random.normal(key, (num_features, 4))}
"""


def test_arch_not_from_the_name_of_a_plain_class_in_a_src_layout(tmp_path):
    # A soft-tree split function (no module base class, no layer) in the project's
    # src/ package: it is read, and its name ("Attention...") says nothing.
    files = {
        "pyproject.toml": "[project]\nname = 'trees'\n",
        "src/trees/__init__.py": "",
        "src/trees/splits.py": SPLIT,
        "examples/fit.py": "import optax\nfrom trees.splits import AttentionSplit\nsplit = AttentionSplit()\n",
    }
    f = project_facts(tmp_path, files, "examples/fit.py")
    assert f.project.resolve("trees.splits.AttentionSplit", str(tmp_path / "examples")) == (str(tmp_path / "src" / "trees" / "splits.py"), ["AttentionSplit"])
    assert value(f, "arch") is None
    # The same name on a flax module whose layers are not visible still says Transformer.
    files["src/trees/splits.py"] = "import flax.linen as nn\nfrom trees.blocks import Mixer\n\n\nclass AttentionSplit(nn.Module):\n    @nn.compact\n    def __call__(self, x):\n        return Mixer()(x)\n"
    g = project_facts(tmp_path, files, "examples/fit.py")
    assert value(g, "arch") == "transformer"
    # So does a plain class that is a factory of the model it names.
    files["src/trees/splits.py"] = "class AttentionSplit:\n    @classmethod\n    def from_pretrained(cls, name):\n        return load(name)\n"
    h = project_facts(tmp_path, files, "examples/fit.py")
    assert value(h, "arch") == "transformer"


# ---------------------------------------------------------------------------
# Inference: steps, devices, batch, grad_accum, fine_tune, params

STEP = """
import jax
import optax

def train_step(state, batch):
    return state.apply_gradients(grads=batch)
"""


@pytest.mark.parametrize(
    "loop, steps",
    [
        ("NUM_STEPS = 10_000\nfor step in range(NUM_STEPS):\n    state = train_step(state, 1)\n", 10_000),
        ("for step in range(1, 500 + 1):\n    state = train_step(state, 1)\n", 500),
        ("from tqdm import tqdm\nfor step in tqdm(range(2 * 1024)):\n    state = train_step(state, 1)\n", 2048),
        # a progress bar kept in a walrus for its messages
        ("from tqdm import trange\nfor step in (bar := trange(640)):\n    state = train_step(state, 1)\n", 640),
        ("step = 0\nwhile step < 777:\n    state = train_step(state, 1)\n    step += 1\n", 777),
        ("for epoch in range(10):\n    for i in range(300):\n        state = train_step(state, 1)\n", 3000),
        ("steps_per_epoch = 50000 // 128\nfor epoch in range(4):\n    for batch in ds:\n        state = train_step(state, batch)\n", 4 * (50000 // 128)),
        ("num_train_steps = 12_345\nschedule = optax.cosine_decay_schedule(1e-3, num_train_steps)\n", 12_345),
        ("num_epochs = 3\nsteps_per_epoch = 1000\n", 3000),
        # Loop iterations under MultiSteps(k) are micro-batches.
        ("tx = optax.MultiSteps(optax.adam(1e-3), every_k_schedule=4)\nfor i in range(4000):\n    state = train_step(state, 1)\n", 1000),
        # A loop over data that leaves at a bound on its enumerate counter.
        ("config = {'num_steps': 100}\nfor step, batch in enumerate(ds):\n    if step >= config['num_steps']:\n        break\n"
         "    state = train_step(state, batch)\n", 100),
        ("for step, batch in enumerate(ds):\n    if step > 99: break\n    state = train_step(state, batch)\n", 100),
        ("for step, batch in enumerate(ds, start=1):\n    if 500 <= step:\n        break\n    state = train_step(state, batch)\n", 499),
    ],
)
def test_steps(loop, steps):
    f = facts_of(STEP + loop)
    assert value(f, "steps") == steps


@pytest.mark.parametrize(
    "loop",
    [
        # the break does more than leave, or is not on the enumerate counter, or is a `<`
        "for step, batch in enumerate(ds):\n    if step >= 100:\n        save(state)\n        break\n    state = train_step(state, batch)\n",
        "for step, batch in enumerate(ds):\n    if loss >= 100:\n        break\n    state = train_step(state, batch)\n",
        "for step, batch in enumerate(ds):\n    if step < 100:\n        break\n    state = train_step(state, batch)\n",
        "for batch in ds:\n    if step >= 100:\n        break\n    state = train_step(state, batch)\n",
    ],
)
def test_steps_not_read_from_other_breaks(loop):
    assert facts_of(STEP + loop).run_context.get("steps") is None


def test_steps_unknown_when_loops_disagree_or_bound_is_runtime():
    f = facts_of(STEP + "def a(s):\n    for i in range(10):\n        s = train_step(s, 1)\n\ndef b(s):\n    for i in range(20):\n        s = train_step(s, 1)\n")
    assert f.run_context.get("steps") is None
    f = facts_of(STEP + "import sys\nfor i in range(int(sys.argv[1])):\n    state = train_step(state, 1)\n")
    assert f.run_context.get("steps") is None
    f = facts_of(STEP + "for i in range(100):\n    evaluate(i)\n")  # no update in the loop
    assert f.run_context.get("steps") is None


def test_devices_and_batch_roles():
    xla = "import os\nos.environ['XLA_FLAGS'] = '--xla_force_host_platform_device_count=4'\nimport jax\n"
    assert value(facts_of(xla), "devices") == 4
    mesh = "import jax\nmesh = jax.make_mesh((2, 4), ('data', 'model'))\n"
    assert value(facts_of(mesh), "devices") == 8
    pmap = STEP + "batch_size = 256\nper_device = batch_size // jax.device_count()\np_step = jax.pmap(train_step)\nfor i in range(10):\n    state = p_step(state, 1)\n"
    f = facts_of(pmap)
    assert f.run_context.get("devices") is None and "known only at run time" in f.run_context.note("devices")
    assert value(f, "batch_global") == 256 and value(f, "batch_per_device") is None
    per_device = STEP + "batch_size = 64\nglobal_batch = batch_size * jax.local_device_count()\nfor i in range(10):\n    state = jax.pmap(train_step)(state, 1)\n"
    f = facts_of(per_device)
    assert value(f, "batch_per_device") == 64 and value(f, "batch_global") is None
    f = facts_of(per_device, context={"devices": (8, "cli")})
    assert value(f, "batch_global") == 512
    single = STEP + "BATCH_SIZE = 128\nfor i in range(10):\n    state = train_step(state, 1)\n"
    f = facts_of(single)
    assert value(f, "devices") == 1 and value(f, "batch_global") == 128 and f.run_context.get("batch_global").confidence == "medium"


def test_grad_accum_and_fine_tune():
    assert value(facts_of("import optax\nk = 8\ntx = optax.MultiSteps(optax.adam(1e-3), k)\n"), "grad_accum") == 8
    used = "import optax\ntx = optax.adam(1e-3)\nupdates, opt_state = tx.update(grads, opt_state)\n"
    assert value(facts_of(used), "grad_accum") == 1
    assert value(facts_of("import optax\ntx = optax.adam(1e-3)\n"), "grad_accum") is None  # built here, used elsewhere
    assert facts_of("import optax\ntx = optax.MultiSteps(optax.adam(1e-3), lambda s: 4)\n").run_context.get("grad_accum") is None
    hf = "import optax\nfrom transformers import FlaxBertModel, AutoTokenizer\ntok = AutoTokenizer.from_pretrained('b')\nmodel = FlaxBertModel.from_pretrained('b')\n"
    entry = facts_of(hf, path="ft.py").run_context.get("fine_tune")
    assert entry.value is True and entry.location == "ft.py:4"
    resume = STEP + "from flax.training import checkpoints\nstate = checkpoints.restore_checkpoint(workdir, state)\n"
    assert facts_of(resume).run_context.get("fine_tune") is None
    scratch = STEP + "from flax.training import train_state\nparams = model.init(key, x)\ntx = optax.adam(1e-3)\nstate = train_state.TrainState.create(apply_fn=model.apply, params=params, tx=tx)\n"
    assert value(facts_of(scratch), "fine_tune") is False


def test_fine_tune_only_from_the_model_the_optimizer_receives():
    """A pretrained model counts as the start of a fine-tune only when the optimizer is
    handed it (directly, through an alias, or through a helper's arguments); a pretrained
    VAE, teacher or encoder next to a model built from scratch does not."""
    head = "import optax\nfrom flax.training import train_state\nfrom transformers import FlaxAutoModel\n"
    vae = head + "vae = FlaxAutoModel.from_pretrained('vae')\nmodel = DiT()\nstate = init_state(model, mesh, optax.adamw(3e-4))\n"
    assert facts_of(vae).run_context.get("fine_tune") is None
    student = head + (
        "teacher = FlaxAutoModel.from_pretrained('big')\nstudent = FlaxAutoModel.from_pretrained('small')\ntx = optax.adamw(1e-5)\n"
        "state = train_state.TrainState.create(apply_fn=student.__call__, params=student.params, tx=tx)\n"
    )
    entry = facts_of(student, path="distil.py").run_context.get("fine_tune")
    assert entry.value is True and entry.location == "distil.py:5"  # the student, not the teacher
    alias = head + "model = FlaxAutoModel.from_pretrained('b')\nparams = model.params\ntx = optax.adamw(1e-5)\nopt_state = tx.init(params)\n"
    assert value(facts_of(alias), "fine_tune") is True
    unpaired = head + "model = FlaxAutoModel.from_pretrained('b')\ntx = optax.adamw(1e-5)\n"
    assert value(facts_of(unpaired), "fine_tune") is True  # nothing says which model trains: the load still counts
    inline = head + "import flax.nnx as nnx\nopt = nnx.Optimizer(Model.from_pretrained('b'), optax.adamw(1e-5), wrt=nnx.Param)\n"
    assert value(facts_of(inline), "fine_tune") is True


def test_fine_tune_from_a_config_that_loads_a_checkpoint(tmp_path):
    """A restore whose path a config field holds ("..._pretrained"), and an `init_*` field
    whose value constructs a checkpoint loader, both say the params start pretrained; a
    restore of a path that says nothing stays unknown (a resume)."""
    loop = "tx = optax.adam(1e-4)\nfor i in range(10):\n    params = step(params, tx)\n"
    write(tmp_path, {"settings.py": "import dataclasses\n@dataclasses.dataclass\nclass Cfg:\n    ckpt: str = '/ckpts/bert_base_pretrained'\n    resume: str = '/runs/7'\n"})
    head = "import optax\nfrom flax.training import checkpoints\nfrom settings import Cfg\ncfg = Cfg()\n"
    f = project_facts(tmp_path, {"train.py": head + "params = checkpoints.restore_checkpoint(cfg.ckpt, target=None)\n" + loop})
    assert value(f, "fine_tune") is True and f.run_context.get("fine_tune").location.endswith("train.py:5")
    f = project_facts(tmp_path, {"resume.py": head + "params = checkpoints.restore_checkpoint(cfg.resume, target=None)\n" + loop}, "resume.py")
    assert f.run_context.get("fine_tune") is None
    loader = "import optax\nimport trainer\nconfig = trainer.Config(init_transform=LoadCheckpoint(path='/ckpt/run1'))\n" + loop
    entry = project_facts(tmp_path, {"ft.py": loader}, "ft.py").run_context.get("fine_tune")
    assert entry.value is True and "init_transform=LoadCheckpoint" in entry.detail
    plain = "import optax\nimport trainer\nconfig = trainer.Config(ckpt=LoadCheckpoint(path='/ckpt/run1'))\n" + loop
    assert project_facts(tmp_path, {"plain.py": plain}, "plain.py").run_context.get("fine_tune") is None


LM_MODEL = LINEN_HEAD + (
    "class Block(nn.Module):\n    @nn.compact\n    def __call__(self, x):\n        return nn.MultiHeadDotProductAttention(2)(x, x)\n\n"
    "class CausalLM(nn.Module):\n    @nn.compact\n    def __call__(self, x):\n        return Block()(x)\n"
)
LM_LOAD = (
    "from lm.model import CausalLM\n"
    "def load_train_state(path, optim_getter):\n    model = CausalLM()\n    params = model.init(0, None)\n"
    "    return (params, optim_getter(params)), model\n"
)
LM_TRAIN = (
    "import optax\nfrom lm.load import load_train_state\n"
    "def main():\n    train_state, model = load_train_state('ckpt', lambda p: optax.adamw(1e-5))\n"
    "    for step in range(100):\n        train_state = train_step(train_state, step)\n"
)


def test_arch_of_a_model_a_project_helper_builds(tmp_path):
    """`state, model = load_train_state(...)`: the model is built in the helper's module,
    from a class of a third module; its layers decide, one hop into the helper. The
    example sits two folders below the repository's top (setup.py), where the package
    lives: imports resolve from there even when the run's root is the example's folder."""
    files = {"setup.py": "", "lm/__init__.py": "", "lm/model.py": LM_MODEL, "lm/load.py": LM_LOAD, "examples/gpt/train.py": LM_TRAIN}
    write(tmp_path / "marked", files)
    path = tmp_path / "marked" / "examples" / "gpt" / "train.py"
    text = path.read_text()
    facts = ModuleFacts(cst.parse_module(text), str(path), root=str(path.parent), text=text)
    entry = facts.run_context.get("arch")
    assert entry.value == "transformer" and not entry.by_name
    assert "built by load_train_state()" in entry.detail and entry.location.endswith("lm/model.py:" + str(
        next(n for n, line in enumerate(LM_MODEL.splitlines(), 1) if "MultiHeadDotProductAttention" in line)))
    # Without a marker above the example, the run's root bounds the reads: unknown.
    bare = tmp_path / "bare"
    write(bare, {k: v for k, v in files.items() if k != "setup.py"})
    path = bare / "examples" / "gpt" / "train.py"
    facts = ModuleFacts(cst.parse_module(path.read_text()), str(path), root=str(path.parent), text=path.read_text())
    assert facts.run_context.get("arch") is None


_UNET_MODEL = """
import flax.linen as nn


class MidAttention(nn.Module):
    @nn.compact
    def __call__(self, x):
        return x + nn.MultiHeadDotProductAttention(num_heads=4)(x, x)


class {name}(nn.Module):
    @nn.compact
    def __call__(self, x):
        x = nn.Conv(64, (3, 3))(x)
        return nn.Conv(1, (1, 1))(MidAttention()(x))


def build(key, x):
    model = {name}()
    return model, model.init(key, x)
"""

_UNET_TRAIN = """
import jax
import optax
from nets import build

model, params = build(jax.random.PRNGKey(0), None)
tx = optax.adam(1e-3)
opt_state = tx.init(params)
for batch in loader:
    grads = jax.grad(loss)(params, batch)
    updates, opt_state = tx.update(grads, opt_state, params)
    params = optax.apply_updates(params, updates)
"""


@pytest.mark.parametrize("name, arch", [("UNet", None), ("Denoiser", "transformer")])
def test_a_helper_built_conv_net_named_as_one_keeps_its_attention_a_block(tmp_path, name, arch):
    """A convolutional net with an attention block, built by a project helper, is not a
    Transformer when its class is named as a convolutional net (`UNet`), as when it is
    built in the file itself; named for nothing, the attention decides as before."""
    facts = project_facts(tmp_path, {"nets.py": _UNET_MODEL.format(name=name), "train.py": _UNET_TRAIN})
    entry = facts.run_context.get("arch")
    assert (entry.value if entry is not None else None) == arch


def test_arch_from_a_class_built_by_from_pretrained_and_names_that_are_not_models():
    hf = "import optax\nfrom transformers import FlaxAutoModelForCausalLM\nmodel = FlaxAutoModelForCausalLM.from_pretrained('gpt2')\n"
    entry = facts_of(hf).run_context.get("arch")
    assert entry.value == "transformer" and entry.by_name and entry.confidence == "medium"
    for helper in ("LlamaDataLoader(ds, 8)", "TransformerConfig(vocab_size=8)", "GPT3Optimizer(lr=1e-4)", "FlaxDataCollatorSpeechSeq2SeqWithPadding(p)", "GPT2Tokenizer.from_pretrained('gpt2')"):
        name = helper.split("(")[0].split(".")[0]
        f = facts_of(f"import optax\nfrom somewhere import {name}\nx = {helper}\ntx = optax.adam(1e-3)\n")
        assert f.run_context.get("arch") is None, helper


def test_arch_of_a_model_function_wrapped_or_called_as_its_forward_pass():
    """A function from a module that is not read says what it is by its name only when
    it is the model itself: the function hk.transform wraps, or its forward pass. A
    library constructor bound to a name (a notebook may train several models) does not."""
    wrapped = (
        "import functools\nimport haiku as hk\nimport optax\nfrom lmpkg import transformer\n"
        "model = hk.transform(functools.partial(transformer.transformer_decoder, config=None))\n"
    )
    entry = facts_of(wrapped).run_context.get("arch")
    assert entry.value == "transformer" and entry.by_name and "transformer_decoder()" in entry.detail
    forward = "import optax\nfrom llama_lib import forward_llama\ndef loss(params, x):\n    return forward_llama(params, x).mean()\n"
    assert facts_of(forward).run_context.get("arch").value == "transformer"
    built = "import optax\nfrom penzai_like import gemma_from_pretrained_checkpoint\ngemma_model = gemma_from_pretrained_checkpoint(ckpt)\n"
    assert facts_of(built).run_context.get("arch") is None
    loader = "import optax\nfrom llama_lib import load_llama_params\nparams = load_llama_params(path)\n"
    assert facts_of(loader).run_context.get("arch") is None


def test_arch_of_a_model_class_picked_by_name(tmp_path):
    """`getattr(models, config.model)`: every model class in the project module is a CNN,
    so the run trains a CNN (medium confidence); a module that mixes a CNN and a
    Transformer says nothing."""
    cnn = "import flax.linen as nn\nclass ResNet(nn.Module):\n    @nn.compact\n    def __call__(self, x):\n        return nn.Conv(8, (3, 3))(x)\n"
    vit = "class ViT(nn.Module):\n    @nn.compact\n    def __call__(self, x):\n        return nn.SelfAttention(num_heads=2)(x)\n"
    train = (
        "import optax\nfrom flax.training import train_state\nimport models\n"
        "def create_state(rng, model):\n    tx = optax.sgd(0.1)\n"
        "    return train_state.TrainState.create(apply_fn=model.apply, params=model.init(rng, None), tx=tx)\n"
        "def main(config):\n    model = getattr(models, config.model)()\n    state = create_state(0, model)\n"
    )
    entry = project_facts(tmp_path, {"models.py": cnn, "train.py": train}).run_context.get("arch")
    assert entry.value == "cnn" and entry.confidence == "medium" and "getattr(models, config.model)" in entry.detail
    mixed = project_facts(tmp_path / "mixed", {"models.py": cnn + vit, "train.py": train})
    assert mixed.run_context.get("arch") is None


def test_params_estimate_formula():
    src = LINEN_HEAD + (
        "class GPT(nn.Module):\n    num_layers: int = 12\n    d_model: int = 768\n    vocab_size: int = 50257\n"
        "    @nn.compact\n    def __call__(self, x):\n        return nn.SelfAttention(12)(x)\n\nGPT()\n"
    )
    entry = facts_of(src).run_context.get("params")
    assert entry.value == 12 * (4 * 768**2 + 2 * 768 * 4 * 768) + 50257 * 768
    assert "L*(4d^2 + 2*d*d_ff) + V*d" in entry.detail
    # Only for Transformers.
    assert facts_of(src.replace("nn.SelfAttention(12)", "nn.Conv(8, (3, 3))").replace("GPT", "Net")).run_context.get("params") is None


def test_params_estimate_encoder_decoder_and_heads_times_head_size():
    """T5's config: num_layers is the encoder's, num_decoder_layers the decoder's, whose
    layers add cross-attention; with no width field the width is num_heads x d_kv."""
    src = LINEN_HEAD + (
        "class T5(nn.Module):\n    num_layers: int = 6\n    num_decoder_layers: int = 4\n    num_heads: int = 8\n"
        "    d_kv: int = 64\n    d_ff: int = 2048\n    vocab_size: int = 32128\n"
        "    @nn.compact\n    def __call__(self, x):\n        return nn.SelfAttention(8)(x)\n\nT5()\n"
    )
    entry = facts_of(src).run_context.get("params")
    d = 8 * 64
    assert entry.value == 6 * (4 * d * d + 2 * d * 2048) + 4 * (8 * d * d + 2 * d * 2048) + 32128 * d
    assert "L=6+4 (num_layers, num_decoder_layers" in entry.detail and "d=512 (num_heads x d_kv)" in entry.detail
    # A decoder-only stack named for its decoder is one plain stack.
    decoder_only = src.replace("    num_layers: int = 6\n", "")
    assert facts_of(decoder_only).run_context.get("params").value == 4 * (4 * d * d + 2 * d * 2048) + 32128 * d
    # Heads without a head size give no width.
    assert facts_of(src.replace("    d_kv: int = 64\n", "")).run_context.get("params") is None

def test_params_estimate_keeps_the_count_outside_the_embedding_for_the_small_model_line():
    """The estimate is the whole model; the small-model line (OPX201, OPX301) compares the
    count outside the token-embedding table. A declared count is the whole model."""
    from optax_lint.rules.schedules.regime import small_model_entry

    src = LINEN_HEAD + (
        "class GPT(nn.Module):\n    n_layer: int = 2\n    n_embd: int = 128\n    vocab_size: int = 50257\n"
        "    @nn.compact\n    def __call__(self, x):\n        return nn.SelfAttention(4)(x)\n\nGPT()\n"
    )
    facts = facts_of(src)
    entry = facts.run_context.get("params")
    blocks = 2 * (4 * 128**2 + 2 * 128 * 4 * 128)
    assert entry.value == blocks + 50257 * 128 and entry.non_embedding == blocks
    assert "(393K outside the 50257 x 128 embedding)" in entry.detail
    assert small_model_entry(facts, 1e6) is entry
    # four blocks 256 wide are 3.1M whatever the vocabulary: not small
    deeper = facts_of(src.replace("n_layer: int = 2", "n_layer: int = 4").replace("n_embd: int = 128", "n_embd: int = 256"))
    assert small_model_entry(deeper, 1e6) is None
    # a declared count is the whole model, embedding included
    declared = facts_of("# optax-lint: context params=6_826_112\n" + src)
    assert declared.run_context.get("params").non_embedding is None
    assert small_model_entry(declared, 1e6) is None


def test_params_estimate_reads_the_papers_notation_only_as_a_whole():
    """`N`, `d_model`/`dm` and `d_ff`/`dff` together: N encoder and N decoder layers. A
    bare `N` beside a width alone is a batch or a sample count, not a depth."""
    src = LINEN_HEAD + (
        "class Seq2Seq(nn.Module):\n    N: int = 3\n    dm: int = 32\n    dff: int = 64\n"
        "    @nn.compact\n    def __call__(self, x):\n        return nn.SelfAttention(4)(x)\n\nSeq2Seq()\n"
    )
    entry = facts_of(src).run_context.get("params")
    assert entry.value == 3 * (4 * 32**2 + 2 * 32 * 64) + 3 * (8 * 32**2 + 2 * 32 * 64)
    assert "L=3+3 (N, N;" in entry.detail and "d=32 (dm)" in entry.detail and "d_ff=64 (dff)" in entry.detail
    assert facts_of(src.replace("    dff: int = 64\n", "")).run_context.get("params") is None


def test_params_estimate_takes_hidden_dim_beside_another_width_for_the_mlp():
    """`embedding_dim=768, hidden_dim=3072` (equinox's ViT ports): the model is 768 wide
    and hidden_dim is its MLP; alone, hidden_dim is the width."""
    src = LINEN_HEAD + (
        "class ViT(nn.Module):\n    num_layers: int = 12\n    embedding_dim: int = 768\n    hidden_dim: int = 3072\n"
        "    @nn.compact\n    def __call__(self, x):\n        return nn.SelfAttention(12)(x)\n\nViT()\n"
    )
    entry = facts_of(src).run_context.get("params")
    assert entry.value == 12 * (4 * 768**2 + 2 * 768 * 3072)
    assert "d=768 (embedding_dim), d_ff=3072 (hidden_dim)" in entry.detail
    alone = facts_of(src.replace("    embedding_dim: int = 768\n", "").replace("3072", "256")).run_context.get("params")
    assert alone.value == 12 * (4 * 256**2 + 2 * 256 * 4 * 256) and "d=256 (hidden_dim)" in alone.detail


def test_params_estimate_reads_n_embed_last():
    """`n_embed` is a nanoGPT port's width; beside another width name (a VQ-GAN's
    `embed_dim`) it is that config's codebook size, so the other name wins."""
    src = LINEN_HEAD + (
        "class Gpt(nn.Module):\n    n_layer: int = 4\n    n_embed: int = 64\n"
        "    @nn.compact\n    def __call__(self, x):\n        return nn.SelfAttention(4)(x)\n\nGpt()\n"
    )
    entry = facts_of(src).run_context.get("params")
    assert entry.value == 4 * (4 * 64**2 + 2 * 64 * 4 * 64) and "d=64 (n_embed)" in entry.detail
    codebook = src.replace("    n_embed: int = 64\n", "    n_embed: int = 16384\n    embed_dim: int = 256\n")
    entry = facts_of(codebook).run_context.get("params")
    assert entry.value == 4 * (4 * 256**2 + 2 * 256 * 4 * 256) and "d=256 (embed_dim)" in entry.detail


def test_params_estimate_reads_nnx_widths_num_features_and_num_hidden():
    """nnx layers take their width as `num_features`; `num_hidden` is the MLP's. Another
    width name beside `num_features` (a tabular model's input count) wins."""
    src = LINEN_HEAD + (
        "class Rec(nn.Module):\n    num_layers: int = 2\n    num_features: int = 50\n    num_hidden: int = 100\n"
        "    @nn.compact\n    def __call__(self, x):\n        return nn.SelfAttention(1)(x)\n\nRec()\n"
    )
    entry = facts_of(src).run_context.get("params")
    assert entry.value == 2 * (4 * 50**2 + 2 * 50 * 100) and "d_ff=100 (num_hidden)" in entry.detail
    tabular = src.replace("    num_features: int = 50\n", "    num_features: int = 7\n    d_model: int = 128\n")
    assert "d=128 (d_model)" in facts_of(tabular).run_context.get("params").detail



def test_params_estimate_reads_a_constructors_positional_arguments_as_its_fields_in_order():
    """`Vit(7, 48, 3)` passes patch, width and depth by position: the flax Module's
    annotated fields in declared order; a plain class attribute is no field."""
    src = LINEN_HEAD + (
        "class Vit(nn.Module):\n    patch: int\n    scale = 2.0\n    width: int\n    depth: int\n"
        "    @nn.compact\n    def __call__(self, x):\n        return nn.SelfAttention(4)(x)\n\nVit(7, 48, 3)\n"
    )
    entry = facts_of(src).run_context.get("params")
    assert entry.value == 3 * (4 * 48**2 + 2 * 48 * 4 * 48) and "L=3 (depth), d=48 (width)" in entry.detail
    keywords = src.replace("Vit(7, 48, 3)", "Vit(7, depth=3, width=48)")
    assert facts_of(keywords).run_context.get("params").value == entry.value


# ---------------------------------------------------------------------------
# Config sources, in the file and across files


def test_absl_flags_and_holders():
    src = STEP + (
        "from absl import flags\nFLAGS = flags.FLAGS\nflags.DEFINE_integer('num_train_steps', 4000, 'steps')\n"
        "_BATCH = flags.DEFINE_integer('global_batch_size', 2048, 'batch')\n"
        "def main(_):\n    b = _BATCH.value\n    for i in range(FLAGS.num_train_steps):\n        state = train_step(state, b)\n"
    )
    f = facts_of(src)
    steps = f.run_context.get("steps")
    assert steps.value == 4000 and steps.confidence == "medium"
    assert value(f, "batch_global") == 2048


def test_argparse_defaults_through_a_helper():
    src = STEP + (
        "import argparse\n\ndef get_args():\n    p = argparse.ArgumentParser()\n"
        "    p.add_argument('--max-steps', type=int, default=3000)\n    p.add_argument('--per-device-batch-size', type=int, default=32)\n"
        "    return p.parse_args()\n\nargs = get_args()\nfor i in range(args.max_steps):\n    state = train_step(state, args.per_device_batch_size)\n"
    )
    f = facts_of(src)
    assert value(f, "steps") == 3000 and value(f, "batch_per_device") == 32


@pytest.mark.parametrize("declared, read_as", [
    ("@click.option('--max_steps', default=3000)", "config.max_steps"),
    ("@click.option('-s', '--max-steps', default=3000)", "config.max_steps"),
    ("@click.option('--steps', 'max_steps', default=3000)", "config.max_steps"),
])
def test_click_defaults_through_wandb_config(declared, read_as):
    """Options declared with click and read back through `wandb.config` (the command's
    kwargs handed to `wandb.init(config=...)`) are read as their defaults, under the
    name click gives the parameter: an explicit name, else the longest option."""
    src = STEP + (
        "import click\nimport wandb\n\n@click.command()\n" + declared + "\n"
        "def main(**kwargs):\n    wandb.init(config=kwargs)\n    config = wandb.config\n"
        f"    for i in range({read_as}):\n        state = train_step(state)\n"
    )
    entry = facts_of(src).run_context.get("steps")
    assert entry.value == 3000 and entry.confidence == "medium"


def test_click_option_without_default_is_not_read():
    src = STEP + (
        "import click\nimport wandb\n\n@click.command()\n@click.option('--max_steps', required=True)\n"
        "def main(**kwargs):\n    wandb.init(config=kwargs)\n    config = wandb.config\n"
        "    for i in range(config.max_steps):\n        state = train_step(state)\n"
    )
    assert value(facts_of(src), "steps") is None


@pytest.mark.parametrize("wrap, through_loop", [
    ("cast(Args, {})", True),
    ("typing.cast('Args', {})", True),
    ("keep(Args, {})", False),  # a function of the file's own, not typing's no-op
])
def test_argparse_defaults_through_typing_cast(wrap, through_loop):
    """`args = cast(Args, parser.parse_args())` is the parsed namespace: typing.cast
    returns its second argument unchanged, so the loop's bound reads the flag's default
    (without it only the flag's name says it is the run length)."""
    src = STEP + (
        "import argparse\nimport typing\nfrom typing import cast\n\ndef keep(kind, value):\n    return None\n\n"
        "p = argparse.ArgumentParser()\np.add_argument('--max-steps', type=int, default=3000)\n"
        f"args = {wrap.format('p.parse_args()')}\nfor i in range(args.max_steps):\n    state = train_step(state)\n"
    )
    entry = facts_of(src).run_context.get("steps")
    assert entry.value == 3000 and entry.detail.startswith("training loop range(args.max_steps)") == through_loop


def test_environment_defaults_are_launch_defaults():
    """`int(os.environ.get("NUM_STEPS", "20"))` is read like an argparse default: the
    value a plain launch runs with, which a launch may override (medium confidence)."""
    src = STEP + (
        "import os\n\nNUM_STEPS = int(os.environ.get('NUM_STEPS', '20'))\nBATCH = int(os.getenv('BATCH', default='64'))\n"
        "for i in range(NUM_STEPS):\n    state = train_step(state, BATCH)\n"
    )
    f = facts_of(src)
    steps = f.run_context.get("steps")
    assert steps.value == 20 and steps.confidence == "medium"
    assert "default of the NUM_STEPS environment variable" in steps.detail
    assert value(f, "batch_per_device") == 64
    ev = project_evaluate.ConfigEvaluator(f)
    scope = f.raw.module_scope
    for text in ("os.environ.get('NUM_STEPS')", "int(os.environ.get('X', 'many'))", "os.environ['NUM_STEPS']",
                 "float(os.getenv('LR', 'nan'))"):
        assert isinstance(ev.eval(cst.parse_expression(text), scope), Unknown), text
    assert ev.eval(cst.parse_expression("float(os.getenv('LR', '3e-4'))"), scope).value == 3e-4


def test_dataclass_defaults_overrides_and_annotations():
    src = STEP + (
        "import dataclasses\n\n@dataclasses.dataclass\nclass Opt:\n    total_steps: int = 100\n\n"
        "@dataclasses.dataclass\nclass Cfg:\n    batch_size: int = 64\n    num_steps: int = 500\n    opt: Opt = dataclasses.field(default_factory=Opt)\n\n"
        "def run(cfg: Cfg):\n    for i in range(cfg.num_steps):\n        state = train_step(state, cfg.batch_size)\n"
    )
    f = facts_of(src)
    steps = f.run_context.get("steps")
    assert steps.value == 500 and steps.confidence == "medium"  # a parameter: callers may pass another Cfg
    src2 = src.replace("def run(cfg: Cfg):", "cfg = Cfg(num_steps=900)\nif True:")
    assert value(facts_of(src2), "steps") == 900
    ev = project_evaluate.ConfigEvaluator(facts_of(src))
    scope = next(s for s in ev.facts.raw.scopes if s.name == "run")
    found = ev.eval(cst.parse_expression("cfg.opt.total_steps"), scope)
    assert found.value == 100


def test_ml_collections_configs_beside_with_explicit_link(tmp_path):
    f = project_facts(tmp_path, {
        "configs/default.py": """\
            import ml_collections

            def get_config():
                config = ml_collections.ConfigDict()
                config.num_train_steps = 100_000
                config.warmup_steps = int(0.02 * config.num_train_steps)
                config.model = ml_collections.ConfigDict({"num_layers": 2})
                return config
            """,
        "configs/big.py": """\
            from configs import default

            def get_config():
                config = default.get_config()
                config.num_train_steps = 400_000
                return config
            """,
        "train.py": STEP + textwrap.dedent("""\
            from ml_collections import config_flags
            _CONFIG = config_flags.DEFINE_config_file("config", "configs/default.py")

            def train(config):
                for step in range(config.num_train_steps):
                    state = train_step(state, config.model.num_layers)
            """),
    })
    steps = f.run_context.get("steps")
    assert steps.value == 100_000 and steps.confidence == "medium"
    assert steps.location == "configs/default.py:5"  # relative to the project root, never absolute
    ev = project_evaluate.ConfigEvaluator(f)
    module = project_evaluate.config_of(f.project.load(str(tmp_path / "configs" / "big.py")), f.project)
    assert module.ml[("num_train_steps",)].value == 400_000 and module.ml[("warmup_steps",)].value == 2000  # base config replayed
    assert module.ml[("model", "num_layers")].value == 2
    assert ev.eval(cst.parse_expression("config.warmup_steps"), f.raw.module_scope)  # resolved via the explicit link


def test_ml_collections_configs_that_disagree_are_low_confidence(tmp_path):
    cfg = "import ml_collections\n\ndef get_config():\n    config = ml_collections.ConfigDict()\n    config.num_train_steps = {n}\n    return config\n"
    f = project_facts(tmp_path, {
        "configs/a.py": cfg.format(n=1000),
        "configs/b.py": cfg.format(n=2000),
        "train.py": STEP + "def train(config):\n    for s in range(config.num_train_steps):\n        state = train_step(state, 1)\n",
    })
    assert f.run_context.get("steps") is None
    entry = f.run_context.entry("steps")
    assert entry.confidence == "low" and "disagree" in entry.detail


# ---------------------------------------------------------------------------
# Bounds: read, never import; only project files; size and count limits; cached; lazy


def test_config_modules_are_read_not_executed(tmp_path):
    marker = tmp_path / "executed.txt"
    f = project_facts(tmp_path, {
        "settings.py": f"open({str(marker)!r}, 'w').write('ran')\nraise SystemExit(3)\nNUM_STEPS = 4242\n",
        "train.py": STEP + "import settings\nfor i in range(settings.NUM_STEPS):\n    state = train_step(state, 1)\n",
    })
    assert value(f, "steps") == 4242
    assert not marker.exists()


def test_only_files_inside_the_project_root_are_read(tmp_path):
    outside = tmp_path / "elsewhere"
    inside = tmp_path / "proj"
    write(outside, {"consts.py": "NUM_STEPS = 10\n"})
    write(inside, {"train.py": STEP + "import consts\nfor i in range(consts.NUM_STEPS):\n    state = train_step(state, 1)\n"})
    text = (inside / "train.py").read_text()
    run = project_files.ProjectFiles()
    f = ModuleFacts(cst.parse_module(text), str(inside / "train.py"), root=str(inside), text=text, project_files=run)
    import sys

    sys.path.insert(0, str(outside))  # even when importable, it is not a project file
    try:
        assert f.run_context.get("steps") is None
    finally:
        sys.path.remove(str(outside))
    assert run.reads == 0


def test_size_and_count_limits(tmp_path, monkeypatch):
    monkeypatch.setattr(project_files, "MAX_FILE_BYTES", 200)
    f = project_facts(tmp_path, {
        "big.py": "NUM_STEPS = 10\n" + "# padding\n" * 100,
        "train.py": STEP + "import big\nfor i in range(big.NUM_STEPS):\n    state = train_step(state, 1)\n",
    })
    assert f.run_context.get("steps") is None
    monkeypatch.setattr(project_files, "MAX_FILE_BYTES", 256 * 1024)
    files = {f"m{i}.py": "class Thing:\n    pass\n" for i in range(40)}
    files["train.py"] = "import optax\n" + "".join(f"from m{i} import Thing as T{i}\nT{i}()\n" for i in range(40))
    run = project_files.ProjectFiles()
    f = project_facts(tmp_path / "many", files, project_files=run)
    f.run_context.entry("arch")
    assert run.reads <= project_files.MAX_FILES_PER_FILE


def test_reads_are_cached_per_run_and_cleared(tmp_path, monkeypatch):
    files = {
        "settings.py": "NUM_STEPS = 77\n",
        "a.py": STEP + "import settings\nfor i in range(settings.NUM_STEPS):\n    state = train_step(state, 1)\n",
        "b.py": STEP + "import settings\nfor i in range(settings.NUM_STEPS):\n    state = train_step(state, 2)\n",
    }
    write(tmp_path, files)
    run = project_files.ProjectFiles()  # what one run shares between its files
    for name in ("a.py", "b.py"):
        text = (tmp_path / name).read_text()
        f = ModuleFacts(cst.parse_module(text), str(tmp_path / name), root=str(tmp_path), text=text, project_files=run)
        assert value(f, "steps") == 77
    assert run.reads == 1 and run.parses == 1
    # The next run starts empty: nothing outlives the run that read it.
    fresh = project_files.ProjectFiles()
    text = (tmp_path / "a.py").read_text()
    f = ModuleFacts(cst.parse_module(text), str(tmp_path / "a.py"), root=str(tmp_path), text=text, project_files=fresh)
    assert value(f, "steps") == 77 and fresh.reads == 1
    # api.run reads the project file once for two scripts whose rules need the steps.
    script = (
        "import optax\nimport settings\nschedule = optax.cosine_decay_schedule(1e-3, decay_steps=10)\n"
        "tx = optax.adam(schedule)\nfor step in range(settings.NUM_STEPS):\n    updates, opt_state = tx.update(grads, opt_state)\n"
    )
    write(tmp_path, {"c.py": script, "d.py": script})
    reads = []
    real = project_files._read_text
    monkeypatch.setattr(project_files, "_read_text", lambda path: reads.append(path) or real(path))
    api.run([tmp_path / "c.py", tmp_path / "d.py"], load_settings(start=tmp_path), api.RunOptions(jobs=1))
    assert [os.path.basename(p) for p in reads] == ["settings.py"]


def _check_all(f: ModuleFacts, codes) -> None:
    from optax_lint.core.catalogue import load_catalogue
    from optax_lint.rules import registry
    from optax_lint.rules.base import Context
    from optax_lint.syntax.positions import Positions

    for code in sorted(codes):
        registry.rule_class(code)().check(Context(f, load_catalogue()[code], {}, Positions(f.module)))


def test_context_is_lazy_on_the_lint_path(tmp_path):
    """A rule asks for context only when it has something to judge, and cross-file reads
    happen only for a field the file itself does not settle."""
    codes = {"OPX201", "OPX202", "OPX203", "OPX204", "OPX205", "OPX206"}
    write(tmp_path, {"settings.py": "NUM_STEPS = 1\nBATCH = 2\n"})
    model_only = LINEN_HEAD + "import settings\nclass M(nn.Module):\n    @nn.compact\n    def __call__(self, x):\n        return nn.Dense(settings.BATCH)(x)\n"
    run = project_files.ProjectFiles()
    f = ModuleFacts(cst.parse_module(model_only), str(tmp_path / "m.py"), root=str(tmp_path), text=model_only, project_files=run)
    _check_all(f, codes)
    assert "run_context" not in f.__dict__
    # Clipped at 1.0, decayed at 0.1, no large batch: only OPX204 asks (fine_tune, read in-file).
    clipped = "import optax\nimport settings\ntx = optax.chain(optax.clip_by_global_norm(1.0), optax.lamb(1e-3, weight_decay=0.1))\n"
    f = ModuleFacts(cst.parse_module(clipped), str(tmp_path / "t.py"), root=str(tmp_path), text=clipped, project_files=run)
    _check_all(f, codes)
    assert set(f.run_context.values) <= {"fine_tune"}
    assert run.reads == 0
    findings, internal = engine.run_rules(
        cst.parse_module(clipped), clipped, str(tmp_path / "t.py"), codes, {}, root=str(tmp_path), project_files=run
    )
    assert findings == [] and internal == 0 and run.reads == 0


def test_not_analysable_chains_are_listed():
    from optax_lint.facts.context.multisteps import not_analysable

    f = facts_of("import optax\nimport operator\ntx = getattr(optax, config.optimizer)(1e-3)\nt2 = operator.attrgetter(name)(optax)(1e-3)\nok = getattr(optax, 'adam')(1e-3)\n")
    texts = [text for _, text in not_analysable(f)]
    assert texts == [
        "optimizer chosen from a config string: getattr(optax, config.optimizer)",
        "optimizer chosen from a config string: operator.attrgetter(name)(optax)",
    ]


def test_opx201_hand_clipping_counts_only_on_gradients():
    base = LINEN_HEAD + (
        "class M(nn.Module):\n    @nn.compact\n    def __call__(self, x):\n        for _ in range(4):\n            x = nn.SelfAttention(2)(x)\n        return x\n\nmodel = M()\n"
        "tx = optax.adamw(3e-4)\n"
        "for batch in batches:\n    updates, opt_state = tx.update(grads, opt_state, params)\n"
    )
    from optax_lint.engine.lint import lint_text

    def codes(src):
        return [f.code for f in lint_text(src, "t.py", {"OPX201"}).findings]

    assert codes(base) == ["OPX201"]
    assert codes(base + "x = jnp.clip(images, 0.0, 1.0)\n") == ["OPX201"]  # data, not gradients
    assert codes(base + "grads = jax.tree.map(lambda g: jnp.clip(g, -1.0, 1.0), grads)\n") == []
    assert codes(base + "grads = clip_grads(g, 1.0)\n") == []


def test_only_adapters_train_after_a_loraify_helper():
    """penzai's LoRA recipe: the pretrained model frozen, then `loraify_*` swaps its
    linear layers for adapters; only the adapters train."""
    from optax_lint.facts.context.adapters import adapters_only

    src = "import optax\nfrozen = freeze_params(model)\nlora_model = loraify_linears_in_selection(frozen, rank=4)\ntx = optax.adamw(5e-5)\n"
    assert adapters_only(facts_of(src)) is not None
    assert adapters_only(facts_of("import optax\nmodel = build_model()\ntx = optax.adamw(5e-5)\n")) is None


def test_arch_unknown_when_a_file_trains_several_models():
    """A notebook that trains an MLP with adam, then a Transformer with adamw: the
    Transformer's layers say nothing about the MLP's optimizer, so the file-wide
    architecture is unknown (and --show-context says why); one model under several
    optimizers (a sweep) is still one model."""
    model = LINEN_HEAD + "class LM(nn.Module):\n    @nn.compact\n    def __call__(self, x):\n        return nn.SelfAttention(2)(x)\n\n"
    two = model + (
        "mlp = build_mlp()\nlm = LM()\n"
        "t1 = Trainer.build(model=mlp, optimizer_def=optax.adam(0.1))\n"
        "t2 = Trainer.build(model=lm, optimizer_def=optax.adamw(5e-5))\n"
    )
    f = facts_of(two)
    assert f.run_context.get("arch") is None
    assert "`lm`, `mlp`" in f.run_context.note("arch")
    sweep = model + (
        "lm = LM()\nfor lr in (1e-4, 3e-4):\n"
        "    t = Trainer.build(model=lm, optimizer_def=optax.adamw(lr))\n"
        "tx = optax.adam(1e-3)\nt = Trainer.build(model=lm, optimizer_def=tx)\n"
    )
    assert value(facts_of(sweep), "arch") == "transformer"
    cfg = "import optax\nfrom proj import LlamalikeTransformerConfig\ncfg = LlamalikeTransformerConfig(8)\n"
    assert facts_of(cfg).run_context.get("arch") is None


def test_imported_classes_that_cannot_hold_layers_are_not_parsed(tmp_path):
    """Reading a project module costs a libcst parse (~50x the read): a module whose text
    defines the class but names no layer and no model-like class is judged from its text,
    with the same answer the parse would give; so is a helper module without the
    function."""
    files = project_files.ProjectFiles()
    f = project_facts(tmp_path, {
        "rl_types.py": "from typing import NamedTuple\nclass Transition(NamedTuple):\n    obs: object\n    reward: float\n",
        "models/__init__.py": "",
        "models/lm.py": LM_MODEL,
        "train.py": "import optax\nfrom rl_types import Transition\nfrom models.lm import CausalLM\nmodel = CausalLM()\nt = Transition(0, 1.0)\ntx = optax.adamw(1e-4)\n",
    }, project_files=files)
    assert value(f, "arch") == "transformer"
    assert files.parses == 1  # models/lm.py only


def test_a_run_probes_a_path_once_and_the_language_server_every_time(tmp_path):
    # One run answers "is it a file?" once per path; the language server lives across
    # edits, so a module created between two requests is found by the second one.
    files = {
        "train.py": STEP + "import settings\nfor i in range(settings.NUM_STEPS):\n    state = train_step(state, 1)\n",
    }
    write(tmp_path, files)
    text = (tmp_path / "train.py").read_text()

    def steps(run):
        f = ModuleFacts(cst.parse_module(text), str(tmp_path / "train.py"), root=str(tmp_path), text=text, project_files=run)
        return value(f, "steps")

    batch, server = project_files.ProjectFiles(), project_files.ProjectFiles(remember_probes=False)
    assert steps(batch) is None and steps(server) is None
    write(tmp_path, {"settings.py": "NUM_STEPS = 88\n"})
    assert steps(batch) is None  # the run's answer stands for the run
    assert steps(server) == 88
    assert steps(project_files.ProjectFiles()) == 88  # the next run looks again


def test_a_parameter_takes_the_value_every_call_in_the_module_passes():
    train = "def train(training_steps, batch_size=32):\n    for i in range(training_steps):\n        state = train_step(state, batch_size)\n"
    one_call = STEP + train + "\ndef main():\n    train(training_steps=100)\n"
    steps = facts_of(one_call).run_context.get("steps")
    assert steps.value == 100 and steps.confidence == "medium"
    assert value(facts_of(STEP + train + "\ntrain(250)\ntrain(250)\n"), "steps") == 250  # positional, calls agree
    for unknown in (
        "\ntrain(100)\ntrain(200)\n",  # the calls disagree
        "\ntrain(**settings)\n",  # spread keywords may hold it
        "\n",  # no call in this module: imported and called elsewhere
    ):
        assert value(facts_of(STEP + train + unknown), "steps") is None, unknown
    # a method's callers go through self.method(...): not followed
    method = STEP + "class T:\n    def train(self, n):\n        for i in range(n):\n            state = train_step(state, 1)\n\nT().train(100)\n"
    assert value(facts_of(method), "steps") is None


def test_a_default_no_call_in_the_module_passes_is_what_the_module_runs():
    """`def train(n_steps=3000)` called as `train()`: the module runs 3000 steps (medium);
    with no call here the default is only a guess (low, not used by the rules)."""
    train = "def train(key, n_steps=3000):\n    for i in range(n_steps):\n        state = train_step(state, key)\n"
    steps = facts_of(STEP + train + "\ntrain(0)\ntrain(key=1)\n").run_context.get("steps")
    assert steps.value == 3000 and steps.confidence == "medium" and "which no call of train() here passes" in steps.detail
    assert value(facts_of(STEP + train), "steps") is None  # nothing here calls it
    assert value(facts_of(STEP + train + "\ntrain(0)\ntrain(0, n_steps=10)\n"), "steps") is None  # one call passes it
    assert value(facts_of(STEP + train + "\ntrain(0, **extra)\n"), "steps") is None  # spread keywords may hold it


def test_an_init_parameter_takes_what_the_instantiations_of_its_class_pass():
    """`__init__`'s callers are the calls of its class: `Cfg()` keeps the default (medium),
    `Cfg(num_layers=6)` passes 6; another method's callers are still not followed."""
    cfg = (
        "from transformers import FlaxT5ForConditionalGeneration, T5Config\n\n"
        "class Cfg(T5Config):\n"
        "    def __init__(self, vocab_size=32000, d_model=128, d_ff=256, num_layers=2, **kwargs):\n"
        "        super().__init__(vocab_size=vocab_size, d_model=d_model, d_ff=d_ff, num_layers=num_layers, **kwargs)\n\n"
    )
    use = "model = FlaxT5ForConditionalGeneration(config={call})\n"
    kept = facts_of(STEP + cfg + use.format(call="Cfg()")).run_context.get("params")
    assert kept.confidence == "medium" and kept.non_embedding == 2 * (4 * 128**2 + 2 * 128 * 256)
    passed = facts_of(STEP + cfg + use.format(call="Cfg(num_layers=6)")).run_context.get("params")
    assert passed.non_embedding == 6 * (4 * 128**2 + 2 * 128 * 256)
    positional = facts_of(STEP + cfg + use.format(call="Cfg(32000, 256)")).run_context.get("params")
    assert positional.non_embedding == 2 * (4 * 256**2 + 2 * 256 * 256)  # self is not a position
    # no instantiation here: the defaults are only a guess (low, not used by the rules)
    nowhere = facts_of(STEP + cfg + use.format(call="load_config()"))
    assert nowhere.run_context.get("arch").value == "transformer" and nowhere.run_context.get("params") is None
    assert facts_of(STEP + cfg + use.format(call="Cfg(**overrides)")).run_context.get("params") is None


def test_a_config_class_init_defaults_size_the_model_across_modules(tmp_path):
    """A config module's `T5Config` subclass keeps its sizes as `__init__` defaults; the
    training file imports and builds it: the defaults size the model (medium). A default
    the `__init__` neither keeps nor hands on is not a size."""
    cfg = (
        "from transformers import T5Config\n\n"
        "class TinyConfig(T5Config):\n"
        "    def __init__(self, vocab_size=32000, d_model=128, d_ff=256, num_layers=2, unused_layers=40, **kwargs):\n"
        "        self.note = 'tiny'\n"
        "        super().__init__(vocab_size=vocab_size, d_model=d_model, d_ff=d_ff, num_layers=num_layers, **kwargs)\n"
    )
    train = STEP + (
        "from transformers import FlaxT5ForConditionalGeneration\nfrom tiny_config import TinyConfig\n\n"
        "model = FlaxT5ForConditionalGeneration(config=TinyConfig())\n"
    )
    entry = project_facts(tmp_path, {"tiny_config.py": cfg, "train.py": train}).run_context.get("params")
    assert entry.confidence == "medium" and entry.non_embedding == 2 * (4 * 128**2 + 2 * 128 * 256)
    assert "tiny_config.py" in entry.location
    hidden = cfg.replace("num_layers=num_layers, ", "")
    assert project_facts(tmp_path / "h", {"tiny_config.py": hidden, "train.py": train}).run_context.get("params") is None


def test_a_model_factory_sizes_the_model_through_the_callers_arguments(tmp_path):
    """`model = get_model(args)`: the constructor the factory calls in the branch the
    caller's `args` take, its keywords read where the caller passes `args` (argparse
    defaults); a depth given as several num_*_blocks counts is their sum."""
    blocks = (
        "import flax.linen as nn\n\n"
        "class Net(nn.Module):\n    num_enc_blocks: int\n    num_mix_blocks: int\n    dim: int\n"
        "    @nn.compact\n    def __call__(self, x):\n        return nn.SelfAttention(4)(x)\n"
    )
    factory = (
        "from blocks import Net\n\n"
        "def get_model(args):\n"
        "    if args.size == 'small':\n"
        "        return Net(num_enc_blocks=args.enc, num_mix_blocks=args.mix, dim=args.width)\n"
        "    return Net(num_enc_blocks=12, num_mix_blocks=12, dim=1024)\n"
    )
    train = STEP + (
        "import argparse\nfrom factory import get_model\n\n"
        "def main(args):\n    model = get_model(args)\n"
        "    for batch in range(10):\n        state = train_step(state, batch)\n\n"
        "if __name__ == '__main__':\n    p = argparse.ArgumentParser()\n"
        "    p.add_argument('--size', default='small')\n    p.add_argument('--enc', type=int, default=1)\n"
        "    p.add_argument('--mix', type=int, default=2)\n    p.add_argument('--width', type=int, default=64)\n"
        "    main(p.parse_args())\n"
    )
    files = {"blocks.py": blocks, "factory.py": factory, "train.py": train}
    entry = project_facts(tmp_path / "small", files).run_context.get("params")
    assert entry.value == 3 * (4 * 64**2 + 2 * 64 * 4 * 64) and entry.confidence == "medium"
    assert "L=3 (num_enc_blocks + num_mix_blocks)" in entry.detail and "d=64 (dim)" in entry.detail
    big = dict(files, **{"train.py": train.replace("default='small'", "default='large'")})
    assert project_facts(tmp_path / "big", big).run_context.get("params").value == 24 * (4 * 1024**2 + 2 * 1024 * 4 * 1024)


def test_a_parameters_attribute_is_read_on_the_namespace_the_callers_pass():
    """`args.max_steps` inside `train(args)`, where the module passes an
    argparse.Namespace built from keywords: the keyword's value, at medium confidence."""
    train = "def train(args):\n    for i in range(args.max_steps):\n        state = train_step(state, args.batch)\n"
    launch = "\nimport argparse\nif __name__ == '__main__':\n    args = argparse.Namespace(max_steps=3000, batch=16, seed=0)\n    train(args)\n"
    f = facts_of(STEP + train + launch)
    steps = f.run_context.get("steps")
    assert steps.value == 3000 and steps.confidence == "medium"
    assert value(f, "batch_per_device") == 16
    inline = "\nfrom types import SimpleNamespace\ntrain(SimpleNamespace(max_steps=500, batch=8))\n"
    assert value(facts_of(STEP + train + inline), "steps") == 500
    for unknown in (
        launch + "    args.max_steps = 10\n",  # set again after it is built
        launch + "\ndef shorten():\n    args.max_steps = 10\n",  # set again in a function
        launch.replace("max_steps=3000, ", ""),  # not given to the namespace
        launch + "    train(argparse.Namespace(max_steps=20, batch=16))\n",  # two calls disagree
        launch.replace("argparse.Namespace", "make_args"),  # not a namespace
    ):
        assert value(facts_of(STEP + train + unknown), "steps") is None, unknown


_FACTORY = {
    "models/gnn.py": LINEN_HEAD + """
class MessagePassing(nn.Module):
    @nn.compact
    def __call__(self, nodes):
        return nn.Dense(64)(jax.nn.relu(nn.Dense(64)(nodes)))
""",
    "models/attn.py": LINEN_HEAD + """
class GraphTransformer(nn.Module):
    @nn.compact
    def __call__(self, nodes):
        return nn.SelfAttention(num_heads=4)(nodes)
""",
    "utils.py": """
def get_model(args):
    if args.model_name == "gnn" and args.dataset == "qm9":
        from models.gnn import MessagePassing
        model = MessagePassing()
    elif args.model_name == "transformer":
        from models.attn import GraphTransformer
        model = GraphTransformer()
    else:
        raise ValueError(args.model_name)
    return model
""",
    "train.py": LINEN_HEAD + """
import argparse
from utils import get_model

parser = argparse.ArgumentParser()
parser.add_argument("--model_name", default="{default}")
parser.add_argument("--dataset", default="qm9")
args = parser.parse_args()
model = get_model(args)
params = model.init(jax.random.PRNGKey(0), jnp.ones((8, 16)))
tx = optax.adam(1e-3)
opt_state = tx.init(params)
for batch in range(1000):
    grads = jax.grad(lambda p: model.apply(p, jnp.ones((8, 16))).sum())(params)
    updates, opt_state = tx.update(grads, opt_state)
    params = optax.apply_updates(params, updates)
""",
}


@pytest.mark.parametrize("default, arch", [("gnn", "mlp"), ("transformer", "transformer"), (None, None)])
def test_a_model_factory_builds_the_branch_its_caller_picks(tmp_path: Path, default, arch) -> None:
    """`get_model(args)` builds a GNN or a Transformer by `args.model_name`: the
    argparse default the caller's args holds picks the branch. Without a value to read
    (no such option) both branches stay, and two architectures make the field unknown,
    with a note that says why."""
    files = dict(_FACTORY)
    train = files["train.py"]
    if default is None:
        train = train.replace('parser.add_argument("--model_name", default="{default}")\n', "")
    files["train.py"] = train.replace("{default}", default or "")
    f = project_facts(tmp_path, files)
    context = f.run_context.get("arch")
    assert (context.value if context is not None else None) == arch
    if arch is None:
        assert "builds one of several models (MessagePassing, GraphTransformer)" in f.run_context.notes["arch"]


def test_a_model_factory_reads_its_else_arm(tmp_path: Path) -> None:
    """`if args.model_name == "transformer": ... else: ...` with the caller's default
    "gnn": the else arm is the one built (its statements sit in the `if`'s else block)."""
    files = dict(_FACTORY)
    files["utils.py"] = """
def get_model(args):
    if args.model_name == "transformer":
        from models.attn import GraphTransformer
        model = GraphTransformer()
    else:
        from models.gnn import MessagePassing
        model = MessagePassing()
    return model
"""
    files["train.py"] = files["train.py"].replace("{default}", "gnn")
    f = project_facts(tmp_path, files)
    assert f.run_context.get("arch").value == "mlp"


_SWEEP = """
import jax
import optax

tx = optax.adam(1e-3)


@jax.jit
def train_step(params, opt_state, batch):
    grads = jax.grad(lambda p: (p * batch).sum())(params)
    updates, opt_state = tx.update(grads, opt_state)
    return optax.apply_updates(params, updates), opt_state


def main(init_params, batches):
    params = init_params(0)
    opt_state = tx.init(params)
    for seed in range(20):
        INIT
        for step in range(500):
            params, opt_state = train_step(params, opt_state, next(batches))
"""


@pytest.mark.parametrize(
    "init, steps",
    [
        ("params = init_params(seed); opt_state = tx.init(params)", 500),  # a fresh optimizer per seed: 20 runs of 500
        ("state = TrainState.create(apply_fn=None, params=init_params(seed), tx=tx)", 500),
        ("params = init_params(seed)", 10_000),  # the optimizer state carries on: one run of 20 x 500
    ],
    ids=["tx-init", "train-state", "params-only"],
)
def test_an_outer_loop_that_restarts_the_optimizer_runs_several_runs(init: str, steps: int) -> None:
    src = _SWEEP.replace("INIT", init)
    if "TrainState" in init:
        src = "from flax.training.train_state import TrainState\n" + src
    assert value(facts_of(src), "steps") == steps


def test_a_seed_sweep_optimizer_is_not_an_inner_optimizer() -> None:
    # the only optimizer, restarted with fresh params each seed: runs of a sweep, each trained by it
    facts = facts_of(_SWEEP.replace("INIT", "params = init_params(seed); opt_state = tx.init(params)"))
    assert len(facts.pipelines) == 1 and facts.side_pipelines == frozenset()


def test_an_activity_optimizer_inside_training_is_an_inner_optimizer() -> None:
    path = Path(__file__).resolve().parent.parent / "fixtures" / "OPX201" / "bad_predictive_coding_param_optimizer.py"
    facts = facts_of(path.read_text(encoding="utf-8"))
    inner = [p.name for p in facts.pipelines if id(p) in facts.side_pipelines]
    assert inner == ["activity_optim"]
    # the run is the loop that steps the model (N_STEPS), not N_STEPS x the inference steps
    assert value(facts, "steps") == 20_000


@pytest.mark.parametrize(
    "init, source",
    [
        ("from .network import SequenceNet\n", ".network"),
        ("from .models import (\n    Other,\n    SequenceNet,\n)\n", ".models"),
        ("from pkg.network import SequenceNet as SequenceNet\n", "pkg.network"),
        ("from .network import SequenceNet as Net\n", None),  # exported under another name
        ("from .network import SequenceNetV2\n", None),
        ("# from .network import SequenceNet\n", None),
    ],
)
def test_a_package_init_re_export_names_its_source_module(init: str, source) -> None:
    assert project_files._reexport_source(init, "SequenceNet") == source


def test_a_re_exported_model_is_read_where_it_is_defined(tmp_path) -> None:
    pkg = tmp_path / "lmlib"
    pkg.mkdir()
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'lm'\n")
    (pkg / "__init__.py").write_text("from .net import LM\n")
    (pkg / "net.py").write_text(textwrap.dedent("""
        import flax.linen as nn

        class LM(nn.Module):
            @nn.compact
            def __call__(self, x):
                for _ in range(6):
                    x = x + nn.SelfAttention(num_heads=4)(x)
                return x
    """))
    src = textwrap.dedent("""
        import jax
        import optax
        from lmlib import LM

        model = LM()
        params = model.init(jax.random.key(0), jax.numpy.zeros((1, 8, 16)))
        tx = optax.adamw(3e-4)
        opt_state = tx.init(params)
        for batch in range(50_000):
            grads = jax.grad(lambda p: model.apply(p, batch).sum())(params)
            updates, opt_state = tx.update(grads, opt_state, params)
            params = optax.apply_updates(params, updates)
    """)
    path = tmp_path / "train.py"
    path.write_text(src)
    findings = engine.lint_text(src, str(path), {"OPX201"}, root=str(tmp_path)).findings
    assert [f.code for f in findings] == ["OPX201"]
    assert "lmlib/net.py:" in findings[0].message
