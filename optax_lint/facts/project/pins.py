"""The library releases a project says it runs on: the upper bounds its own
dependencies put on jax, flax, optax and orbax (pyproject.toml's `[project]`
dependencies, Poetry's, then its extras; setup.py's requirement strings; then
requirements.txt). `flax>0.10.6,<0.11.0` means no release from 0.11.0 on, so code written for
0.10 is not broken for that project: an API-currency finding about a break at 0.11.0
is a migration note there, not a crash. A jax pin holds flax and optax back too: every
flax from 0.10.5 on needs jax>=0.5.1, so `jax==0.4.38` alone keeps flax at 0.10.4 or
older. Read only when such a finding is made."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Optional

from optax_lint.core.catalogue import load_table
from optax_lint.core.target_versions import version_tuple

# Distribution name (normalised) -> the library name the currency table uses.
_DISTRIBUTIONS = {"jax": "jax", "flax": "flax", "optax": "optax", "orbax-checkpoint": "orbax", "orbax": "orbax"}
_REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*(?:\(([^)]*)\)|([^;#@]*))")
_SPECIFIER = re.compile(r"^\s*(===|==|~=|<=|<|!=|>=|>)\s*([0-9][0-9A-Za-z.*+!-]*)\s*$")


@dataclass(frozen=True)
class Pin:
    library: str  # jax | flax | optax | orbax
    ceiling: tuple[int, ...]  # the first release the project does not allow ...
    inclusive: bool  # ... or, when True, the last one it does
    text: str  # the requirement as written: "flax>0.10.6,<0.11.0"
    where: str  # "pyproject.toml" | "requirements.txt"

    def excludes(self, version: str) -> bool:
        """Whether no release the project allows is `version` or newer."""
        wanted = version_tuple(version)
        return wanted > self.ceiling if self.inclusive else wanted >= self.ceiling

    def describe(self) -> str:
        return f"the project pins {self.text} in {self.where}"

    def shown(self) -> str:
        """As --show-context lists it."""
        return f"{self.text} ({self.where})"


@dataclass(frozen=True)
class HeldPin(Pin):
    """A library held back by another one's pin: flax 0.10.5 and later need jax>=0.5.1,
    so `jax==0.4.38` keeps flax below 0.10.5; optax 0.2.3 and later need jax>=0.4.27
    (rules/api_currency.toml [requires])."""

    needs: str = ""  # "jax 0.5.1"

    @property
    def release(self) -> str:
        """The first release of the library the other pin keeps out: "0.10.5"."""
        return ".".join(map(str, self.ceiling))

    def describe(self) -> str:
        return (f"the {self.library} the project can install ({self.text} in {self.where} keeps it below "
                f"{self.release}, which needs {self.needs} or newer)")

    def shown(self) -> str:
        return f"{self.library}<{self.release} (held by {self.text} in {self.where})"


def held_back(library: str, pins: dict[str, "Pin"]) -> Optional[Pin]:
    """The ceiling another library's pin puts on `library`: the first release of it
    that needs a newer release of the other than that pin allows."""
    rows = load_table("api_currency").get("requires", {})
    for release, needs in sorted(rows.items(), key=lambda kv: version_tuple(kv[0].split()[1])):
        name, _, version = release.partition(" ")
        other, _, other_version = needs.partition(" ")
        pin = pins.get(other)
        if name == library and pin is not None and pin.excludes(other_version):
            return HeldPin(library, version_tuple(version), False, pin.text, pin.where, needs=needs)
    return None


def _ceiling(op: str, version: str) -> Optional[tuple[tuple[int, ...], bool]]:
    """(bound, inclusive) for one specifier with an upper bound, else None."""
    if op == "<":
        return version_tuple(version), False
    if op in ("<=", "===") or (op == "==" and "*" not in version):
        return version_tuple(version), True
    # The leading number of each dotted part: "0.10.*" -> [0, 10], "1.2rc1" -> [1, 2].
    digits = [int(m.group()) for m in (re.match(r"\d+", p) for p in version.split(".")) if m]
    if op == "==":  # ==0.10.* : everything below 0.11
        head = digits
    elif op == "~=":  # ~=0.10.6 : >=0.10.6, <0.11 ; ~=1.2 : <2
        head = digits[:-1]
    else:
        return None
    if not head:
        return None
    head[-1] += 1
    return version_tuple(".".join(map(str, head))), False


def parse_requirement(line: str, where: str, shown: Optional[str] = None) -> Optional[Pin]:
    """The upper bound a PEP 508 requirement line puts on a tracked library, if any."""
    match = _REQUIREMENT.match(line)
    if not match:
        return None
    name = re.sub(r"[-_.]+", "-", match.group(1)).lower()
    library = _DISTRIBUTIONS.get(name)
    if library is None:
        return None
    specifiers = (match.group(2) or match.group(3) or "").strip()
    best: Optional[tuple[tuple[int, ...], bool]] = None
    for spec in specifiers.split(","):
        parsed = _SPECIFIER.match(spec)
        if not parsed:
            continue
        bound = _ceiling(*parsed.groups())
        if bound is None:
            continue
        # The tighter bound: the lower number; at equal numbers the exclusive one.
        if best is None or bound[0] < best[0] or (bound[0] == best[0] and not bound[1]):
            best = bound
    if best is None:
        return None
    return Pin(library, best[0], best[1], shown or f"{match.group(1)}{specifiers.replace(' ', '')}", where)


def _caret_or_tilde(op: str, version: str) -> Optional[tuple[int, ...]]:
    """Poetry's ^ and ~ as an exclusive bound: ^0.4.8 < 0.5.0, ^1.2 < 2.0.0, ~1.2.3 < 1.3.0."""
    digits = [int(d) for d in re.findall(r"\d+", version)[:3]]
    if not digits:
        return None
    if op == "^":
        first = next((i for i, d in enumerate(digits) if d != 0), len(digits) - 1)
        head = digits[: first + 1]
    else:
        head = digits[:2] if len(digits) > 1 else digits[:1]
    head[-1] += 1
    return version_tuple(".".join(map(str, head)))


