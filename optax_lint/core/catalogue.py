"""The rule catalogue: `rules/*.toml`, one file per rule, the single source of truth
for codes, names, severities, messages, docs and thresholds.

In a checkout the catalogue is the top-level `rules/` folder; in a wheel it ships as
`optax_lint/_catalogue` (see pyproject's force-include).
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from optax_lint.core.diagnostics import Applicability, Severity

DOC_SECTIONS = (
    ("what_it_does", "What it does"),
    ("why_bad", "Why is this bad?"),
    ("example", "Example"),
    ("use_instead", "Use instead"),
    ("fix_safety", "Fix safety"),
    ("options", "Options"),
)

# The user-facing decision protocol every protocol rule links into (by section anchor).
PROTOCOL_DOC = "docs/protocol.md"
# Where the project is published (pyproject [project.urls]): absolute links to the rule
# docs in SARIF (helpUri) and in the editor's hover.
HOMEPAGE = "https://github.com/optax-lint/optax-lint"
RULES_DOC_URL = f"{HOMEPAGE}/blob/main/docs/rules.md"


def rule_doc_url(spec: "RuleSpec", base: str = RULES_DOC_URL) -> str:
    """The rule's section of docs/rules.md (GitHub's anchor for its heading `## name (CODE)`)."""
    heading = f"{spec.name} ({spec.code})".lower()
    return f"{base}#" + re.sub(r"[^\w\- ]", "", heading).replace(" ", "-")


def toml_parser():
    """The TOML parser, imported on first use: a run whose catalogue comes from the
    parsed bundle and that finds no config file never imports it."""
    if sys.version_info >= (3, 11):
        import tomllib as parser
    else:  # pragma: no cover
        import tomli as parser
    return parser


_OPTION_TYPES = {"int": int, "float": (int, float), "bool": bool, "str": str, "list": list}


def catalogue_dir() -> Path:
    package = Path(__file__).resolve().parent.parent
    shipped = package / "_catalogue"
    if shipped.is_dir():
        return shipped
    return package.parent / "rules"


@dataclass(frozen=True)
class RuleOption:
    name: str
    type: str
    default: Any
    doc: str
    # "protocol:warmup.min_fraction": the default is read from a data table, so a
    # threshold shared by the rules and `optax-lint recommend` is written once.
    default_from: str = ""

    def check(self, value: Any) -> bool:
        if self.type == "bool":
            return isinstance(value, bool)
        if isinstance(value, bool):
            return False
        return isinstance(value, _OPTION_TYPES[self.type])


@dataclass(frozen=True)
class RuleSpec:
    code: str
    name: str
    severity: Severity
    summary: str
    message: str  # str.format template; the rule fills in the concrete objects
    fix: Applicability | None
    fix_title: str
    default_enabled: bool
    # What the rule rests on, in the project's own words (a protocol statement or a
    # measured library behaviour). Never a reference the user cannot open.
    basis: tuple[str, ...]
    doc: dict[str, str]
    options: dict[str, RuleOption] = field(default_factory=dict)
    family: str = ""
    needs_context: tuple[str, ...] = ()
    protocol: str = ""  # anchor of the rule's section in docs/protocol.md
    # What to do, for findings that carry no fix title (a str.format template over the
    # message's arguments; fields the rule did not pass are left out of the sentence).
    help: str = ""
    # Where the engine keeps the rule silent (engine/filters.py), so policy lives here
    # and not in code. What the rule speaks about (facts/context/purpose.py):
    # "training-runs": advice about how to train, run only where the code is a training
    # run (or the user declares its run context), and info when that rests on a name
    # alone; "optimizer-code" (a defect): anywhere but a test that never steps an
    # optimizer; "any-code": everywhere (API currency, meta).
    speaks_about: str = "optimizer-code"
    # No finding in code written to fail (an assertRaises / pytest.raises block and
    # the test before it); false only for findings reported wherever they happen.
    silent_in_code_written_to_fail: bool = True
    # No finding under a version guard (`if hasattr(jax, ...)`, a `try` catching
    # AttributeError / ImportError), where code reaches for a vanished API knowingly.
    silent_in_version_guards: bool = False

    @property
    def help_doc(self) -> str:
        """The help line as documentation: message fields shown as <name>."""
        text = re.sub(r"(?<!\{)\{(\w+)\}(?!\})", r"<\1>", self.help)
        return text.replace("{{", "{").replace("}}", "}")

    @property
    def protocol_url(self) -> str:
        return f"{PROTOCOL_DOC}#{self.protocol}" if self.protocol else ""

    def render_doc(self) -> str:
        lines = [f"# {self.name} ({self.code})", "", f"Severity: {self.severity.value}"]
        fix = self.fix.value if self.fix else "none"
        lines.append(f"Fix: {fix}")
        if not self.default_enabled:
            lines.append("Enabled: no (opt in with --extend-select)")
        if self.basis:
            lines.append("Rests on: " + "; ".join(self.basis))
        if self.speaks_about == "training-runs":
            lines.append("Speaks about: training runs only (silent in tests, benchmarks, toy demos and library "
                         "building blocks unless the run context is declared; info when the training run or the "
                         "model is known by a name alone)")
        if self.protocol:
            lines.append(f"Protocol: {self.protocol_url}")
        if self.help:
            lines.append(f"What to do: {self.help_doc}")
        lines += ["", self.summary, ""]
        for key, title in DOC_SECTIONS:
            text = self.doc.get(key, "").strip()
            if text:
                lines += [f"## {title}", text, ""]
        return "\n".join(lines).rstrip() + "\n"

    def to_dict(self) -> dict:
        return {
            "code": self.code,
            "name": self.name,
            "severity": self.severity.value,
            "summary": self.summary,
            "fix": self.fix.value if self.fix else None,
            "default_enabled": self.default_enabled,
            "family": self.family,
            "basis": list(self.basis),
            "protocol": self.protocol_url or None,
            "help": self.help_doc or None,
            "options": {
                k: {"type": o.type, "default": o.default, "doc": o.doc} for k, o in self.options.items()
            },
        }


class CatalogueError(Exception):
    pass


# rules/_parsed.json (tools/gen_parsed_catalogue.py): every catalogue file parsed, under
# a hash of its text. tomllib takes ~90 ms for the catalogue, json ~3 ms: paid at every
# start-up otherwise, a third of a pre-commit run over files the prefilter rules out.
PARSED_BUNDLE = "_parsed.json"
_BUNDLE_FORMAT = 1


def _digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def render_parsed_bundle(folder: Path) -> str:
    """The bundle's text for the TOML files of `folder` (deterministic: sorted by name)."""
    files = {}
    for path in sorted(folder.glob("*.toml")):
        data = path.read_bytes()
        files[path.name] = {"blake2b": _digest(data), "data": toml_parser().loads(data.decode("utf-8"))}
    head = {"generated_by": "tools/gen_parsed_catalogue.py from rules/*.toml; do not edit", "format": _BUNDLE_FORMAT}
    return json.dumps({**head, "files": files}, ensure_ascii=False, indent=1) + "\n"


