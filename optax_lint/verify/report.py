"""`--verify`: build each extracted pipeline under JAX (in the worker) and measure
the properties the rules protect; render the evidence as a table per pipeline."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from optax_lint.facts.module import ModuleFacts
from optax_lint.facts.pipelines.build import Pipeline
from optax_lint.syntax.positions import Positions
from optax_lint.syntax.values import Unknown
from optax_lint.verify.masks import mask_reports
from optax_lint.verify.pipeline_report import PipelineReport
from optax_lint.verify.spec import NotVerifiable, SpecBuilder

# Which measured property backs which rule (used by --fix --verify).
RULE_CHECKS = {
    "OPX101": "clip",
    "OPX102": "decay",
    "OPX103": "decay",
    "OPX104": "descent",
    "OPX307": "multisteps",
    "OPX601": "params",
    "OPX602": "hyperparams",
}


def _read_indexes(facts: ModuleFacts) -> list[int]:
    """Indexes the code reads hyperparams at: `opt_state[1].hyperparams[...]`."""
    out = []
    for record in facts.raw.attributes:
        node = record.node
        if node.attr.value != "hyperparams" or not isinstance(node.value, cst.Subscript):
            continue
        elements = node.value.slice
        if len(elements) == 1 and isinstance(elements[0].slice, cst.Index):
            value = elements[0].slice.value
            if isinstance(value, cst.Integer):
                out.append(int(value.value))
    return out


def _checks_for(pipeline: Pipeline, facts: Optional[ModuleFacts] = None) -> tuple[list[str], dict]:
    """Which checks apply to this pipeline, and their parameters."""
    checks = ["init", "params", "descent"]
    extra: dict = {}
    nodes = list(pipeline.nodes())
    sequences = pipeline.sequences()
    steps = [s for seq in sequences for s in seq]
    clips = [s for s in steps if s.is_clip and s.origin.kind == "transform"]
    if clips:
        checks.append("clip")
        value = clips[0].arg_value("max_norm") if clips[0].primitive == "clip_by_global_norm" else Unknown("")
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            extra["clip_norm"] = float(value)
    if any(s.primitive == "add_decayed_weights" for s in steps):
        checks.append("decay")
        rate = _expected_decay_rate(steps)
        if rate:
            extra["expected_decay_rate"] = rate
    if any(n.short in ("inject_hyperparams", "inject_stateful_hyperparams") for n in nodes):
        checks.append("hyperparams")
        reads = _read_indexes(facts) if facts is not None else []
        if reads:
            extra["read_index"] = reads[0]
        elif pipeline.root.short == "chain":
            for i, child in enumerate(pipeline.root.children):
                if child.short in ("inject_hyperparams", "inject_stateful_hyperparams"):
                    extra["read_index"] = i
                    break
    multi = [n for n in nodes if n.short == "MultiSteps"]
    if multi and multi[0].args is not None:
        k = multi[0].args.value("every_k_schedule")
        if isinstance(k, int) and not isinstance(k, bool) and 0 < k <= 64:
            checks.append("multisteps")
            extra["every_k"] = k
    needs = any(n.entry is not None and n.entry.needs_params for n in nodes)
    extra["expect_needs_params"] = needs
    return checks, extra


def _expected_decay_rate(steps) -> Optional[float]:
    """The declared decay per step: lr * wd of the optimizer's own decoupled decay
    (adamw's weight_decay) when it has one, else summed over the explicit decays."""
    lr = None
    for step in steps:
        if step.primitive == "scale_by_learning_rate":
            value = step.arg_value("learning_rate")
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                lr = float(value)
    if lr is None:
        return None
    for step in steps:
        if step.primitive == "add_decayed_weights" and step.origin.kind == "alias":
            wd = step.arg_value("weight_decay")
            if isinstance(wd, (int, float)) and not isinstance(wd, bool) and wd:
                return lr * float(wd)
    total = 0.0
    for step in steps:
        if step.primitive == "add_decayed_weights":
            wd = step.arg_value("weight_decay")
            if not isinstance(wd, (int, float)) or isinstance(wd, bool):
                return None
            total += lr * float(wd)
    return total or None


def _pipeline_name(pipeline: Pipeline) -> str:
    if pipeline.name:
        return pipeline.name
    if pipeline.function is not None:
        return f"{pipeline.function.name}()"
    return "<pipeline>"


def verify_module(facts: ModuleFacts, worker, *, only: Optional[set] = None) -> list[PipelineReport]:
    positions = Positions(facts.module)
    builder = SpecBuilder(facts)
    reports = []
    for index, pipeline in enumerate(facts.pipelines):
        if only is not None and index not in only:
            continue
        report = PipelineReport(facts.path, _pipeline_name(pipeline), positions.span(pipeline.call), True)
        try:
            spec = builder.build(pipeline.call, pipeline.record.scope)
        except NotVerifiable as exc:
            report.assumed = [str(a) for a in builder.assumed]
            report.verifiable = False
            report.reason = exc.reason
            report.reason_span = positions.span(exc.node) if exc.node is not None else None
            reports.append(report)
            continue
        report.assumed = [str(a) for a in builder.assumed]
        checks, extra = _checks_for(pipeline, facts)
        response = worker.request({"op": "verify", "spec": spec, "checks": checks, **extra})
        if response.get("error") and not response.get("built"):
            report.error = response["error"]
        report.results = response.get("results", [])
        report.schedules = response.get("schedules", {})
        reports.append(report)
    if only is None:
        reports.extend(mask_reports(facts, worker))
    return reports


def verify_text(text: str, path: str, worker, *, context: Optional[dict] = None, root: Optional[str] = None) -> list[PipelineReport]:
    """`context`: the run context declared for the file, whose values come first."""
    facts = ModuleFacts(cst.parse_module(text), path, text=text, declared_context=context, root=root)
    return verify_module(facts, worker)


def render(reports: list[PipelineReport]) -> str:
    lines = []
    for report in reports:
        where = f"{report.path}:{report.span.line}:{report.span.column}"
        assumed = [f"  assumed: {item}" for item in report.assumed]
        if not report.verifiable:
            at = f" (at {report.path}:{report.reason_span.line}:{report.reason_span.column})" if report.reason_span else ""
            lines.append(f"{where}: {report.name}: not verifiable: {report.reason}{at}")
            lines.extend(assumed)
            continue
        if report.error:
            lines.append(f"{where}: {report.name}: {report.error}")
            lines.extend(assumed)
            continue
        lines.append(f"{where}: {report.name}")
        lines.extend(assumed)
        rows = [("property", "expected", "measured", "")] + [
            (r["property"], r.get("expected", ""), r.get("measured", ""), {True: "✓", False: "✗", None: "?"}[r.get("ok")])
            for r in report.results
        ]
        widths = [max(len(str(row[i])) for row in rows) for i in range(3)]
        for row in rows:
            lines.append("  " + "  ".join(str(row[i]).ljust(widths[i]) for i in range(3)) + "  " + row[3])
    return "\n".join(lines) + ("\n" if lines else "")
