"""Run context: what is being trained, with provenance.

`ModuleFacts.run_context` is a `RunContext`. Rules ask it for a field:

    entry = facts.run_context.get("steps")   # ContextValue | None
    steps = facts.run_context.value("steps")  # the value, or None

Fields: `arch` ("transformer" | "cnn" | "mlp" | "rnn" | "unknown"), `params`,
`steps` (optimizer updates, not micro-batches), `batch_per_device`, `batch_global`,
`devices`, `grad_accum` (the MultiSteps k) and `fine_tune` (bool).

Each value has a source, highest precedence first:
1. `cli`: `--context arch=transformer,steps=50000`;
2. `pragma`: a comment `# optax-lint: context arch=transformer steps=50_000 devices=8`;
3. `config`: `[tool.optax-lint.context]` (with `[[tool.optax-lint.context.overrides]]`
   tables whose `path` glob selects files);
4. `inferred`: read from the file and, only when a rule needs a field the file does
   not settle, from the project modules it imports and `configs/*.py` beside it
   (see infer.py and facts/project/; nothing is imported or executed).

Inference is lazy and per field: a file whose rules never ask pays nothing.
`get()` returns only values a rule may act on: declared, or inferred with high or
medium confidence. A low-confidence guess (two configs disagree, a parameter's
default that callers may override) is kept for `--show-context` (`entry()`), but
`get()` answers None, so the rule stays silent: a false positive costs more than a
miss.
"""

from __future__ import annotations

import os
import re
from typing import Any, Callable, Iterable, Optional, Union

FIELDS = ("arch", "params", "steps", "batch_per_device", "batch_global", "devices", "grad_accum", "fine_tune")
ARCHS = ("transformer", "cnn", "mlp", "rnn", "unknown")
SOURCES = ("cli", "pragma", "config", "inferred")  # highest precedence first
CONFIDENCES = ("declared", "high", "medium", "low")
USABLE = frozenset({"declared", "high", "medium"})
_RANK = {"cli": 0, "pragma": 1, "config": 2, "inferred": 3}

# Spellings accepted on the command line, in pragmas and in config.
ALIASES = {
    "architecture": "arch",
    "model": "arch",
    "num_params": "params",
    "param_count": "params",
    "parameters": "params",
    "num_steps": "steps",
    "total_steps": "steps",
    "train_steps": "steps",
    "num_train_steps": "steps",
    "batch": "batch_global",
    "global_batch": "batch_global",
    "global_batch_size": "batch_global",
    "batch_size": "batch_global",
    "per_device_batch": "batch_per_device",
    "per_device_batch_size": "batch_per_device",
    "batch_size_per_device": "batch_per_device",
    "num_devices": "devices",
    "device_count": "devices",
    "accum": "grad_accum",
    "grad_accumulation": "grad_accum",
    "gradient_accumulation": "grad_accum",
    "every_k": "grad_accum",
    "finetune": "fine_tune",
    "fine_tuning": "fine_tune",
    "finetuning": "fine_tune",
}
_ARCH_ALIASES = {
    "transformers": "transformer",
    "vit": "transformer",
    "llm": "transformer",
    "conv": "cnn",
    "convnet": "cnn",
    "resnet": "cnn",
    "lstm": "rnn",
    "gru": "rnn",
}
_SUFFIX = {"k": 10**3, "m": 10**6, "b": 10**9, "g": 10**9, "t": 10**12}
_INT_FIELDS = ("params", "steps", "batch_per_device", "batch_global", "devices", "grad_accum")


class ContextError(ValueError):
    """A declared context entry that cannot be used; `str()` is the user-facing message."""


# ---------------------------------------------------------------------------
# Values


