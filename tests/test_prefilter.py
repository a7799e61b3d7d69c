"""The raw-text prefilter (optax_lint/engine/prefilter.py): every rule family declares its
triggers, and a file none of them match is never parsed by libcst."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from optax_lint.core.catalogue import load_catalogue
from optax_lint.engine import lint as engine
from optax_lint.engine import prefilter
from optax_lint.rules import REGISTRY

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
ALL = set(load_catalogue())


def test_every_registered_rule_belongs_to_a_family_with_triggers() -> None:
    for code, rule_cls in sorted(REGISTRY.items()):
        family = prefilter.family_of(rule_cls)
        triggers = prefilter.family_triggers(family)  # raises when the module declares none
        assert triggers and all(isinstance(t, str) and t for t in triggers), (code, family)
        for trigger in triggers:
            re.compile(trigger)
        assert prefilter.family_pattern(family).search("") is None, (family, "a trigger matching nothing is no filter")


def test_a_family_without_triggers_is_refused(monkeypatch) -> None:
    family = prefilter.family_of(REGISTRY["OPX101"])
    module = __import__(family, fromlist=["TRIGGERS"])
    monkeypatch.setattr(module, "TRIGGERS", ())
    with pytest.raises(KeyError, match="declares no TRIGGERS"):
        prefilter.family_triggers(family)


@pytest.mark.parametrize("code", sorted(c for c in REGISTRY if (FIXTURES / c).is_dir()))
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
    triggers = set(prefilter.family_triggers(prefilter.family_of(REGISTRY["OPX704"])))
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
    for rule_cls in REGISTRY.values():
        for trigger in prefilter.family_triggers(prefilter.family_of(rule_cls)):
            literal = prefilter.required_literal(trigger)
            for text in samples:
                match = re.search(trigger, text)
                if match and literal is not None:
                    assert literal in text, (trigger, literal, text)
