"""The raw-text prefilter (optax_lint/engine/prefilter.py): every rule family declares its
triggers, and a file none of them match is never parsed by libcst."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from optax_lint.core.catalogue import load_catalogue
from optax_lint.engine import lint as engine
from optax_lint.engine import prefilter
from optax_lint.rules import registry

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"
ALL = set(load_catalogue())
FAMILIES = sorted(set(registry.family_packages().values()))


def test_every_family_of_the_catalogue_declares_triggers() -> None:
    families = {spec.family for spec in load_catalogue().values() if spec.family != "meta"}
    assert len(FAMILIES) == len(families) > 1
    for family in FAMILIES:
        triggers = prefilter.family_triggers(family)  # raises when the package declares none
        assert triggers and all(isinstance(t, str) and t for t in triggers), family
        for trigger in triggers:
            re.compile(trigger)
        assert prefilter.family_pattern(family).search("") is None, (family, "a trigger matching nothing is no filter")


def test_codes_that_changed_family_keep_their_triggers() -> None:
    """OPX112 and OPX113 ran with the weight-decay module's trigger, "optax": their
    catalogue families (gradient-clipping, chain-order) trigger on it too."""
    for code in ("OPX112", "OPX113"):
        assert "optax" in prefilter.family_triggers(registry.family_packages()[code]), code


def test_multi_device_triggers_cover_the_parallel_tables() -> None:
    """The family spells its trigger words out (prefiltering imports no facts): they are
    still every name of the tables the multi-device facts resolve."""
    from optax_lint.facts.parallel import names as par

    triggers = set(prefilter.family_triggers(registry.family_packages()["OPX401"]))
    names = {n.rsplit(".", 1)[-1] for n in par.PMAP | par.SHARD_MAP | par.REPLICATE | par.UNREPLICATE} | set(par.COLLECTIVES)
    for name in names:
        assert rf"[._]{name}\b|\b{name}(?=[\s(),]|$)" in triggers, name


def test_prefiltering_imports_no_rule_libcst_or_facts() -> None:
    script = (
        "import sys\n"
        "from optax_lint.core.catalogue import load_catalogue\n"
        "from optax_lint.engine import prefilter\n"
        "text = 'import jax, optax, orbax\\nf = jax.pmap(g)\\nstate.opt_state\\n'\n"
        "assert prefilter.active_codes(text, set(load_catalogue()))\n"
        "print('\\n'.join(sorted(sys.modules)))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    loaded = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=ROOT, check=True).stdout.split()
    assert "libcst" not in loaded
    assert not [m for m in loaded if m.startswith("optax_lint.facts")]
    rules = {m for m in loaded if m.startswith("optax_lint.rules.")}
    assert rules <= set(FAMILIES) | {"optax_lint.rules.registry"}, rules


def test_a_family_without_triggers_is_refused(monkeypatch) -> None:
    family = registry.family_packages()["OPX101"]
    module = __import__(family, fromlist=["TRIGGERS"])
    monkeypatch.setattr(module, "TRIGGERS", ())
    with pytest.raises(KeyError, match="declares no TRIGGERS"):
        prefilter.family_triggers(family)


@pytest.mark.parametrize("code", sorted(c for c in registry.family_packages() if (FIXTURES / c).is_dir()))
def test_every_bad_fixture_triggers_its_rule_family(code: str) -> None:
    """The triggers never hide a finding the fixtures expect."""
    for bad in sorted((FIXTURES / code).glob("bad_*.py")):
        if bad.name.endswith(".fixed.py"):
            continue
        assert code in prefilter.active_codes(bad.read_text(encoding="utf-8"), ALL), bad


def test_a_file_no_family_triggers_on_is_not_parsed_by_libcst(monkeypatch) -> None:
    def no_libcst(*args, **kwargs):
        raise AssertionError("libcst parse of a file no rule can fire on")

    monkeypatch.setattr(engine, "parse", no_libcst)
    plain = "import numpy as np\n\n\ndef mean(x):\n    return np.mean(x)  # noqa: OPX101\n"
    run = engine.lint_text(plain, "plain.py", ALL)
    assert [f.code for f in run.findings] == ["OPX002"]  # the unused noqa is still reported
    monkeypatch.undo()  # a CPython syntax error is confirmed by libcst (it knows newer syntax)
    broken = "import os\ndef f(:\n"
    assert [f.code for f in engine.lint_text(broken, "broken.py", ALL).findings] == ["OPX001"]


def test_a_jax_model_without_an_optimizer_runs_only_the_families_it_triggers() -> None:
    model = "import jax\nimport flax.linen as nn\n\n\nclass MLP(nn.Module):\n    @nn.compact\n    def __call__(self, x):\n        return nn.Dense(4)(x)\n"
    assert prefilter.active_codes(model, ALL) == set()  # no optax, no pmap, no checkpoint, ...
    step = model + "\n\nstep = jax.pmap(lambda x: jax.lax.psum(x, 'i'), axis_name='i')\n"
    active = prefilter.active_codes(step, ALL)
    assert {"OPX401", "OPX402"} <= active and "OPX101" not in active


def test_api_currency_triggers_follow_its_table() -> None:
    triggers = set(prefilter.family_triggers(registry.family_packages()["OPX704"]))
    for word in ("optax", "pmean", "maps", "pjit", "device_put_replicated"):
        assert any(re.search(t, f"x = {word}(y)") for t in triggers), word
    assert not any(re.search(t, "optimizer = make()") for t in triggers if "optax" not in t)  # words, not parts
    assert "OPX704" in prefilter.active_codes("from jax.experimental.maps import xmap\n", ALL)
    assert "OPX703" in prefilter.active_codes("from flax import optim\n", ALL)


def test_selection_narrows_the_prefilter() -> None:
    text = "import jax\nf = jax.pmap(g)\n"
    assert prefilter.active_codes(text, {"OPX101"}) == set()
    assert prefilter.active_codes(text, {"OPX101", "OPX401"}) == {"OPX401"}


def test_the_fast_literal_check_never_skips_a_match() -> None:
    assert prefilter.required_literal(r"\btx\b") == "tx"
    assert prefilter.required_literal(r"\.update\(") == "update"
    assert prefilter.required_literal(r"[._]pmap\b|\bpmap(?=[\s(),]|$)") == "pmap"
    assert prefilter.required_literal(r"optax|orbax") is None  # no word common to both branches
    assert prefilter.required_literal(r"(?:optax|orbax)\.x") == "x"
    samples = ["jax.pmap(f)", "from jax import pmap as p", "tx.update(g, s)", "state.replace(params=p)",
               "from flax import optim", "x = lax.psum(y, 'i')", "eqx.filter_pmap(f)", "optax.adam(1)"]
    for family in FAMILIES:
        for trigger in prefilter.family_triggers(family):
            literal = prefilter.required_literal(trigger)
            for text in samples:
                match = re.search(trigger, text)
                if match and literal is not None:
                    assert literal in text, (trigger, literal, text)