class ContextValue:
    """One field's value and where it came from.

    `location` is "train.py:12" (inferred), "train.py:3" (pragma), "pyproject.toml"
    (config) or None (command line). It is computed on first access, because source
    positions cost more than the parse and most runs never print them.
    """

    __slots__ = ("value", "source", "_location", "_locate", "confidence", "detail", "by_name", "module", "non_embedding")

    def __init__(
        self,
        value: Any,
        source: str,
        location: Optional[str] = None,
        confidence: str = "declared",
        detail: str = "",
        *,
        locate: Optional[Callable[[], Optional[str]]] = None,
        by_name: bool = False,
        module: Any = None,
        non_embedding: Optional[int] = None,
    ) -> None:
        # `params` estimated from a config: the count outside the token-embedding table
        # (None when declared: a declared count is the whole model)
        self.non_embedding = non_embedding
        self.by_name = by_name  # inferred from a name alone (a class name), a weak signal
        self.module = module  # the ModuleFacts an inferred value was read from (the model's module for `arch`)
        self.value = value
        self.source = source
        self._location = location
        self._locate = locate
        self.confidence = confidence
        self.detail = detail

    @property
    def location(self) -> Optional[str]:
        if self._location is None and self._locate is not None:
            try:
                self._location = self._locate()
            except Exception:  # a location is decoration; never let it fail a rule
                self._location = None
            self._locate = None
        return self._location

    @property
    def usable(self) -> bool:
        return self.confidence in USABLE and self.value is not None

    @property
    def declared(self) -> bool:
        return self.source != "inferred"

    @property
    def firm(self) -> bool:
        """Declared, or read with high confidence (a literal loop bound, a `num_steps`
        constant): enough for a rule to stand down on, not only to speak on."""
        return self.confidence in ("declared", "high")

    def where(self) -> str:
        """`train.py:12`, `declared in pyproject.toml`, `declared on the command line`."""
        if self.source == "cli":
            return "declared on the command line"
        if self.source == "pragma":
            return f"declared in {self.location}" if self.location else "declared in a pragma"
        if self.source == "config":
            return f"declared in {self.location}" if self.location else "declared in config"
        return self.location or "inferred"

    def cite(self) -> str:
        """Short provenance for messages: `declared in pyproject.toml`, `inferred from models.py:31`."""
        if self.source != "inferred":
            return self.where()
        return f"inferred from {self.location}" if self.location else "inferred"

    def __repr__(self) -> str:
        return (
            f"ContextValue({self.value!r}, {self.source!r}, {self.location!r}, "
            f"{self.confidence!r}, {self.detail!r})"
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ContextValue):
            return NotImplemented
        return (self.value, self.source, self.location, self.confidence, self.detail) == (
            other.value, other.source, other.location, other.confidence, other.detail
        )

    __hash__ = None  # type: ignore[assignment]


class RunContext:
    """The run context of one file. Fields are resolved on first request."""

    def __init__(
        self,
        values: Optional[dict[str, ContextValue]] = None,
        *,
        infer: Optional[Callable[[str, "RunContext"], Optional[ContextValue]]] = None,
    ) -> None:
        self.values: dict[str, ContextValue] = dict(values or {})
        self._infer = infer
        self._resolving: set[str] = set()
        self._resolved: set[str] = set(self.values)
        self.notes: dict[str, object] = {}  # field -> why it is unknown: str, or a callable giving it (--show-context)
        self.problems: list[tuple[Optional[str], str]] = []  # (location, message): ignored pragma entries

    def entry(self, name: str) -> Optional[ContextValue]:
        """The field's value whatever its confidence (low-confidence guesses included)."""
        name = ALIASES.get(name, name)
        if name not in self._resolved and self._infer is not None and name not in self._resolving:
            self._resolving.add(name)
            try:
                found = self._infer(name, self)
            finally:
                self._resolving.discard(name)
            self._resolved.add(name)
            if found is not None:
                self.values[name] = found
        return self.values.get(name)

    def get(self, name: str) -> Optional[ContextValue]:
        """The field's value when a rule may act on it, else None (the rule stays silent)."""
        entry = self.entry(name)
        if entry is None or not entry.usable:
            return None
        if entry.value == "unknown":
            return None
        return entry

    def value(self, name: str) -> Any:
        entry = self.get(name)
        return entry.value if entry is not None else None

    def known(self, name: str) -> bool:
        return self.get(name) is not None

    def note(self, name: str) -> str:
        """Why a field is unknown (or only guessed), for --show-context."""
        note = self.notes.get(name, "")
        if callable(note):
            try:
                note = note()
            except Exception:
                note = ""
            self.notes[name] = note
        return note

    def missing(self, needs: Iterable[str]) -> list[str]:
        """The needs (`field`, or `a|b` for either) that this context does not meet."""
        out = []
        for need in needs:
            alternatives = [ALIASES.get(a.strip(), a.strip()) for a in need.split("|")]
            if not any(self.known(a) for a in alternatives):
                out.append(" or ".join(alternatives))
        return out


