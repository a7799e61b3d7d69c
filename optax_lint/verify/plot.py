"""`optax-lint schedule train.py`: draw each extracted LR schedule in the terminal.

The schedule is sampled by the verification worker (real optax, built from the
spec), then drawn as a Unicode line chart with the warmup end, decay end and training
end marked, so a schedule that ends early or a warmup that is too short shows at a
glance. `--png FILE` draws the same samples with matplotlib (part of the verify extra).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Optional

import libcst as cst

from optax_lint.core.install import install_hint
from optax_lint.facts.module import ModuleFacts
from optax_lint.facts.schedules.calls import Schedule
from optax_lint.syntax.positions import Positions
from optax_lint.verify.spec import NotVerifiable, SpecBuilder


@dataclass
class ScheduleSeries:
    label: str  # "schedule = warmup_cosine_decay_schedule(...) at train.py:12"
    steps: list[int]
    values: list[float]
    marks: dict[str, int] = field(default_factory=dict)  # "warmup end" -> step
    assumed: list[str] = field(default_factory=list)  # settings read as their defaults, with where


def _int(value) -> Optional[int]:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return int(value)


def _values_of(schedule: Schedule, builder: Optional[SpecBuilder]):
    """The schedule's argument values: as written, or with settings assumed by `builder`."""
    if builder is None:
        return schedule.value

    def value(param: str):
        expr = schedule.args.expr(param)
        return builder.value(expr, schedule.scope) if expr is not None else schedule.value(param)

    return value


def schedule_marks(schedule: Schedule, builder: Optional[SpecBuilder] = None) -> dict[str, int]:
    marks = {}
    value = _values_of(schedule, builder)
    warmup = _int(value("warmup_steps")) if "warmup_steps" in schedule.entry.params else None
    if warmup:
        marks["warmup end"] = warmup
    if "decay_steps" in schedule.entry.params:
        decay = _int(value("decay_steps"))
        if decay:
            marks["decay end"] = decay
    if schedule.key in ("linear_schedule", "polynomial_schedule"):
        steps = _int(value("transition_steps"))
        begin = _int(value("transition_begin")) or 0
        if steps:
            marks["decay end"] = begin + steps
    if schedule.key == "join_schedules":
        bounds = value("boundaries")
        if isinstance(bounds, (list, tuple)):
            for i, b in enumerate(bounds):
                if _int(b) is not None:
                    marks[f"boundary {i + 1}"] = int(b)
    return marks


def schedule_length(schedule: Schedule, builder: Optional[SpecBuilder] = None) -> Optional[int]:
    """The step where the schedule reaches its final value, from its own arguments.

    A join_schedules ends where its last piece ends: the last boundary plus that
    piece's length, which is the sum of the pieces when the boundaries agree with them.
    """
    if schedule.key != "join_schedules":
        marks = [step for name, step in schedule_marks(schedule, builder).items()]
        return max(marks) if marks else None
    lengths = [schedule_length(piece, builder) for piece in schedule.pieces]
    bounds = _values_of(schedule, builder)("boundaries")
    if isinstance(bounds, (list, tuple)) and bounds and schedule.pieces and len(schedule.pieces) == len(bounds) + 1:
        last = _int(bounds[-1])
        if last is not None and lengths[-1] is not None:
            return last + lengths[-1]
    if schedule.pieces and all(length is not None for length in lengths):
        return sum(lengths)
    return None


def top_level_schedules(facts: ModuleFacts) -> list[Schedule]:
    """Schedules that are not pieces of a join_schedules."""
    schedules = facts.schedules
    pieces = {p.call for s in schedules for p in s.pieces}
    return [s for s in schedules if s.call not in pieces]


