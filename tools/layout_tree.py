"""Print the package tree with line counts per folder and module, for docs/architecture.md.

    python tools/layout_tree.py            # markdown code block
"""

from __future__ import annotations

import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "optax_lint"


def lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def folder_total(folder: Path) -> int:
    return sum(lines(p) for p in folder.rglob("*.py"))


def tree(folder: Path, depth: int = 0, modules: bool = False) -> list[str]:
    out = []
    pad = "  " * depth
    for child in sorted(folder.iterdir()):
        if child.name.startswith(("_", ".")) and child.name != "__init__.py" or child.name == "__pycache__":
            continue
        if child.is_dir() and any(child.rglob("*.py")):
            count = len(list(child.rglob("*.py")))
            out.append(f"{pad}{child.name}/{'':<{max(1, 22 - len(child.name) - 2 * depth)}}{folder_total(child):>6} lines, {count} modules")
            out += tree(child, depth + 1, modules)
        elif modules and child.suffix == ".py" and child.name != "__init__.py":
            out.append(f"{pad}{child.name:<{24 - 2 * depth}}{lines(child):>6}")
    return out


def main() -> int:
    modules = "--modules" in sys.argv
    top = [p for p in sorted(PACKAGE.glob("*.py"))]
    print("```")
    print(f"optax_lint/{'':<13}{folder_total(PACKAGE):>6} lines, {len(list(PACKAGE.rglob('*.py')))} modules")
    for line in tree(PACKAGE, 1, modules):
        print(line)
    for p in top:
        if p.name != "__init__.py":
            print(f"  {p.name:<22}{lines(p):>6}")
    print("```")
    return 0


if __name__ == "__main__":
    sys.exit(main())
