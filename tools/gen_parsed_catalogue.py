"""Write rules/_parsed.json: every TOML file of the catalogue, parsed, under a hash of its text.

The linter reads a catalogue file from this bundle when the file's text still hashes to
the recorded digest, and parses the TOML otherwise, so a stale entry costs speed, never
correctness. Why it exists: `tomllib` takes about 90 ms for the whole catalogue on a
2-core CI machine (a third of a pre-commit run over files the prefilter rules out);
`json` loads the same data in about 3 ms. The TOML files stay the source of truth.

Usage (from the repo root):
    .venv/bin/python tools/gen_parsed_catalogue.py          # rewrite rules/_parsed.json
    .venv/bin/python tools/gen_parsed_catalogue.py --check  # exit 1 if it is stale (a test runs this)
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from optax_lint.core.catalogue import PARSED_BUNDLE, render_parsed_bundle  # noqa: E402

COMMAND = ".venv/bin/python tools/gen_parsed_catalogue.py"


def main(argv: list[str]) -> int:
    folder = ROOT / "rules"
    text = render_parsed_bundle(folder)
    target = folder / PARSED_BUNDLE
    if "--check" in argv:
        current = target.read_text(encoding="utf-8") if target.exists() else ""
        if current != text:
            print(f"rules/{PARSED_BUNDLE} is stale: run {COMMAND}", file=sys.stderr)
            return 1
        return 0
    target.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