# ---------------------------------------------------------------------------
# Declared values: parsing and precedence


def canonical_field(name: str) -> str:
    key = name.strip().lower().replace("-", "_")
    key = ALIASES.get(key, key)
    if key not in FIELDS:
        raise ContextError(f"unknown context field {name!r} (expected one of: {', '.join(FIELDS)})")
    return key


def parse_value(field: str, raw: Any) -> Any:
    """A declared value as the field's type; ContextError with the reason otherwise."""
    if field == "arch":
        if not isinstance(raw, str):
            raise ContextError(f"arch: expected one of {', '.join(ARCHS)}, got {raw!r}")
        word = raw.strip().lower()
        word = _ARCH_ALIASES.get(word, word)
        if word not in ARCHS:
            raise ContextError(f"arch: expected one of {', '.join(ARCHS)}, got {raw!r}")
        return word
    if field == "fine_tune":
        if isinstance(raw, bool):
            return raw
        word = str(raw).strip().lower()
        if word in ("true", "yes", "1", "on", "y"):
            return True
        if word in ("false", "no", "0", "off", "n"):
            return False
        raise ContextError(f"fine_tune: expected true or false, got {raw!r}")
    if field in _INT_FIELDS:
        value = _parse_count(raw)
        if value is None or value < 1:
            raise ContextError(f"{field}: expected a positive whole number (e.g. 50_000, 5e4, 1.3B), got {raw!r}")
        return value
    raise ContextError(f"unknown context field {field!r}")  # pragma: no cover - canonical_field filters


def _parse_count(raw: Any) -> Optional[int]:
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int):
        return raw
    if isinstance(raw, float):
        return int(raw) if raw.is_integer() else None
    if not isinstance(raw, str):
        return None
    text = raw.strip().replace("_", "").replace(",", "")
    multiplier = 1
    if text and text[-1].lower() in _SUFFIX:
        multiplier = _SUFFIX[text[-1].lower()]
        text = text[:-1]
    try:
        number = float(text) if any(c in text for c in ".eE") else int(text)
    except ValueError:
        return None
    number = number * multiplier
    if isinstance(number, float):
        if number != number or number in (float("inf"), float("-inf")):
            return None
        rounded = round(number)
        if abs(number - rounded) > 1e-6 * max(1.0, abs(number)):
            return None
        return int(rounded)
    return number


def parse_assignments(text: str) -> tuple[dict[str, Any], list[str]]:
    """`arch=transformer steps=50_000, devices=8` -> ({field: value}, [problems])."""
    values: dict[str, Any] = {}
    problems: list[str] = []
    text = text.split("#", 1)[0]  # a trailing comment after a pragma
    for token in re.split(r"[\s,]+", text.strip()):
        if not token:
            continue
        key, sep, raw = token.partition("=")
        if not sep or not key or not raw:
            problems.append(f"expected field=value, got {token!r}")
            continue
        try:
            field = canonical_field(key)
            values[field] = parse_value(field, raw)
        except ContextError as exc:
            problems.append(str(exc))
    return values, problems


def parse_cli(items: Iterable[str]) -> dict[str, Any]:
    """`--context arch=transformer,steps=50000` (repeatable); ContextError on a bad entry."""
    values: dict[str, Any] = {}
    for item in items:
        parsed, problems = parse_assignments(item)
        if problems:
            raise ContextError(f"--context: {problems[0]}")
        values.update(parsed)
    return values


