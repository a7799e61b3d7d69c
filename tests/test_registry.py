"""Rules are found from the catalogue (optax_lint/rules/registry.py): every code of a rule
family maps to one module, named after the rule, that defines exactly that rule class,
and a lint imports only the rules it runs."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from optax_lint.core.catalogue import load_catalogue
from optax_lint.rules import registry
from optax_lint.rules.base import Rule

ROOT = Path(__file__).resolve().parents[1]
RULES = ROOT / "optax_lint" / "rules"


def _defined_rules(module) -> list[type]:
    return [
        obj for obj in vars(module).values()
        if isinstance(obj, type) and issubclass(obj, Rule) and obj.__module__ == module.__name__ and "code" in vars(obj)
    ]


def test_every_rule_code_maps_to_one_module_that_defines_its_class() -> None:
    modules: dict[str, str] = {}
    for code, spec in load_catalogue().items():
        if spec.family == "meta":
            continue
        cls = registry.rule_class(code)
        expected = f"optax_lint.rules.{spec.family.replace('-', '_')}.{spec.name.replace('-', '_')}"
        assert cls.__module__ == expected, code
        assert issubclass(cls, Rule) and cls.code == code
        assert modules.setdefault(cls.__module__, code) == code, f"{cls.__module__} holds two rules"
        assert _defined_rules(sys.modules[cls.__module__]) == [cls], f"{cls.__module__} defines more than its rule"


def test_every_module_of_a_family_is_a_rule_or_a_helper_defining_none() -> None:
    rule_modules = {registry.rule_class(code).__module__ for code in registry.family_packages()}
    for path in sorted(RULES.glob("*/*.py")):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        module = importlib.import_module(name.removesuffix(".__init__"))
        defined = _defined_rules(module)
        assert len(defined) == (1 if name in rule_modules else 0), (name, defined)


def test_the_family_packages_are_the_catalogue_families() -> None:
    on_disk = {p.parent.name for p in RULES.glob("*/__init__.py")}
    families = {spec.family.replace("-", "_") for spec in load_catalogue().values() if spec.family != "meta"}
    assert on_disk == families


def test_meta_codes_have_no_rule_module() -> None:
    assert "OPX001" not in registry.family_packages() and "OPX900" not in registry.family_packages()
    with pytest.raises(KeyError):
        registry.rule_class("OPX900")
    assert set(registry.load({"OPX001", "OPX101"})) == {"OPX101"}


def test_a_lint_imports_only_the_rules_selected_and_triggered() -> None:
    script = (
        "import sys\n"
        "from optax_lint.engine import lint\n"
        "text = 'import jax\\nstep = jax.pmap(lambda g: g)\\n'\n"
        "lint.lint_text(text, 't.py', {'OPX001', 'OPX101', 'OPX401'})\n"
        "print('\\n'.join(sorted(sys.modules)))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    loaded = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=ROOT, check=True).stdout.split()
    rule_modules = {registry.rule_class(code).__module__ for code in registry.family_packages()}
    # OPX101 is selected but not triggered (no optax); OPX402, of OPX401's family, is not selected.
    assert {m for m in loaded if m in rule_modules} == {"optax_lint.rules.multi_device.pmap_gradients_not_averaged"}
