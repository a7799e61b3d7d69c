"""Regenerate the rule table in README.md and docs/rules.md from the catalogue.

    python tools/gen_docs.py          # rewrite
    python tools/gen_docs.py --check  # exit 1 if out of date (a test runs this)
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from optax_lint.core.catalogue import load_catalogue  # noqa: E402

START, END = "<!-- rules:start -->", "<!-- rules:end -->"


def rule_table() -> str:
    rows = ["| Code | Name | Severity | Fix | What it catches |", "|---|---|---|---|---|"]
    for spec in load_catalogue().values():
        fix = spec.fix.value if spec.fix else "—"
        enabled = "" if spec.default_enabled else " (opt-in)"
        summary = spec.summary.replace("|", "\\|")
        rows.append(f"| {spec.code} | `{spec.name}`{enabled} | {spec.severity.value} | {fix} | {summary} |")
    return "\n".join(rows)


def rules_document() -> str:
    parts = ["# optax-lint rules", "", "Generated from `rules/*.toml` by `tools/gen_docs.py`; do not edit by hand.", ""]
    for spec in load_catalogue().values():
        parts.append(spec.render_doc().replace("# ", "## ", 1).replace("\n## ", "\n### "))
    return "\n".join(parts)


def render_readme(text: str) -> str:
    pattern = re.compile(re.escape(START) + r".*?" + re.escape(END), re.S)
    return pattern.sub(f"{START}\n{rule_table()}\n{END}", text)


def main(argv: list[str]) -> int:
    check = "--check" in argv
    targets = {
        ROOT / "README.md": render_readme((ROOT / "README.md").read_text(encoding="utf-8")),
        ROOT / "docs" / "rules.md": rules_document(),
    }
    stale = []
    for path, content in targets.items():
        current = path.read_text(encoding="utf-8") if path.exists() else ""
        if current != content:
            stale.append(path.relative_to(ROOT))
            if not check:
                path.write_text(content, encoding="utf-8")
    if check and stale:
        print("out of date: " + ", ".join(map(str, stale)) + " (run python tools/gen_docs.py)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
