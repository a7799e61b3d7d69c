"""Settings: `optax-lint.toml` / `pyproject.toml [tool.optax-lint]` plus CLI overrides.

Every problem in a config file is a `ConfigError` whose text names the file, the table
and the key, so the CLI can print it and exit without a traceback.
"""

from __future__ import annotations

import copy
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from optax_lint.core.catalogue import RuleSpec, load_catalogue, toml_parser
from optax_lint.core.globs import glob_matches, invalid_glob

STANDALONE_NAME = "optax-lint.toml"
PYPROJECT_NAME = "pyproject.toml"
TOOL_TABLE = "tool.optax-lint"
OUTPUT_FORMATS = ("full", "concise", "grouped", "json", "json-lines", "github", "sarif", "gitlab", "junit", "pylint", "rdjson", "azure")
# The lowest severity that fails a run (exit 1). Info findings are advice: by default
# they are shown but do not block a commit or a CI job.
FAIL_LEVELS = ("error", "warning", "info")
DEFAULT_FAIL_LEVEL = "warning"
# Legitimate settings nest 3-4 levels (rules.CODE.option = [..]); anything far deeper
# is hostile and would blow the stack of whoever walks it later (e.g. the context table).
MAX_DEPTH = 32

_LIST_KEYS = ("select", "ignore", "extend-select", "exclude", "extend-exclude")
_BOOL_KEYS = ("fix", "unsafe-fixes", "respect-gitignore", "force-exclude")
KNOWN_KEYS = (
    "select",
    "ignore",
    "extend-select",
    "per-file-ignores",
    "exclude",
    "extend-exclude",
    "fix",
    "unsafe-fixes",
    "output-format",
    "fail-level",
    "respect-gitignore",
    "force-exclude",
    "rules",
    "context",
    "target-versions",
)
_CODE_KEYS = ("select", "ignore", "extend-select")
# Keys the CLI may override (file-only tables `rules` and `context` excluded).
OVERRIDE_KEYS = tuple(k.replace("-", "_") for k in KNOWN_KEYS if k not in ("rules", "context", "target-versions"))
# Libraries whose API the API-currency fixes (OPX701-OPX704) may target an older release of.
TARGET_LIBRARIES = ("optax", "flax", "jax", "orbax-checkpoint")


class ConfigError(Exception):
    """A bad config file or CLI setting; `str(e)` is the complete user-facing message."""

    def __init__(self, message: str, *, path: Path | None = None, key: str | None = None):
        super().__init__(message)
        self.path = path
        self.key = key


@dataclass
class Settings:
    root: Path
    config_path: Path | None
    select: list[str]
    ignore: list[str] = field(default_factory=list)
    extend_select: list[str] = field(default_factory=list)
    per_file_ignores: dict[str, list[str]] = field(default_factory=dict)
    exclude: list[str] | None = None
    extend_exclude: list[str] = field(default_factory=list)
    fix: bool = False
    unsafe_fixes: bool = False
    output_format: str = "full"
    fail_level: str = DEFAULT_FAIL_LEVEL
    respect_gitignore: bool = True
    force_exclude: bool = False
    rule_options: dict[str, dict[str, object]] = field(default_factory=dict)
    context: dict = field(default_factory=dict)
    target_versions: dict[str, str] = field(default_factory=dict)  # library -> "0.2.4"
    catalogue: dict[str, RuleSpec] = field(default_factory=dict, repr=False, compare=False)

    def enabled_codes(self) -> set[str]:
        """(select | extend_select) - ignore, each pattern a code, a prefix or ALL.

        Asked once per linted file: the answer is kept for as long as the three
        selections are unchanged (matching ~80 patterns against ~80 codes per file
        otherwise costs seconds on a large tree)."""
        key = (tuple(self.select), tuple(self.extend_select), tuple(self.ignore), len(self.catalogue))
        memo = self.__dict__.get("_enabled_memo")
        if memo is None or memo[0] != key:
            chosen = _match(self.select, self.catalogue) | _match(self.extend_select, self.catalogue)
            memo = (key, frozenset(chosen - _match(self.ignore, self.catalogue)))
            self.__dict__["_enabled_memo"] = memo
        return set(memo[1])

    def codes_for_path(self, path: Path) -> set[str]:
        codes = self.enabled_codes()
        for pattern, ignored in self.per_file_ignores.items():
            if codes and glob_matches(pattern, Path(path), self.root):
                codes -= _match(ignored, self.catalogue)
        return codes

    def fails(self, severity: object) -> bool:
        """Whether a finding of this severity fails the run (exit 1) at `fail_level`."""
        return severity_fails(severity, self.fail_level)

    def option(self, code: str, name: str) -> object:
        opts = self.rule_options.get(code, {})
        for candidate in (name, name.replace("_", "-"), name.replace("-", "_")):
            if candidate in opts:
                return opts[candidate]
        raise KeyError(f"{code} has no option {name!r}")


