"""Exact output of every reporter format, built from hand-made findings."""

from __future__ import annotations

import json

import pytest

from optax_lint.core.diagnostics import (
    Applicability,
    Edit,
    FileResult,
    Finding,
    Fix,
    Related,
    Severity,
    Span,
)
from optax_lint.reporters import ReportOptions, render, use_color

TRAIN = (
    "import optax\n"
    "\n"
    "def make():\n"
    "    tx = optax.chain(\n"
    "        optax.adamw(learning_rate=1e-3),\n"
    "        optax.clip_by_global_norm(1.0),\n"
    "    )\n"
    "    return tx\n"
)


def _apply(module):
    return module


def finding(
    code="OPX101",
    *,
    path="train.py",
    span=Span(6, 9, 6, 39),
    severity=Severity.ERROR,
    message="clip_by_global_norm(1.0) runs after adamw(...)",
    name="clip-after-optimizer",
    fix=None,
    related=(),
) -> Finding:
    return Finding(code, name, severity, message, path, span, fix=fix, related=list(related))


def fix(applicability=Applicability.SAFE, title="Move clip_by_global_norm(1.0) to the front") -> Fix:
    apply = None if applicability is Applicability.DISPLAY_ONLY else _apply
    return Fix(title, applicability, apply=apply)


def out(findings, fmt="full", sources=None, **opts) -> str:
    return render(
        [FileResult(path="x", findings=list(findings))],
        fmt,
        sources={"train.py": TRAIN} if sources is None else sources,
        options=ReportOptions(**opts),
    )


# --- full: code frames -------------------------------------------------------


def test_full_single_line_span_with_help_and_related_note():
    f = finding(
        fix=fix(),
        related=[Related("chain built here", Span(4, 10, 7, 6)), Related("optimizer", Span(2, 1, 2, 5), path="opt.py")],
    )
    assert out([f]) == (
        "train.py:6:9: OPX101 error [*] clip_by_global_norm(1.0) runs after adamw(...)\n"
        "  |\n"
        "5 |         optax.adamw(learning_rate=1e-3),\n"
        "6 |         optax.clip_by_global_norm(1.0),\n"
        "  |         ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^ OPX101\n"
        "7 |     )\n"
        "  |\n"
        "  = help: Move clip_by_global_norm(1.0) to the front\n"
        "  = note: chain built here: train.py:4:10\n"
        "  = note: optimizer: opt.py:2:1\n"
        "\n"
        "Found 1 problem (1 fixable with --fix).\n"
    )


def test_full_gutter_is_as_wide_as_the_widest_line_number():
    src = "".join(f"x{i} = {i}\n" for i in range(1, 12))
    f = finding(path="a.py", span=Span(9, 1, 9, 3), message="m")
    assert out([f], sources={"a.py": src}, quiet=True) == (
        "a.py:9:1: OPX101 error m\n"
        "   |\n"
        " 8 | x8 = 8\n"
        " 9 | x9 = 9\n"
        "   | ^^ OPX101\n"
        "10 | x10 = 10\n"
        "   |\n"
        "\n"
    )


def test_full_multi_line_span_underlines_each_covered_line():
    f = finding("OPX102", span=Span(4, 10, 7, 6), severity=Severity.WARNING, message="chain")
    assert out([f], quiet=True) == (
        "train.py:4:10: OPX102 warning chain\n"
        "  |\n"
        "3 | def make():\n"
        "4 |     tx = optax.chain(\n"
        "  |          ^^^^^^^^^^^^\n"
        "5 |         optax.adamw(learning_rate=1e-3),\n"
        "  |         ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
        "6 |         optax.clip_by_global_norm(1.0),\n"
        "  |         ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
        "7 |     )\n"
        "  |     ^ OPX102\n"
        "8 |     return tx\n"
        "  |\n"
        "\n"
    )


def test_full_span_ending_at_column_1_stops_at_the_previous_line_and_skips_blank_lines():
    src = "a = (1,\n\n     2)\nb = 3\n"
    f = finding(path="a.py", span=Span(1, 5, 4, 1), message="m")
    assert out([f], sources={"a.py": src}, quiet=True) == (
        "a.py:1:5: OPX101 error m\n"
        "  |\n"
        "1 | a = (1,\n"
        "  |     ^^^\n"
        "2 |\n"
        "3 |      2)\n"
        "  |      ^^ OPX101\n"
        "4 | b = 3\n"
        "  |\n"
        "\n"
    )