@functools.lru_cache(maxsize=1)
def _parsed_bundle() -> dict:
    try:
        bundle = json.loads((catalogue_dir() / PARSED_BUNDLE).read_bytes())
    except (OSError, ValueError):  # absent or damaged: every file is parsed from its TOML
        return {}
    if not isinstance(bundle, dict) or bundle.get("format") != _BUNDLE_FORMAT:
        return {}
    files = bundle.get("files")
    return files if isinstance(files, dict) else {}


def _read_toml(path: Path) -> dict:
    """A catalogue file, parsed: from the bundle while it holds this exact text."""
    with path.open("rb") as fh:
        data = fh.read()
    entry = _parsed_bundle().get(path.name)
    if isinstance(entry, dict) and entry.get("blake2b") == _digest(data) and isinstance(entry.get("data"), dict):
        return entry["data"]
    return toml_parser().loads(data.decode("utf-8"))


def _load_rule(path: Path) -> RuleSpec:
    data = _read_toml(path)
    try:
        options = {
            name: RuleOption(name, o["type"], _option_default(o), o.get("doc", ""), o.get("default_from", ""))
            for name, o in data.get("options", {}).items()
        }
        fix = data.get("fix", "none")
        return RuleSpec(
            code=data["code"],
            name=data["name"],
            severity=Severity(data["severity"]),
            summary=data["summary"],
            message=data["message"],
            fix=None if fix == "none" else Applicability(fix),
            fix_title=data.get("fix_title", ""),
            default_enabled=data.get("default_enabled", True),
            basis=tuple(data.get("basis", ())),
            doc=dict(data.get("doc", {})),
            options=options,
            family=data.get("family", ""),
            needs_context=tuple(data.get("needs_context", ())),
            protocol=data.get("protocol", ""),
            help=data.get("help", ""),
            speaks_about=_choice(data, "speaks_about", SPEAKS_ABOUT),
            silent_in_code_written_to_fail=_flag(data, "silent_in_code_written_to_fail", True),
            silent_in_version_guards=_flag(data, "silent_in_version_guards", False),
        )
    except (KeyError, ValueError) as exc:
        raise CatalogueError(f"{path.name}: bad rule entry: {exc}") from exc


@functools.lru_cache(maxsize=1)
def load_catalogue() -> dict[str, RuleSpec]:
    """Every rule, keyed by code, sorted by code."""
    specs = {}
    for path in sorted(catalogue_dir().glob("OPX*.toml")):
        spec = _load_rule(path)
        if spec.code != path.stem:
            raise CatalogueError(f"{path.name} declares code {spec.code}")
        specs[spec.code] = spec
    return dict(sorted(specs.items()))


SPEAKS_ABOUT = ("optimizer-code", "training-runs", "any-code")  # the first is the default


def _choice(data: dict, key: str, allowed: tuple[str, ...]) -> str:
    value = data.get(key, allowed[0])
    if value not in allowed:
        raise ValueError(f"{key} must be one of {', '.join(allowed)}, not {value!r}")
    return value


def _flag(data: dict, key: str, default: bool) -> bool:
    value = data.get(key, default)
    if not isinstance(value, bool):
        raise ValueError(f"{key} must be true or false, not {value!r}")
    return value


def _option_default(option: dict) -> Any:
    if "default_from" not in option:
        return option["default"]
    return table_value(option["default_from"])


def table_value(reference: str) -> Any:
    """`protocol:warmup.min_fraction` -> that value of rules/protocol.toml."""
    name, _, dotted = reference.partition(":")
    value: Any = load_table(name)
    try:
        for key in dotted.split("."):
            value = value[key]
    except (KeyError, TypeError):
        raise KeyError(f"{reference} is not in rules/{name}.toml") from None
    return value


def load_table(name: str) -> dict:
    """A data table from the catalogue folder, e.g. `optax_api` for rules/optax_api.toml."""
    return _load_table(name)


@functools.lru_cache(maxsize=None)
def _load_table(name: str) -> dict:
    return _read_toml(catalogue_dir() / f"{name}.toml")