def severity_fails(severity: object, fail_level: str) -> bool:
    """error fails at every level, warning at warning and info, info only at info."""
    return FAIL_LEVELS.index(getattr(severity, "value", severity)) <= FAIL_LEVELS.index(fail_level)


# ---------------------------------------------------------------------------- codes


def _match(patterns: list[str], catalogue: dict[str, RuleSpec]) -> set[str]:
    """Codes matching already-validated patterns."""
    if "ALL" in patterns:
        return set(catalogue)
    exact = {p for p in patterns if p in catalogue}
    prefixes = tuple(p for p in patterns if p and p not in catalogue)
    if not prefixes:
        return exact
    return exact | {code for code in catalogue if code.startswith(prefixes)}


def resolve_codes(patterns: list[str], catalogue: dict, *, where: str) -> set[str]:
    """Codes selected by `patterns`; a pattern that matches no rule is an error."""
    codes: set[str] = set()
    for pattern in patterns:
        if pattern == "ALL":
            codes |= set(catalogue)
            continue
        hits = {code for code in catalogue if pattern and code.startswith(pattern)}
        if not hits:
            raise ConfigError(f"{where}: unknown rule code {pattern!r}", key=pattern)
        codes |= hits
    return codes


# ---------------------------------------------------------------------------- files