def test_full_long_span_shows_first_and_last_line_around_an_ellipsis():
    src = "".join(f"line{i}\n" for i in range(1, 15))
    f = finding(path="a.py", span=Span(2, 3, 12, 4), message="long")
    assert out([f], sources={"a.py": src}, quiet=True) == (
        "a.py:2:3: OPX101 error long\n"
        "   |\n"
        " 1 | line1\n"
        " 2 | line2\n"
        "   |   ^^^\n"
        "...\n"
        "12 | line12\n"
        "   | ^^^ OPX101\n"
        "13 | line13\n"
        "   |\n"
        "\n"
    )


def test_full_cjk_characters_take_two_cells():
    src = "label = '学习率' + x\n"
    # columns: l=1 ... '=9, 学=10, 习=11, 率=12, '=13, space=14, +=15
    f = finding(path="c.py", span=Span(1, 10, 1, 13), message="cjk")
    g = finding("OPX103", path="c.py", span=Span(1, 15, 1, 16), message="plus")
    text = out([f, g], sources={"c.py": src}, quiet=True)
    assert text == (
        "c.py:1:10: OPX101 error cjk\n"
        "  |\n"
        "1 | label = '学习率' + x\n"
        "  |          ^^^^^^ OPX101\n"
        "  |\n"
        "\n"
        "c.py:1:15: OPX103 error plus\n"
        "  |\n"
        "1 | label = '学习率' + x\n"
        "  |                  ^ OPX103\n"
        "  |\n"
        "\n"
    )


def test_full_non_ascii_columns_are_characters_not_bytes():
    src = "café = lr(1e-3)\n"
    f = finding(path="n.py", span=Span(1, 8, 1, 10), message="m")
    assert out([f], sources={"n.py": src}, quiet=True).splitlines()[2:4] == [
        "1 | café = lr(1e-3)",
        "  |        ^^ OPX101",
    ]


def test_full_tabs_are_expanded_the_same_way_in_source_and_carets():
    src = "if x:\n\ty\t= 1\n"
    # "\ty\t= 1" -> "    y   = 1": 'y' at cell 4, the second tab fills cells 5-7.
    f = finding(path="t.py", span=Span(2, 2, 2, 5), message="tab")
    assert out([f], sources={"t.py": src}, quiet=True) == (
        "t.py:2:2: OPX101 error tab\n"
        "  |\n"
        "1 | if x:\n"
        "2 |     y   = 1\n"
        "  |     ^^^^^ OPX101\n"
        "  |\n"
        "\n"
    )


def test_full_control_characters_in_source_are_not_sent_to_the_terminal():
    f = finding(path="e.py", span=Span(1, 1, 1, 4), message="m")
    text = out([f], sources={"e.py": "a\x1b[31mb\n"}, quiet=True)
    assert "\x1b" not in text
    assert "1 | a\u241b[31mb\n  | ^^^ OPX101\n" in text


def test_full_without_source_prints_header_help_and_notes_only():
    f = finding(fix=fix(Applicability.DISPLAY_ONLY, "do it"), related=[Related("here", Span(4, 10, 4, 21))])
    assert out([f], sources={}, quiet=True) == (
        "train.py:6:9: OPX101 error clip_by_global_norm(1.0) runs after adamw(...)\n"
        "  = help: do it\n"
        "  = note: here: train.py:4:10\n"
        "\n"
    )


def test_full_show_fixes_off_hides_help():
    f = finding(fix=fix())
    assert "= help" not in out([f], show_fixes=False)
    assert "= help" in out([f], show_fixes=True)