def parse_config_table(table: dict, where: str = "[tool.optax-lint.context]") -> tuple[dict[str, Any], list[tuple[str, dict[str, Any]]]]:
    """The config table -> (values for every file, [(path glob, values), ...]).

    ContextError names the table and key on a bad entry.
    """
    base: dict[str, Any] = {}
    overrides: list[tuple[str, dict[str, Any]]] = []
    for key, raw in table.items():
        if key in ("overrides", "override"):
            if not isinstance(raw, list) or not all(isinstance(item, dict) for item in raw):
                raise ContextError(f"{where} {key}: expected an array of tables ([[...overrides]])")
            for i, item in enumerate(raw):
                glob = item.get("path")
                if not isinstance(glob, str) or not glob:
                    raise ContextError(f"{where} overrides[{i}]: expected a `path` glob string")
                values = {}
                for sub, value in item.items():
                    if sub == "path":
                        continue
                    try:
                        field = canonical_field(sub)
                        values[field] = parse_value(field, value)
                    except ContextError as exc:  # its message names the field already
                        raise ContextError(f"{where} overrides[{i}] {exc}") from None
                overrides.append((glob, values))
            continue
        try:
            field = canonical_field(key)
            base[field] = parse_value(field, raw)
        except ContextError as exc:  # its message names the field already
            raise ContextError(f"{where} {exc}") from None
    return base, overrides


def declared_for(path, settings, cli_values: Optional[dict] = None) -> dict[str, tuple]:
    """Declared context for one file: config (with per-path overrides) under CLI values.

    Returns {field: (value, source, location)}, what `lint_text(context=...)` takes.
    """
    from optax_lint.core.globs import glob_matches

    out: dict[str, tuple] = {}
    table = getattr(settings, "context", None) or {}
    if table:
        location = _config_display(settings.config_path, getattr(settings, "root", None))
        base, overrides = parse_config_table(table)
        for field, value in base.items():
            out[field] = (value, "config", location)
        for glob, values in overrides:
            if glob_matches(glob, path, settings.root):
                for field, value in values.items():
                    out[field] = (value, "config", location)
    for field, value in (cli_values or {}).items():
        out[field] = (value, "cli", None)
    return out


def _config_display(path, root=None) -> str:
    """The config file for messages: relative to the project root, never absolute."""
    if path is None:
        return "config"
    from optax_lint.facts.file_role import display_path

    return display_path(os.path.abspath(str(path)), str(root) if root else None)


_PRAGMA = re.compile(r"#\s*optax-lint\s*:\s*context\b(?P<body>[^\n]*)", re.IGNORECASE)


def parse_pragmas(text: Optional[str], path: str) -> tuple[dict[str, ContextValue], list[tuple[str, str]]]:
    """`# optax-lint: context arch=transformer steps=50_000` comments in a source text."""
    values: dict[str, ContextValue] = {}
    problems: list[tuple[str, str]] = []
    if not text or "optax-lint" not in text:
        return values, problems
    for match in _PRAGMA.finditer(text):
        line_start = text.rfind("\n", 0, match.start()) + 1
        prefix = text[line_start : match.start()]
        if prefix.count('"') % 2 or prefix.count("'") % 2:
            continue  # inside a string literal, not a comment
        line = text.count("\n", 0, match.start()) + 1
        location = f"{path}:{line}"
        parsed, bad = parse_assignments(match.group("body"))
        for message in bad:
            problems.append((location, f"pragma ignored in part: {message}"))
        for field, value in parsed.items():
            values[field] = ContextValue(value, "pragma", location, "declared", "")
    return values, problems


def _declared_entry(field: str, declared: Union[tuple, Any]) -> ContextValue:
    if isinstance(declared, ContextValue):
        return declared
    if isinstance(declared, tuple):
        value = declared[0]
        source = declared[1] if len(declared) > 1 else "cli"
        location = declared[2] if len(declared) > 2 else None
    else:
        value, source, location = declared, "cli", None
    try:
        value = parse_value(field, value)
    except ContextError:
        pass  # already-typed values from a caller that validated them
    return ContextValue(value, source, location, "declared", "")


def build_run_context(facts, infer: Callable[[str, RunContext], Optional[ContextValue]]) -> RunContext:
    """Declared values (command line, config, pragmas); `infer` answers the other fields."""
    values: dict[str, ContextValue] = {}
    for name, declared in (facts.declared_context or {}).items():
        try:
            field = canonical_field(name)
        except ContextError:
            continue
        values[field] = _declared_entry(field, declared)
    pragmas, problems = parse_pragmas(facts.text, facts.display_path)
    for field, entry in pragmas.items():
        current = values.get(field)
        if current is None or _RANK.get(entry.source, 3) < _RANK.get(current.source, 3):
            values[field] = entry
    context = RunContext(values, infer=infer)
    context.problems.extend(problems)
    return context