def _display(path: Path) -> str:
    try:
        return str(Path(os.path.abspath(path)).relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _read_toml(path: Path) -> dict:
    name = _display(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{name}: cannot read file: {exc.strerror or exc}", path=path) from None
    return _parse_toml(raw, path)


def _parse_toml(raw: bytes, path: Path) -> dict:
    name = _display(path)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        message = f"{name}: invalid TOML: not UTF-8 ({exc.reason} at byte {exc.start})"
        raise ConfigError(message, path=path) from None
    parser = toml_parser()
    try:
        return parser.loads(text)
    except parser.TOMLDecodeError as exc:
        raise ConfigError(f"{name}: invalid TOML: {exc}", path=path) from None
    except RecursionError:
        # tomllib recurses on nested arrays / inline tables; a hostile file must not crash us.
        raise ConfigError(f"{name}: invalid TOML: values nested too deeply", path=path) from None


def _tool_table(data: dict, path: Path) -> dict | None:
    tool = data.get("tool")
    if not isinstance(tool, dict) or "optax-lint" not in tool:
        return None
    table = tool["optax-lint"]
    if not isinstance(table, dict):
        raise ConfigError(
            f"{_display(path)}: [tool] optax-lint: expected a table, got {_type_name(table)}",
            path=path,
            key="optax-lint",
        )
    return table


def _discover(start: Path) -> tuple[Path, dict] | None:
    """The nearest config file at or above `start`, with its settings table."""
    here = Path(os.path.abspath(start))
    if here.is_file():
        here = here.parent
    for directory in (here, *here.parents):
        standalone = directory / STANDALONE_NAME
        if standalone.is_file():
            return standalone, _read_toml(standalone)
        pyproject = directory / PYPROJECT_NAME
        if pyproject.is_file():
            try:
                raw = pyproject.read_bytes()
            except OSError as exc:
                raise ConfigError(
                    f"{_display(pyproject)}: cannot read file: {exc.strerror or exc}", path=pyproject
                ) from None
            # Cheap pre-check: an unrelated (even broken) pyproject is not our business.
            if b"optax-lint" not in raw:
                continue
            table = _tool_table(_parse_toml(raw, pyproject), pyproject)
            if table is not None:
                return pyproject, table
    return None


def find_config(start: Path) -> Path | None:
    found = _discover(start)
    return found[0] if found else None


def _load_explicit(path: Path) -> dict:
    data = _read_toml(path)
    if path.name == PYPROJECT_NAME:
        table = _tool_table(data, path)
        return {} if table is None else table
    return data


# ---------------------------------------------------------------------------- validation


def _type_name(value: Any) -> str:
    if isinstance(value, dict):
        return "table"
    return type(value).__name__


def _toml_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else '"' + key.replace('"', '\\"') + '"'


class _Where:
    """Builds the `file: [table] key` prefix of every message."""

    def __init__(self, path: Path, pyproject: bool):
        self.path = path
        self.name = _display(path)
        self.base = TOOL_TABLE if pyproject else ""

    def head(self, *subtable: str) -> str:
        table = ".".join([self.base, *map(_toml_key, subtable)] if self.base else map(_toml_key, subtable))
        return f"{self.name}: [{table}]" if table else f"{self.name}:"

    def key(self, key: str, *subtable: str) -> str:
        return f"{self.head(*subtable)} {_toml_key(key)}"

    def error(self, message: str, key: str | None = None) -> ConfigError:
        return ConfigError(message, path=self.path, key=key)


def _suggest(word: str, choices: list[str] | tuple[str, ...]) -> str:
    import difflib  # an error path: a misspelt key or value

    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _check_depth(table: dict, where: _Where) -> None:
    """Iteratively, so a hostile nesting depth cannot overflow the stack here."""
    stack: list[tuple[Any, int, str]] = [(value, 1, key) for key, value in table.items()]
    while stack:
        value, depth, top = stack.pop()
        if depth > MAX_DEPTH:
            raise where.error(f"{where.key(top)}: nested deeper than {MAX_DEPTH} levels", key=top)
        if isinstance(value, dict):
            stack.extend((v, depth + 1, top) for v in value.values())
        elif isinstance(value, list):
            stack.extend((v, depth + 1, top) for v in value)


def _string_list(value: Any, where: str) -> list[str]:
    if not isinstance(value, list):
        raise ConfigError(f"{where}: expected a list of strings, got {_type_name(value)}")
    for i, item in enumerate(value):
        if not isinstance(item, str):
            raise ConfigError(f"{where}: expected a list of strings, item {i} is {_type_name(item)}")
    return list(value)


def _bool(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{where}: expected a boolean, got {_type_name(value)}")
    return value


def _choice(value: Any, where: str, choices: tuple[str, ...]) -> str:
    if not isinstance(value, str):
        raise ConfigError(f"{where}: expected a string, got {_type_name(value)}")
    if value not in choices:
        raise ConfigError(f"{where}: invalid value {value!r} (expected one of: {', '.join(choices)})")
    return value


def _per_file_ignores(value: Any, where: str, table_where: Callable[[str], str], catalogue: dict) -> dict:
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: expected a table of glob = [codes], got {_type_name(value)}")
    result: dict[str, list[str]] = {}
    for glob, codes in value.items():
        at = table_where(glob)
        problem = invalid_glob(glob)
        if problem is not None:
            raise ConfigError(f"{at}: invalid glob: {problem}")
        result[glob] = _string_list(codes, at)
        resolve_codes(result[glob], catalogue, where=at)
    return result


def _validate_file_table(table: dict, where: _Where, catalogue: dict) -> tuple[dict, dict]:
    """-> (settings with underscored keys, per-rule option values keyed by code)."""
    _check_depth(table, where)
    values: dict[str, Any] = {}
    rule_values: dict[str, dict] = {}
    for key, value in table.items():
        if key not in KNOWN_KEYS:
            raise where.error(f"{where.head()} unknown key {key!r}{_suggest(key, KNOWN_KEYS)}", key=key)
        try:
            if key == "rules":
                rule_values = _validate_rules(value, where, catalogue)
            elif key == "context":
                if not isinstance(value, dict):
                    raise ConfigError(f"{where.key(key)}: expected a table, got {_type_name(value)}")
                values[key] = value
            elif key == "target-versions":
                values["target_versions"] = _target_versions(value, where.key(key))
            else:
                values[key.replace("-", "_")] = _validate_value(
                    key, value, where.key(key), lambda glob, key=key: where.key(glob, key), catalogue
                )
        except ConfigError as exc:
            if exc.path is None:  # plain validators do not know the file
                raise where.error(str(exc), key=key) from None
            raise
    return values, rule_values


def _target_versions(value: Any, at: str) -> dict[str, str]:
    """`{optax = "0.2.4", flax = "0.10"}`: library -> a release number."""
    if not isinstance(value, dict):
        raise ConfigError(f"{at}: expected a table such as {{optax = \"0.2.4\"}}, got {_type_name(value)}")
    result = {}
    for library, version in value.items():
        if library not in TARGET_LIBRARIES:
            raise ConfigError(f"{at}: unknown library {library!r}{_suggest(library, TARGET_LIBRARIES)} (known: {', '.join(TARGET_LIBRARIES)})")
        if not isinstance(version, str) or not re.fullmatch(r"\d+(\.\d+){0,2}", version.strip()):
            raise ConfigError(f"{at}.{library}: expected a release number such as \"0.2.4\", got {version!r}")
        result[library] = version.strip()
    return result


def _validate_value(key: str, value: Any, at: str, glob_at: Callable[[str], str], catalogue: dict) -> Any:
    """One setting shared by the file and the CLI; `at` prefixes the message."""
    if key in _LIST_KEYS:
        result = _string_list(value, at)
        if key in _CODE_KEYS:
            resolve_codes(result, catalogue, where=at)
        return result
    if key in _BOOL_KEYS:
        return _bool(value, at)
    if key == "output-format":
        return _choice(value, at, OUTPUT_FORMATS)
    if key == "fail-level":
        return _choice(value, at, FAIL_LEVELS)
    if key == "per-file-ignores":
        return _per_file_ignores(value, at, glob_at, catalogue)
    raise AssertionError(key)  # pragma: no cover - callers filter keys


def _validate_rules(value: Any, where: _Where, catalogue: dict[str, RuleSpec]) -> dict[str, dict]:
    if not isinstance(value, dict):
        raise where.error(f"{where.key('rules')}: expected a table, got {_type_name(value)}", key="rules")
    by_name = {spec.name: code for code, spec in catalogue.items()}
    result: dict[str, dict] = {}
    spelled: dict[str, str] = {}
    for rule_key, options in value.items():
        code = rule_key if rule_key in catalogue else by_name.get(rule_key)
        if code is None:
            hint = _suggest(rule_key, [*catalogue, *by_name])
            raise where.error(f"{where.head('rules')} unknown rule code {rule_key!r}{hint}", key=rule_key)
        if code in spelled:
            raise where.error(
                f"{where.head('rules')} {code} is configured twice (as {spelled[code]!r} and {rule_key!r})",
                key=rule_key,
            )
        spelled[code] = rule_key
        if not isinstance(options, dict):
            message = f"{where.key(rule_key, 'rules')}: expected a table, got {_type_name(options)}"
            raise where.error(message, key=rule_key)
        result[code] = _validate_rule_options(catalogue[code], rule_key, options, where)
    return result


def _validate_rule_options(spec: RuleSpec, rule_key: str, options: dict, where: _Where) -> dict:
    checked: dict[str, object] = {}
    for opt_key, opt_value in options.items():
        name = next(
            (n for n in (opt_key, opt_key.replace("-", "_"), opt_key.replace("_", "-")) if n in spec.options),
            None,
        )
        if name is None:
            hint = _suggest(opt_key, tuple(spec.options)) if spec.options else f" ({spec.code} has no options)"
            raise where.error(f"{where.head('rules', rule_key)} unknown option {opt_key!r}{hint}", key=opt_key)
        option = spec.options[name]
        if not option.check(opt_value):
            raise where.error(
                f"{where.key(opt_key, 'rules', rule_key)}: expected {option.type}, got {_type_name(opt_value)}",
                key=opt_key,
            )
        checked[name] = float(opt_value) if option.type == "float" else opt_value
    return checked


def _validate_overrides(overrides: dict, catalogue: dict) -> dict:
    """CLI values: same checks, messages name the flag (e.g. `--select: ...`)."""
    values: dict[str, Any] = {}
    for name, value in overrides.items():
        if name not in OVERRIDE_KEYS:
            raise TypeError(f"unknown settings override {name!r}")
        if value is None:  # option not given on the command line
            continue
        if isinstance(value, tuple):  # click hands multiple=True options over as tuples
            value = list(value)
        flag = "--" + name.replace("_", "-")
        values[name] = _validate_value(
            name.replace("_", "-"), value, flag, lambda glob: f"{flag} {glob}", catalogue
        )
    return values


# ---------------------------------------------------------------------------- merging


def _merge(file_values: dict, cli: dict, catalogue: dict) -> dict:
    """CLI wins: scalars and `select`/`exclude` replace; ignore/extend lists add."""
    merged = dict(file_values)
    if "select" in cli:
        # A new base selection starts over, as `--select` does in ruff.
        merged["select"] = cli["select"]
        merged.pop("extend_select", None)
    cli_chosen = cli.get("select", []) + cli.get("extend_select", [])
    if cli_chosen and merged.get("ignore"):
        merged["ignore"] = _uncover(merged["ignore"], cli_chosen, catalogue)
    for name in ("ignore", "extend_select", "extend_exclude"):
        if name in cli:
            merged[name] = merged.get(name, []) + cli[name]
    if "per_file_ignores" in cli:
        merged["per_file_ignores"] = {**merged.get("per_file_ignores", {}), **cli["per_file_ignores"]}
    for name in ("exclude", "fix", "unsafe_fixes", "output_format", "fail_level", "respect_gitignore", "force_exclude"):
        if name in cli:
            merged[name] = cli[name]
    return merged


def _uncover(ignores: list[str], chosen: list[str], catalogue: dict) -> list[str]:
    """File ignores minus what the CLI selects at least as specifically.

    `ignore = ["OPX1"]` + `--select OPX102` enables OPX102 but keeps the rest of OPX1
    ignored; `ignore = ["OPX102"]` + `--extend-select OPX1` keeps OPX102 ignored.
    """
    result: list[str] = []
    for pattern in ignores:
        overriding = [
            c for c in chosen if pattern == "ALL" or c == pattern or (c != "ALL" and c.startswith(pattern))
        ]
        if overriding:
            result.extend(sorted(_match([pattern], catalogue) - _match(overriding, catalogue)))
        else:
            result.append(pattern)
    return result


def _default_rule_options(catalogue: dict[str, RuleSpec]) -> dict[str, dict[str, object]]:
    return {
        code: {name: copy.deepcopy(opt.default) for name, opt in spec.options.items()}
        for code, spec in catalogue.items()
    }


def load_settings(
    *,
    config: Path | None = None,
    start: Path | None = None,
    overrides: dict | None = None,
    catalogue: dict | None = None,
) -> Settings:
    """Settings from `config` (or the nearest config file above `start`) plus CLI `overrides`."""
    catalogue = load_catalogue() if catalogue is None else catalogue
    start_dir = Path(os.path.abspath(start if start is not None else Path.cwd()))
    if start_dir.is_file():
        start_dir = start_dir.parent

    table: dict = {}
    config_path: Path | None = None
    if config is not None:
        config_path = Path(os.path.abspath(config))
        table = _load_explicit(config_path)
    else:
        found = _discover(start_dir)
        if found is not None:
            config_path, table = found

    file_values: dict = {}
    rule_values: dict = {}
    if config_path is not None:
        where = _Where(config_path, pyproject=config_path.name == PYPROJECT_NAME)
        file_values, rule_values = _validate_file_table(table, where, catalogue)
    values = _merge(file_values, _validate_overrides(overrides or {}, catalogue), catalogue)

    rule_options = _default_rule_options(catalogue)
    for code, opts in rule_values.items():
        rule_options[code].update(opts)
    for code, spec in catalogue.items():  # the API-currency rules judge fixes against it
        if spec.family == "api-currency":
            rule_options[code]["target_versions"] = dict(values.get("target_versions", {}))
    if "select" not in values:
        values["select"] = sorted(code for code, spec in catalogue.items() if spec.default_enabled)
    return Settings(
        root=config_path.parent if config_path is not None else start_dir,
        config_path=config_path,
        rule_options=rule_options,
        catalogue=catalogue,
        **values,
    )
