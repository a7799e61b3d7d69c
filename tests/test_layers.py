"""The package's shape: layers that import only downward, no import circles, no module
over 800 lines.

The import graph is read from the source (never by importing it): module-level and
function-level `import`/`from ... import`, `importlib.import_module("optax_lint...")`
and its f-string form (`f"{__name__}.{name}"`, `f"optax_lint.rules.{family}..."`),
which lazy loaders use. An import under `if TYPE_CHECKING:` counts too: a type that
only an upper layer defines is a sign the code sits in the wrong layer.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "optax_lint"
MAX_LINES = 800

# Bottom to top. A module may import its own layer and the layers below it.
LAYERS = [
    ("core", ["optax_lint", "optax_lint.core"]),
    ("syntax", ["optax_lint.syntax"]),
    ("facts", ["optax_lint.facts"]),
    ("rules", ["optax_lint.rules"]),
    ("engine", ["optax_lint.engine"]),
    ("verify", ["optax_lint.verify"]),
    ("notebook", ["optax_lint.notebook"]),
    ("run", ["optax_lint.run"]),
    ("reporters", ["optax_lint.reporters"]),
    ("recommend", ["optax_lint.recommend"]),
    ("front-ends", ["optax_lint.cli", "optax_lint.commands", "optax_lint.lsp", "optax_lint.context_report", "optax_lint.__main__"]),
]

# Today's violations, each to be removed as it is mended; an entry that no longer
# applies fails the test too, so the list can only shrink.
ALLOWED: set[str] = set()


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def layer_of(module: str) -> int:
    best, rank = -1, None
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best:
                best, rank = len(prefix), index
    if rank is None:
        raise AssertionError(f"{module} belongs to no layer: add it to LAYERS")
    return rank


def _absolute(importer: str, is_package: bool, level: int, name: str | None) -> str:
    parts = importer.split(".")
    base = parts if is_package else parts[:-1]
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join(base + ([name] if name else []))


def _dynamic_prefix(node: ast.Call, importer: str, is_package: bool) -> str | None:
    """`importlib.import_module(...)` with a constant or an f-string: the module, or
    the package prefix every module it can load starts with."""
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
    if name != "import_module" or not node.args:
        return None
    arg = node.args[0]
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value
    if isinstance(arg, ast.JoinedStr) and arg.values:
        head = arg.values[0]
        if isinstance(head, ast.Constant) and isinstance(head.value, str):
            return head.value.rstrip(".") + "."
        if isinstance(head, ast.FormattedValue) and isinstance(head.value, ast.Name) and head.value.id == "__name__":
            return (importer if is_package else importer.rsplit(".", 1)[0]) + "."
    return None


def import_graph() -> dict[str, set[str]]:
    mods = modules()
    graph: dict[str, set[str]] = {}
    for module, path in mods.items():
        is_package = path.name == "__init__.py"
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = _absolute(module, is_package, node.level, node.module) if node.level else (node.module or "")
                for alias in node.names:
                    candidate = f"{base}.{alias.name}"
                    targets.add(candidate if candidate in mods else base)
            elif isinstance(node, ast.Call):
                prefix = _dynamic_prefix(node, module, is_package)
                if prefix is None:
                    continue
                if prefix.endswith("."):
                    targets.update(m for m in mods if m.startswith(prefix))
                else:
                    targets.add(prefix)
        resolved = set()
        for target in targets:
            # `import optax_lint.a.b` loads optax_lint.a.b; a name from a module resolves to it.
            while target and target not in mods:
                target = target.rpartition(".")[0]
            if target.startswith("optax_lint") and target != module:
                resolved.add(target)
        graph[module] = resolved
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            advanced = False
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    out.append(sorted(component))
    return out


def violations() -> set[str]:
    graph = import_graph()
    found = set()
    for module, targets in graph.items():
        for target in targets:
            if layer_of(target) > layer_of(module):
                found.add(f"upward: {module} -> {target}")
    for component in circles(graph):
        found.add("circle: " + " <-> ".join(component))
    for module, path in modules().items():
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > MAX_LINES:
            found.add(f"long: {module}")
    return found


def test_every_module_belongs_to_a_layer():
    for module in modules():
        layer_of(module)


def test_layers_circles_and_module_size():
    found = violations()
    new = sorted(found - ALLOWED)
    mended = sorted(ALLOWED - found)
    assert not new, "new layer violations:\n" + "\n".join(new)
    assert not mended, "mended, remove from ALLOWED:\n" + "\n".join(mended)


def test_the_graph_sees_every_kind_of_import(tmp_path):
    """The reader finds function-level, dynamic and f-string imports (else the layer
    test could pass on a graph with holes)."""
    graph = import_graph()
    # reporters load the CI formats by f"{__name__}.{module}"
    assert "optax_lint.reporters.sarif" in graph["optax_lint.reporters"]
    # the check command imports the run layer inside its function only
    assert any(t.startswith("optax_lint.run.") for t in graph["optax_lint.commands.check"])


def test_circles_are_found():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert circles(graph) == [["a", "b", "c"]]


def test_an_upper_layer_is_ranked_above_a_lower_one():
    assert layer_of("optax_lint.core.diagnostics") < layer_of("optax_lint.facts.module") < layer_of("optax_lint.cli")
    assert layer_of("optax_lint") == 0


def test_rules_never_walk_the_tree():
    """Rules judge facts: the walks over syntax (walker.walk, children) live in facts/."""
    rules = PACKAGE / "rules"
    offenders = []
    for path in sorted(rules.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module == "optax_lint.syntax.walker":
                walks = {a.name for a in node.names} & {"walk", "children", "iter_children", "collect"}
                if walks:
                    offenders.append(f"{path.relative_to(PACKAGE)}: {sorted(walks)}")
    assert not offenders, offenders