def collect_series(facts: ModuleFacts, worker, *, total_steps: Optional[int] = None, total_source: str = "",
                   points: int = 160):
    """(series, problems): sampled schedules, and why others could not be drawn.
    `total_source`: where the training length comes from, when it is read from the code."""
    positions = Positions(facts.module)
    builder = SpecBuilder(facts)
    series, problems = [], []
    for schedule in top_level_schedules(facts):
        span = positions.span(schedule.call)
        name = schedule.name or schedule.key
        label = f"{name} = {schedule.key}(...) at {facts.path}:{span.line}"
        try:
            spec = builder.build(schedule.call, schedule.scope)
        except NotVerifiable as exc:
            problems.append(f"{label}: not drawable: {exc.reason}")
            problems.extend(f"  assumed: {item}" for item in builder.assumed)
            continue
        marks = schedule_marks(schedule, builder)
        length = schedule_length(schedule, builder)
        assumed = [str(a) for a in builder.assumed]
        if total_steps and total_source:
            assumed.append(f"training end = {total_steps:,} steps, {total_source}")
        if schedule.key == "join_schedules" and length:
            marks["schedule end"] = length
        if total_steps:
            marks["training end"] = total_steps
        horizon = max(list(marks.values()) + [100])
        # With no known training length, show 10% past the schedule's end, where it stays.
        horizon = int(horizon * 1.1) if not total_steps else max(horizon, total_steps)
        steps = sorted({round(i * horizon / (points - 1)) for i in range(points)} | set(marks.values()))
        response = worker.request({"op": "schedule", "spec": spec, "steps": steps})
        if "samples" not in response:
            problems.append(f"{label}: {response.get('error', 'could not be sampled')}")
            continue
        series.append(ScheduleSeries(label, steps, response["samples"], marks, assumed))
    return series, problems


def _fmt(value: float) -> str:
    if value == 0:
        return "0"
    if abs(value) >= 1e4 or abs(value) < 1e-3:
        return f"{value:.2e}"
    return f"{value:.4g}"


def _tick(value: float) -> str:
    """A round axis value as written in code: 0, 1e-4, 2.5e-4, 0.01, 0.5, 3."""
    if value == 0:
        return "0"
    if abs(value) < 1e-2 or abs(value) >= 1e5:
        mantissa, exponent = f"{value:.2e}".split("e")
        return f"{float(mantissa):g}e{int(exponent)}"
    return f"{value:.6g}"


def nice_ticks(lo: float, hi: float, count: int = 4) -> list[float]:
    """Round values (1, 2, 2.5 or 5 times a power of ten apart) spanning lo..hi."""
    span = hi - lo
    raw = span / max(1, count - 1)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw * (1 - 1e-5))
    # Samples are float32: 1e-3 comes back as 0.0010000000475, which is still 1e-3.
    first = math.floor(lo / step + 1e-5)
    last = math.ceil(hi / step - 1e-5)
    return [round(k * step, 12) for k in range(first, last + 1)]


def grouped_marks(marks: dict[str, int]) -> list[tuple[str, int]]:
    """Marks that fall on one step, named together ("decay end, training end"), by step."""
    names: dict[int, list[str]] = {}
    for name, step in sorted(marks.items(), key=lambda kv: kv[1]):
        names.setdefault(step, []).append(name)
    return [(", ".join(group), step) for step, group in names.items()]


