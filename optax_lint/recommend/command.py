"""`optax-lint recommend`: flags (or a script's run context) in, a recommendation out.

cli.py only declares the options; this module turns them into a Request, runs the
protocol, renders the chosen format, and optionally verifies and compares.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from optax_lint.recommend import codegen, render
from optax_lint.recommend.decide import Recommendation, decide
from optax_lint.recommend.request import (
    Request,
    RequestError,
    parse_arch,
    parse_count,
    parse_positive,
    validate,
)


@dataclass
class Options:
    arch: Optional[str] = None
    params: Optional[str] = None
    steps: Optional[str] = None
    batch: Optional[str] = None
    devices: Optional[str] = None
    dataset_size: Optional[str] = None
    fine_tune: bool = False
    from_scratch: bool = False
    issues: tuple[str, ...] = ()
    memory_constrained: bool = False
    sparse_gradients: bool = False
    base_lr: Optional[str] = None
    base_batch: Optional[str] = None
    device_memory: Optional[str] = None
    output_format: str = "text"
    verify: bool = False
    from_path: Optional[Path] = None


def _given(opts: Options) -> dict:
    return {
        "arch": parse_arch(opts.arch),
        "params": parse_count("--params", opts.params),
        "steps": parse_count("--steps", opts.steps),
        "batch": parse_count("--batch", opts.batch),
        "devices": parse_count("--devices", opts.devices),
        "dataset_size": parse_count("--dataset-size", opts.dataset_size),
        "fine_tune": opts.fine_tune,
        "from_scratch": opts.from_scratch,
        "issues": tuple(dict.fromkeys(opts.issues)),
        "memory_constrained": opts.memory_constrained,
        "sparse_gradients": opts.sparse_gradients,
        "base_lr": parse_positive("--base-lr", opts.base_lr, "3e-4"),
        "base_batch": parse_count("--base-batch", opts.base_batch),
        "device_memory_gb": parse_positive("--device-memory", opts.device_memory, "80"),
    }


def build_request(opts: Options, settings=None):
    """(Request, the script's facts or None). RequestError names the flag at fault."""
    given = _given(opts)
    if opts.from_path is None:
        values = {k: v for k, v in given.items() if v is not None}
        return validate(Request(**values)), None
    from optax_lint.core.source import SourceError, read_source
    from optax_lint.facts.context.run_context import declared_for
    from optax_lint.recommend.compare import module_facts, request_from_facts

    try:
        source = read_source(opts.from_path)
    except SourceError as exc:
        raise RequestError(f"--from {opts.from_path}: {exc}") from None
    declared = declared_for(opts.from_path, settings) if settings is not None else {}
    try:
        facts = module_facts(source.text, str(opts.from_path), declared)
    except Exception as exc:  # a syntax error in the script
        message = str(getattr(exc, "message", exc)).strip().splitlines()
        raise RequestError(f"--from {opts.from_path}: cannot parse: {message[0] if message else type(exc).__name__}") from None
    return validate(request_from_facts(facts, given, str(opts.from_path))), facts


def from_comparison(rec: Recommendation, facts, path: str) -> tuple[list[str], list[dict]]:
    """(text lines, JSON data): each optimizer of the script against the recommendation."""
    from optax_lint.recommend.compare import (
        comparison,
        full_optimizers,
        module_facts,
        side,
    )
    from optax_lint.syntax.positions import Positions

    generated = module_facts(codegen.module(rec), "recommended.py")
    recommended = side(generated, full_optimizers(generated)[0], "recommended")
    pipelines = full_optimizers(facts)
    if not pipelines:
        return comparison(None, recommended, path), [{"script": None, "recommended": recommended.to_dict()}]
    lines: list[str] = []
    data = []
    positions = Positions(facts.module)
    for pipeline in pipelines:
        script = side(facts, pipeline, f"{path}:{positions.span(pipeline.call).line}")
        lines += comparison(script, recommended, path) + [""]
        data.append({"script": script.to_dict(), "recommended": recommended.to_dict()})
    return lines[:-1], data


def run(opts: Options, settings=None) -> tuple[str, int]:
    """(output text, exit code). RequestError and VerifyUnavailable propagate to the CLI."""
    request, facts = build_request(opts, settings)
    if settings is not None:
        from optax_lint.recommend.decide import settings_overrides

        rec = decide(request, *settings_overrides(settings))
    else:
        rec = decide(request)
    verification = None
    if opts.verify:
        from optax_lint.recommend.verify import verify
        from optax_lint.verify.runner import Worker

        with Worker() as worker:
            verification = verify(rec, worker)
    compared, compared_data = from_comparison(rec, facts, str(opts.from_path)) if facts is not None else (None, None)
    failed = verification is not None and not verification.ok
    if opts.output_format == "python":
        text = codegen.module(rec)
        if verification is not None:
            text += "\n\n# Verification (the chain built and stepped under JAX by optax-lint recommend --verify):\n"
            text += "\n".join("#" + line for line in verification.lines()) + "\n"
        return text, 1 if failed else 0
    if opts.output_format == "json":
        extra = {}
        if verification is not None:
            extra["verification"] = verification.to_dict()
        if compared is not None:
            extra["comparison"] = compared_data
        return render.json_text(rec, extra), 1 if failed else 0
    text = render.text(rec, verification.lines() if verification is not None else None)
    if compared is not None:
        text += "\n" + "\n".join(compared) + "\n"
    return text, 1 if failed else 0
