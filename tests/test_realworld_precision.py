"""benchmarks/realworld/precision.py on a tiny made-up judged table (no corpus needed)."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("realworld_precision", ROOT / "benchmarks/realworld/precision.py")
precision = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = precision  # dataclasses look their module up
spec.loader.exec_module(precision)

HEADER = "repo\tpath\tline\tcode\tverdict\treason\n"


def finding(path: str, line: int, code: str, severity: str = "warning") -> dict:
    return {"path": path, "line": line, "code": code, "severity": severity, "message": f"{code} here"}


def run(tmp_path: Path, rows: str, raw: list[dict], *extra: str) -> tuple[int, str]:
    judged = tmp_path / "judged.tsv"
    judged.write_text(HEADER + rows, encoding="utf-8")
    found = tmp_path / "run.json"
    found.write_text(json.dumps(raw), encoding="utf-8")
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = precision.main(["--judged", str(judged), "--findings", str(found), *extra])
    return code, buf.getvalue()


def test_moved_lines_match_nearest_row_once():
    rows = [precision.Row("a/b", "t.py", 10, "OPX201", "TRUE", "r"), precision.Row("a/b", "t.py", 40, "OPX201", "FALSE", "r")]
    found = precision.to_findings([finding("a+b/t.py", 13, "OPX201"), finding("a+b/t.py", 44, "OPX201"), finding("a+b/t.py", 90, "OPX201")])
    left = precision.match(found, rows, tolerance=20)
    assert [f.row.verdict if f.row else None for f in found] == ["TRUE", "FALSE", None]
    assert left == []


def test_exact_line_wins_over_a_nearer_moved_partner():
    rows = [precision.Row("a/b", "t.py", 10, "OPX701", "TRUE", "x"), precision.Row("a/b", "t.py", 12, "OPX701", "FALSE", "y")]
    found = precision.to_findings([finding("a+b/t.py", 12, "OPX701")])
    left = precision.match(found, rows, tolerance=20)
    assert found[0].row.reason == "y"
    assert [r.reason for r in left] == ["x"]


def test_check_fails_on_false_error_and_reports_lost_true(tmp_path):
    rows = (
        "a/b\tt.py\t5\tOPX104\tFALSE\tmasked halves\n"
        "a/b\tt.py\t9\tOPX701\tTRUE\tdeprecated name\n"
    )
    code, out = run(tmp_path, rows, [finding("a+b/t.py", 5, "OPX104", "error")], "--check")
    assert code == 1
    assert "OPX104 at error severity judged FALSE: a/b/t.py:5" in out
    assert "LOST TRUE\ta/b/t.py:9\tOPX701" in out
    assert "| OPX104 | 1 | 0 | 0 | 1 | 0 | 0% |" in out


def test_check_passes_when_all_true_and_flags_unjudged(tmp_path):
    rows = "".join(f"a/b\tt.py\t{n}\tOPX701\tTRUE\tok\n" for n in range(1, 6))
    raw = [finding("a+b/t.py", n, "OPX701") for n in range(1, 6)]
    assert run(tmp_path, rows, raw, "--check")[0] == 0
    code, out = run(tmp_path, rows, raw + [finding("a+b/u.py", 3, "OPX301")], "--check")
    assert code == 1
    assert "OPX301: 1 unjudged findings" in out
    assert run(tmp_path, rows, raw + [finding("a+b/u.py", 3, "OPX301")], "--check", "--allow-unjudged")[0] == 0


def test_precision_under_ninety_percent_fails(tmp_path):
    rows = "".join(f"a/b\tt.py\t{n}\tOPX201\t{'TRUE' if n < 10 else 'DEBATABLE'}\tr\n" for n in range(1, 11))
    raw = [finding("a+b/t.py", n, "OPX201") for n in range(1, 11)]
    assert run(tmp_path, rows, raw, "--check")[0] == 0  # 9 of 10 is 90%
    rows = rows.replace("9\tOPX201\tTRUE", "9\tOPX201\tDEBATABLE")
    code, out = run(tmp_path, rows, raw, "--check")
    assert code == 1 and "OPX201: precision 80% on 10 findings" in out


def test_rows_of_repositories_left_out_of_the_corpus_are_set_aside(tmp_path):
    """A corpus rebuilt with --skip-missing lists the repositories it lacks: their judged
    rows are out of the run, not lost; a present repository's missing finding still is."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "missing.txt").write_text("gone/repo\n", encoding="utf-8")
    rows = "gone/repo\tt.py\t3\tOPX201\tTRUE\tr\nhere/repo\tt.py\t5\tOPX201\tTRUE\tr\n"
    code, out = run(tmp_path, rows, [], "--corpus", str(corpus))
    assert "1 pinned repositories are not in this corpus" in out
    assert "1 judged findings no longer reported (1 of them TRUE" in out
    assert "here/repo/t.py:5" in out and "gone/repo" not in out.split("no longer reported", 1)[1]


def test_rebuild_skips_repositories_without_a_mirror(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("realworld_rebuild", ROOT / "benchmarks/realworld/rebuild.py")
    rebuild = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(rebuild)
    import subprocess

    work = tmp_path / "work"
    work.mkdir()
    (work / "train.py").write_text("import optax\n", encoding="utf-8")
    (work / "other.py").write_text("x = 1\n", encoding="utf-8")
    git = ["git", "-C", str(work), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "c"], check=True)
    commit = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
    mirrors = tmp_path / "mirrors"
    (mirrors / "have+repo").mkdir(parents=True)
    (work / ".git").rename(mirrors / "have+repo" / "repo")
    here = tmp_path / "here"
    here.mkdir()
    (here / "PINS.tsv").write_text(f"repo\tcommit\nhave/repo\t{commit}\nlost/repo\t{commit}\n", encoding="utf-8")
    monkeypatch.setattr(rebuild, "HERE", here)
    out = tmp_path / "corpus"
    assert rebuild.main(["--mirrors", str(mirrors), "--corpus", str(out), "--skip-missing"]) == 0
    assert (out / "files.txt").read_text(encoding="utf-8") == "have+repo/train.py\n"
    assert (out / "missing.txt").read_text(encoding="utf-8") == "lost/repo\n"
    assert (out / "have+repo" / "other.py").is_file()