def test_findings_are_sorted_across_results_by_path_line_column_code():
    a = finding("OPX200", path="b.py", span=Span(1, 1, 1, 2), message="b")
    b = finding("OPX102", path="a.py", span=Span(2, 1, 2, 2), message="a2")
    c = finding("OPX101", path="a.py", span=Span(2, 1, 2, 2), message="a1")
    d = finding("OPX300", path="a.py", span=Span(1, 5, 1, 6), message="a0")
    results = [FileResult("b.py", [a]), FileResult("a.py", [b, c, d])]
    text = render(results, "concise", sources={}, options=ReportOptions(quiet=True))
    assert text == (
        "a.py:1:5: OPX300 error a0\n"
        "a.py:2:1: OPX101 error a1\n"
        "a.py:2:1: OPX102 error a2\n"
        "b.py:1:1: OPX200 error b\n"
    )


# --- markers and summaries ---------------------------------------------------


@pytest.mark.parametrize(
    "applicability, unsafe_fixes, marked",
    [
        (Applicability.SAFE, False, True),
        (Applicability.SAFE, True, True),
        (Applicability.UNSAFE, False, False),
        (Applicability.UNSAFE, True, True),
        (Applicability.DISPLAY_ONLY, False, False),
        (Applicability.DISPLAY_ONLY, True, False),
    ],
)
def test_fix_marker(applicability, unsafe_fixes, marked):
    f = finding(message="m", fix=fix(applicability))
    line = out([f], "concise", quiet=True, unsafe_fixes=unsafe_fixes)
    assert line == ("train.py:6:9: OPX101 error [*] m\n" if marked else "train.py:6:9: OPX101 error m\n")


def _mix(safe=0, unsafe=0, display=0, plain=0):
    fixes = (
        [fix(Applicability.SAFE)] * safe
        + [fix(Applicability.UNSAFE)] * unsafe
        + [fix(Applicability.DISPLAY_ONLY)] * display
        + [None] * plain
    )
    return [finding(message="m", span=Span(i + 1, 1, i + 1, 2), fix=fx) for i, fx in enumerate(fixes)]


def _summary(findings, **opts):
    return out(findings, "concise", sources={}, **opts).splitlines()[len(findings) :]


@pytest.mark.parametrize(
    "mix, opts, expected",
    [
        ({}, {}, ["All checks passed!"]),
        ({"plain": 1}, {}, ["Found 1 problem."]),
        ({"plain": 2, "display": 1}, {}, ["Found 3 problems."]),
        ({"safe": 1}, {}, ["Found 1 problem (1 fixable with --fix)."]),
        ({"safe": 2, "plain": 1}, {}, ["Found 3 problems (2 fixable with --fix)."]),
        ({"safe": 2, "unsafe": 1}, {}, ["Found 3 problems (2 fixable with --fix, 1 more with --unsafe-fixes)."]),
        ({"safe": 2, "unsafe": 1}, {"unsafe_fixes": True}, ["Found 3 problems (3 fixable with --fix)."]),
        ({"unsafe": 1}, {}, ["Found 1 problem (1 hidden fix can be enabled with the `--unsafe-fixes` option)."]),
        ({"unsafe": 2}, {}, ["Found 2 problems (2 hidden fixes can be enabled with the `--unsafe-fixes` option)."]),
        ({}, {"fixed_total": 1}, ["Found 1 problem (1 fixed, 0 remaining)."]),
        ({"plain": 2}, {"fixed_total": 3}, ["Found 5 problems (3 fixed, 2 remaining)."]),
        (
            {"unsafe": 1, "plain": 1},
            {"fixed_total": 3},
            [
                "Found 5 problems (3 fixed, 2 remaining).",
                "1 hidden fix can be enabled with the `--unsafe-fixes` option.",
            ],
        ),
    ],
)
def test_summary_wording(mix, opts, expected):
    assert _summary(_mix(**mix), **opts) == expected


def test_full_summary_follows_a_blank_line_and_clean_run_says_all_passed():
    assert out([], "full") == "All checks passed!\n"
    assert out([], "concise") == "All checks passed!\n"
    assert out(_mix(plain=1), "full", sources={}).endswith("OPX101 error m\n\nFound 1 problem.\n")


def test_quiet_prints_findings_only_and_nothing_when_clean():
    assert out([], "full", quiet=True) == ""
    assert out([], "concise", quiet=True) == ""
    assert out(_mix(safe=1), "concise", quiet=True) == "train.py:1:1: OPX101 error [*] m\n"