def render_chart(series: ScheduleSeries, width: int = 72, height: int = 12) -> str:
    """An asciichart-style line chart: one column per step bucket, box-drawing joins."""
    values = series.values
    steps = series.steps
    last = steps[-1] or 1
    columns = []
    for c in range(width):
        target = c * last / (width - 1)
        index = min(range(len(steps)), key=lambda i: abs(steps[i] - target))
        columns.append(values[index])
    finite = [v for v in columns if math.isfinite(v)]
    lo, hi = (min(finite), max(finite)) if finite else (0.0, 1.0)
    if hi == lo:
        hi = lo + (abs(lo) or 1.0)
    # The axis spans round values, so its labels read as the numbers in the code; each
    # sits exactly on a row: the chart drops the rows (at most a few) that do not divide.
    for count in (4, 3, 2):
        ticks = nice_ticks(lo, hi, count)
        if len(ticks) - 1 <= height - 1:
            break
    lo, hi = ticks[0], ticks[-1]
    height = (height - 1) // (len(ticks) - 1) * (len(ticks) - 1) + 1

    def row(v: float) -> int:
        return round((v - lo) / (hi - lo) * (height - 1)) if math.isfinite(v) else 0

    grid = [[" "] * width for _ in range(height)]
    rows = [row(v) for v in columns]
    for x in range(width):
        y = rows[x]
        if x == 0:
            grid[y][x] = "─"
            continue
        prev = rows[x - 1]
        if y == prev:
            grid[y][x] = "─"
        elif y > prev:
            grid[prev][x] = "╯"
            grid[y][x] = "╭"
            for k in range(prev + 1, y):
                grid[k][x] = "│"
        else:
            grid[prev][x] = "╮"
            grid[y][x] = "╰"
            for k in range(y + 1, prev):
                grid[k][x] = "│"
    labels: dict[int, str] = {}
    for tick in ticks:  # two ticks on one row (a short chart): the first keeps it
        labels.setdefault(row(tick), _tick(tick))
    label_width = max(len(text) for text in labels.values())
    lines = [series.label] + [f"  assumed: {item}" for item in series.assumed]
    for r in range(height - 1, -1, -1):
        label = labels.get(r, "")
        lines.append(f"{label:>{label_width}} ┤{''.join(grid[r])}")
    axis = [" "] * width
    legend = []
    for name, step in grouped_marks(series.marks):
        x = min(width - 1, round(step / last * (width - 1)))
        axis[x] = "┬"
        index = steps.index(step) if step in steps else min(range(len(steps)), key=lambda i: abs(steps[i] - step))
        legend.append(f"{name}: step {step:,} (lr {_fmt(values[index])})")
    lines.append(" " * label_width + " └" + "".join(axis))
    lines.append(" " * label_width + f"  0{' ' * (width - 1 - len(f'{last:,}'))}{last:,}")
    lines.append(" " * label_width + f"  start lr {_fmt(values[0])}; end lr {_fmt(values[-1])}")
    for item in legend:
        lines.append(" " * label_width + "  ┬ " + item)
    return "\n".join(lines) + "\n"


def png_unavailable() -> Optional[str]:
    """Why --png cannot work here (matplotlib missing), checked before any sampling."""
    from optax_lint.verify.runner import module_available

    if module_available("matplotlib"):
        return None
    return f"--png needs matplotlib: pip install matplotlib (the verify extra includes it: {install_hint('verify')})"


def write_png(series_list: list[ScheduleSeries], path: str) -> Optional[str]:
    """Draw with matplotlib; returns an error message when it is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return png_unavailable() or "--png: matplotlib could not be imported"
    fig, axes = plt.subplots(len(series_list), 1, figsize=(8, 3 * len(series_list)), squeeze=False)
    for ax, series in zip(axes[:, 0], series_list):
        ax.plot(series.steps, series.values)
        for name, step in grouped_marks(series.marks):
            ax.axvline(step, linestyle="--", linewidth=0.8)
            ax.annotate(name, (step, max(series.values)), rotation=90, fontsize=7, va="top")
        ax.set_title(series.label, fontsize=8)
        ax.set_xlabel("step")
        ax.set_ylabel("learning rate")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return None


def plot_text(text: str, path: str, worker, *, context: Optional[dict] = None, root: Optional[str] = None,
              **kwargs) -> tuple[list[ScheduleSeries], list[str]]:
    """`context`: the run context declared for the file, whose values come first."""
    facts = ModuleFacts(cst.parse_module(text), path, text=text, declared_context=context, root=root)
    return collect_series(facts, worker, **kwargs)