def _poetry_requirement(name: str, constraint: object) -> Optional[tuple[str, str]]:
    """A Poetry dependency (`jax = "^0.4.8"`, `flax = {version = "~0.6"}`) as a PEP 508
    line with the same upper bound, and as written; or None."""
    if isinstance(constraint, dict):
        constraint = constraint.get("version")
    if not isinstance(constraint, str):
        return None
    specs = []
    for part in constraint.split(","):
        part = part.strip()
        if part.startswith(("^", "~")) and not part.startswith("~="):
            bound = _caret_or_tilde(part[0], part[1:])
            if bound is not None:
                specs.append("<" + ".".join(map(str, bound)))
        elif re.match(r"^[0-9]", part):  # a bare version is an exact one
            specs.append("==" + part)
        elif part:
            specs.append(part)
    return (f"{name}{','.join(specs)}", f'{name} = "{constraint}"') if specs else None


def _pyproject_requirements(text: str) -> list[tuple]:
    """(requirement, where) from [project] dependencies, Poetry's dependencies, then the
    optional dependencies (an extra such as `jax = ["jax==0.4.8"]` is how the code runs)."""
    from optax_lint.core.catalogue import toml_parser

    parser = toml_parser()
    try:
        data = parser.loads(text)
    except (parser.TOMLDecodeError, RecursionError):
        return []
    if not isinstance(data, dict):
        return []
    out: list[tuple] = []  # (requirement, where[, as written])
    project = data.get("project") if isinstance(data.get("project"), dict) else {}
    deps = project.get("dependencies")
    if isinstance(deps, list):
        out += [(d, "pyproject.toml") for d in deps if isinstance(d, str)]
    tool = data.get("tool") if isinstance(data.get("tool"), dict) else {}
    poetry = tool.get("poetry") if isinstance(tool.get("poetry"), dict) else {}
    poetry_deps = poetry.get("dependencies")
    if isinstance(poetry_deps, dict):
        for name, constraint in poetry_deps.items():
            poetry_line = _poetry_requirement(str(name), constraint)
            if poetry_line is not None:
                out.append((poetry_line[0], "pyproject.toml (Poetry)", poetry_line[1]))
    extras = project.get("optional-dependencies")
    if isinstance(extras, dict):
        for group, lines in extras.items():
            if isinstance(lines, list):
                out += [(d, f"pyproject.toml (extra {group!r})") for d in lines if isinstance(d, str)]
    return out


def _setup_py_requirements(text: str) -> list[tuple[str, str]]:
    """String literals of setup.py that are whole requirements (`"jax==0.3.22"`), read
    with CPython's parser: setup.py is never run."""
    import ast

    from optax_lint.syntax.parsing import parse_ast

    try:
        tree = parse_ast(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    return [
        (node.value, "setup.py") for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and _WHOLE.match(node.value)
    ]


_WHOLE = re.compile(
    r"^\s*(jax|flax|optax|orbax|orbax[-_.]checkpoint)\s*(\[[^\]]*\])?\s*"
    r"(?:(?:===|==|~=|<=|>=|!=|<|>)\s*[0-9][0-9A-Za-z.*+!-]*\s*,?\s*)+(?:;.*)?$",
    re.I,
)


def _requirements_lines(text: str) -> list[tuple[str, str]]:
    return [
        (line, "requirements.txt") for line in text.splitlines()
        if line.strip() and not line.lstrip().startswith(("#", "-"))
    ]


_SOURCES = (
    ("pyproject.toml", _pyproject_requirements),
    ("setup.py", _setup_py_requirements),
    ("requirements.txt", _requirements_lines),
)


def read_declared_pins(facts) -> dict[str, Pin]:
    """library -> Pin from the nearest folder, at or above the linted file and inside its
    project, that holds a pyproject.toml with dependencies or a requirements.txt."""
    pins: dict[str, Pin] = {}
    project = facts.project
    root, here = project.root, project.dir
    while here and root and (here == root or here.startswith(root.rstrip(os.sep) + os.sep)):
        found = False
        for name, read in _SOURCES:
            path = os.path.join(here, name)
            if not project.files.isfile(path):
                continue
            text = project.text_of(path)
            lines = read(text) if text else []
            found = found or bool(lines)
            for line, where, *shown in lines:
                pin = parse_requirement(line, where, *shown)
                if pin is not None and pin.library not in pins:
                    pins[pin.library] = pin
        if found or here == root:
            break
        here = os.path.dirname(here)
    for library in ("flax", "optax"):
        if library not in pins:
            held = held_back(library, pins)
            if held is not None:
                pins[library] = held
    return pins