def test_statistics_table_sorted_by_count_then_code():
    fs = [
        finding("OPX205", name="missing-schedule", message="m", fix=None),
        finding("OPX101", name="clip-after-optimizer", message="m", fix=fix(Applicability.UNSAFE)),
        finding("OPX101", name="clip-after-optimizer", message="m", fix=None),
        finding("OPX103", name="bf16", message="m", fix=fix()),
        finding("OPX103", name="bf16", message="m", fix=None),
        finding("OPX1000", name="x", message="m", fix=None),
    ]
    assert out(fs, "full", statistics=True) == (
        "2  OPX101   clip-after-optimizer\n"
        "2  OPX103   bf16                  [*]\n"
        "1  OPX1000  x\n"
        "1  OPX205   missing-schedule\n"
        "Found 6 problems (1 fixable with --fix, 1 more with --unsafe-fixes).\n"
    )
    # With --unsafe-fixes the unsafe one counts as fixable for its code too.
    assert out(fs, "concise", statistics=True, unsafe_fixes=True, quiet=True).splitlines()[0] == (
        "2  OPX101   clip-after-optimizer  [*]"
    )


def test_statistics_with_nothing_found():
    assert out([], "full", statistics=True) == "All checks passed!\n"


# --- colour ------------------------------------------------------------------


def test_colour_off_emits_no_escapes():
    f = finding(fix=fix())
    assert "\x1b" not in out([f], "full", color=False)


def test_colour_on_styles_path_code_carets_and_help():
    f = finding(fix=fix(), severity=Severity.WARNING, message="m")
    lines = out([f], "full", color=True, quiet=True).splitlines()
    assert lines[0] == "\x1b[1mtrain.py\x1b[0m:6:9: \x1b[33mOPX101\x1b[0m \x1b[33mwarning\x1b[0m [\x1b[36m*\x1b[0m] m"
    assert lines[4] == "  |         \x1b[33m" + "^" * 30 + "\x1b[0m \x1b[33mOPX101\x1b[0m"
    assert lines[7] == "  \x1b[36m= help: Move clip_by_global_norm(1.0) to the front\x1b[0m"


@pytest.mark.parametrize("severity, ansi", [(Severity.ERROR, "31"), (Severity.INFO, "36")])
def test_colour_of_code_follows_severity(severity, ansi):
    line = out([finding(severity=severity, message="m")], "concise", color=True, quiet=True)
    assert f"\x1b[{ansi}mOPX101\x1b[0m" in line


class FakeStream:
    def __init__(self, tty: bool):
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


class ClosedStream:
    def isatty(self) -> bool:
        raise ValueError("I/O operation on closed file")


@pytest.mark.parametrize(
    "env, tty, expected",
    [
        ({}, True, True),
        ({}, False, False),
        ({"NO_COLOR": "1"}, True, False),
        ({"NO_COLOR": ""}, True, False),  # any value, even empty
        ({"FORCE_COLOR": "1"}, False, True),
        ({"FORCE_COLOR": "0"}, False, False),
        ({"NO_COLOR": "1", "FORCE_COLOR": "1"}, True, False),  # NO_COLOR wins
    ],
)
def test_use_color(monkeypatch, env, tty, expected):
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert use_color(FakeStream(tty)) is expected


