"""What a user reads: every rule links a section of docs/protocol.md that exists, no
text points at documents the user never saw, and every finding says what to do."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from optax_lint.core.catalogue import load_catalogue

# Its module fixtures are costly: one xdist worker computes them once (--dist loadgroup).
pytestmark = pytest.mark.xdist_group("rule_texts")

ROOT = Path(__file__).resolve().parent.parent
PROTOCOL = ROOT / "docs" / "protocol.md"
# "seed 000", "seed 2", "seed 004's", "the protocol (seed": references to internal documents.
_SEED_REF = re.compile(r"\bseeds?\b[\s,]*(?:\d|'s)|\(seed\b|the seeds'", re.I)


def _anchors(markdown: str) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    out = set()
    for line in markdown.splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            out.add(re.sub(r"\s", "-", re.sub(r"[^\w\s-]", "", title)))
    return out


def _user_texts() -> list[tuple[str, str]]:
    texts = []
    for code, spec in load_catalogue().items():
        for label, text in [
            ("summary", spec.summary), ("message", spec.message), ("fix_title", spec.fix_title),
            ("help", spec.help), *[(f"basis[{i}]", b) for i, b in enumerate(spec.basis)],
            *[(f"doc.{k}", v) for k, v in spec.doc.items()],
        ]:
            texts.append((f"{code} {label}", text))
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        texts.append((str(path.relative_to(ROOT)), path.read_text(encoding="utf-8")))
    for path in sorted((ROOT / "optax_lint" / "rules").glob("*.py")):
        source = path.read_text(encoding="utf-8")
        docstring = source.split('"""')[1] if source.startswith('"""') else ""
        texts.append((f"{path.name} docstring", docstring))
    return texts


def test_every_rule_links_an_existing_protocol_section() -> None:
    anchors = _anchors(PROTOCOL.read_text(encoding="utf-8"))
    assert {"optimizer", "warmup", "multi-device-training", "keeping-up-with-the-libraries"} <= anchors
    for code, spec in load_catalogue().items():
        if spec.family == "meta":
            continue
        assert spec.protocol, f"{code} has no protocol section"
        assert spec.protocol in anchors, f"{code} links docs/protocol.md#{spec.protocol}, which does not exist"


def test_protocol_sections_state_choice_reason_and_source() -> None:
    text = PROTOCOL.read_text(encoding="utf-8")
    sections = re.split(r"^## ", text, flags=re.M)[1:]
    assert len(sections) == 11
    for section in sections:
        title = section.splitlines()[0]
        assert "**Reasons.**" in section, f"section {title!r} gives no reason"
    for fact in ("1-5%", "2000", "1.0 for Transformers", "5.0 for", "0.01-0.1", "pmean", "opt_state", "inject_hyperparams"):
        assert fact in text


def test_no_user_text_names_an_internal_document() -> None:
    bad = [(where, m.group(0)) for where, text in _user_texts() for m in [_SEED_REF.search(text)] if m]
    assert bad == []


def test_no_message_assumes_the_user_read_the_protocol() -> None:
    for code, spec in load_catalogue().items():
        for text in (spec.message, spec.summary, spec.fix_title, spec.help):
            assert "protocol" not in text.lower(), f"{code}: {text}"


def test_every_rule_has_help_text() -> None:
    for code, spec in load_catalogue().items():
        assert spec.help.strip(), f"{code} has no help line"


@pytest.fixture(scope="module")
def all_fixture_findings() -> list[dict]:
    proc = subprocess.run(
        [sys.executable, "-m", "optax_lint", "fixtures", "--output-format", "json", "--exit-zero"],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_every_finding_on_every_fixture_has_help(all_fixture_findings) -> None:
    assert len(all_fixture_findings) > 100
    missing = [(f["path"], f["line"], f["code"]) for f in all_fixture_findings if not (f.get("help") or "").strip()]
    assert missing == []
    unfilled = [f["help"] for f in all_fixture_findings if re.search(r"\{[a-z_]+\}", f["help"])]
    assert unfilled == []  # a template field the finding had no value for


def test_no_finding_message_mentions_the_protocol_or_a_seed(all_fixture_findings) -> None:
    bad = [(f["code"], f["message"]) for f in all_fixture_findings if "protocol" in f["message"].lower() or _SEED_REF.search(f["message"])]
    assert bad == []


@pytest.mark.parametrize(
    "fixture, code",
    [
        ("fixtures/OPX304/bad_long_run_kinds_declared.py", "OPX304"),
        ("fixtures/OPX501/bad_pickle_params_every_epoch.py", "OPX501"),
        ("fixtures/OPX505/bad_legacy_orbax_forms.py", "OPX505"),
    ],
)
def test_full_output_prints_a_help_line_for_rules_without_a_fix(fixture: str, code: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "optax_lint", fixture, "--select", code, "--output-format", "full"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    blocks = [b for b in proc.stdout.split("\n\n") if f" {code} " in b.split("\n")[0]]
    assert blocks, proc.stdout + proc.stderr
    for block in blocks:
        assert "= help: " in block, block


def test_decay_after_a_wrapped_optimizer_has_a_help_line(tmp_path: Path) -> None:
    """OPX102 offers no fix when the negating optimizer is wrapped (MultiSteps); the
    finding still says what to do."""
    src = tmp_path / "train.py"
    src.write_text(
        "import optax\n"
        "tx = optax.chain(optax.MultiSteps(optax.adam(1e-3), every_k_schedule=4), optax.add_decayed_weights(1e-4))\n",
        encoding="utf-8",
    )
    proc = subprocess.run([sys.executable, "-m", "optax_lint", str(src), "--select", "OPX102"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert " OPX102 " in proc.stdout and "[*]" not in proc.stdout
    assert "= help: Use adamw(..., weight_decay=...) for decoupled decay" in proc.stdout


def test_rule_documentation_links_its_section_and_says_what_to_do() -> None:
    proc = subprocess.run([sys.executable, "-m", "optax_lint", "rule", "OPX304"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert "Protocol: docs/protocol.md#learning-rate-schedule" in proc.stdout
    assert "What to do: Use the schedule for this run length" in proc.stdout
    assert "seed" not in proc.stdout.lower()
    doc = load_catalogue()["OPX201"].render_doc()
    assert "What to do: Add optax.clip_by_global_norm(<max_norm>)" in doc  # fields shown by name