def test_use_color_with_streams_that_cannot_answer(monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    assert use_color(object()) is False
    assert use_color(ClosedStream()) is False


# --- json --------------------------------------------------------------------


def test_json_round_trip_with_fix_edits_and_related():
    f = finding(
        fix=Fix(
            "Move it",
            Applicability.UNSAFE,
            apply=_apply,
            edits=[Edit(Span(6, 1, 7, 1), ""), Edit(Span(5, 1, 5, 1), "        optax.clip_by_global_norm(1.0),\n")],
        ),
        related=[Related("chain built here", Span(4, 10, 7, 6))],
        message="学习率 is ünïcode",
    )
    g = finding("OPX205", path="a.py", span=Span(1, 1, 1, 2), severity=Severity.INFO, message="m")
    text = out([f, g], "json", fixed_total=3)
    data = json.loads(text)
    assert [d["path"] for d in data] == ["a.py", "train.py"]  # sorted, no summary text
    assert data[0]["fix"] is None and data[0]["severity"] == "info"
    d = data[1]
    assert d["message"] == "学习率 is ünïcode"
    assert d["url"] is None
    assert (d["line"], d["column"], d["end_line"], d["end_column"]) == (6, 9, 6, 39)
    assert d["fix"]["applicability"] == "unsafe"
    assert d["fix"]["edits"] == [
        {"content": "", "line": 6, "column": 1, "end_line": 7, "end_column": 1},
        {"content": "        optax.clip_by_global_norm(1.0),\n", "line": 5, "column": 1, "end_line": 5, "end_column": 1},
    ]
    assert d["related"] == [{"message": "chain built here", "line": 4, "column": 10, "end_line": 7, "end_column": 6}]
    assert list(d) == [*f.to_dict(), "url"]  # stable key order
    assert text.startswith("[\n  {\n    \"code\": ")  # pretty, indent 2


def test_json_with_no_findings_is_an_empty_array():
    assert out([], "json") == "[]\n"
    assert json.loads(out([], "json", fixed_total=2)) == []


def test_json_statistics():
    fs = [finding("OPX101", message="m", fix=fix()), finding("OPX101", message="m"), finding("OPX102", name="n")]
    assert json.loads(out(fs, "json", statistics=True)) == [
        {"code": "OPX101", "name": "clip-after-optimizer", "count": 2, "fixable": True},
        {"code": "OPX102", "name": "n", "count": 1, "fixable": False},
    ]


# --- github ------------------------------------------------------------------


def test_github_command_per_finding_with_level_by_severity():
    fs = [
        finding(message="clip after adamw", fix=fix()),
        finding("OPX205", name="missing-schedule", span=Span(7, 1, 7, 2), severity=Severity.WARNING, message="w"),
        finding("OPX300", name="advice", span=Span(8, 5, 8, 7), severity=Severity.INFO, message="i"),
    ]
    assert out(fs, "github", fixed_total=2) == (
        "::error file=train.py,line=6,col=9,endLine=6,endColumn=39,title=OPX101 (clip-after-optimizer)"
        "::train.py:6:9: OPX101 clip after adamw\n"
        "::warning file=train.py,line=7,col=1,endLine=7,endColumn=2,title=OPX205 (missing-schedule)"
        "::train.py:7:1: OPX205 w\n"
        "::notice file=train.py,line=8,col=5,endLine=8,endColumn=7,title=OPX300 (advice)"
        "::train.py:8:5: OPX300 i\n"
    )


def test_github_escaping():
    f = finding(path="dir,a:b%c.py", span=Span(1, 2, 3, 4), message="100% of lr, a:b\nsecond\r\nthird")
    assert out([f], "github") == (
        "::error file=dir%2Ca%3Ab%25c.py,line=1,col=2,endLine=3,endColumn=4,title=OPX101 (clip-after-optimizer)"
        "::dir,a:b%25c.py:1:2: OPX101 100%25 of lr, a:b%0Asecond%0D%0Athird\n"
    )


def test_github_with_no_findings_prints_nothing():
    assert out([], "github") == ""


def test_unknown_format_is_an_error():
    with pytest.raises(ValueError, match="unknown output format 'xml'"):
        out([], "xml")


def test_degenerate_spans_never_break_the_frame():
    src = "ab\ncd\n"
    zero = finding(path="z.py", span=Span(1, 2, 1, 2), message="zero")
    past_eol = finding("OPX102", path="z.py", span=Span(2, 3, 2, 9), message="eol")
    past_eof = finding("OPX103", path="z.py", span=Span(9, 1, 9, 2), message="eof")
    assert out([zero, past_eol, past_eof], sources={"z.py": src}, quiet=True) == (
        "z.py:1:2: OPX101 error zero\n"
        "  |\n"
        "1 | ab\n"
        "  |  ^ OPX101\n"
        "2 | cd\n"
        "  |\n"
        "\n"
        "z.py:2:3: OPX102 error eol\n"
        "  |\n"
        "1 | ab\n"
        "2 | cd\n"
        "  |   ^ OPX102\n"
        "  |\n"
        "\n"
        "z.py:9:1: OPX103 error eof\n"
        "\n"
    )
