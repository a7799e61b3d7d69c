"""`optax-lint recommend --verify`: build the recommended chain under JAX in the
verification worker (the same sandbox as `optax-lint --verify`: whitelisted optax
constructors and literal arguments only), step it, and check the schedule's samples
against the numbers the recommendation printed.

The spec is extracted from the generated module, so what is verified is the code
the user gets, not a second description of it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from optax_lint.recommend import codegen
from optax_lint.recommend.compare import full_optimizers, module_facts
from optax_lint.recommend.decide import Recommendation
from optax_lint.recommend.fmt import py_number
from optax_lint.verify.report import _checks_for
from optax_lint.verify.spec import NotVerifiable, SpecBuilder

REL_TOL = 1e-4  # optax computes in float32
ABS_TOL = 1e-9


@dataclass
class Verification:
    rows: list[dict] = field(default_factory=list)  # property, expected, measured, ok
    error: str = ""

    @property
    def ok(self) -> bool:
        return not self.error and all(r.get("ok") is not False for r in self.rows)

    def to_dict(self) -> dict:
        return {"ok": self.ok, "error": self.error or None, "results": self.rows}

    def lines(self) -> list[str]:
        if self.error:
            return [f"  not verified: {self.error}"]
        rows = [("property", "expected", "measured", "")] + [
            (r["property"], str(r.get("expected", "")), str(r.get("measured", "")), {True: "ok", False: "FAIL", None: "?"}[r.get("ok")])
            for r in self.rows
        ]
        widths = [max(len(row[i]) for row in rows) for i in range(3)]
        return [("  " + "  ".join(row[i].ljust(widths[i]) for i in range(3)) + "  " + row[3]).rstrip() for row in rows]


def verify(rec: Recommendation, worker) -> Verification:
    text = codegen.module(rec)
    facts = module_facts(text, "recommended.py")
    pipelines = full_optimizers(facts)
    schedule = next((s for s in facts.schedules if s.name == "schedule"), None)
    if not pipelines or schedule is None:
        return Verification(error="the generated module has no optimizer or schedule (internal error)")
    pipeline = pipelines[0]
    builder = SpecBuilder(facts)
    try:
        spec = builder.build(pipeline.call, pipeline.record.scope)
        schedule_spec = builder.build(schedule.call, schedule.scope)
    except NotVerifiable as exc:
        return Verification(error=f"not verifiable: {exc.reason}")
    checks, extra = _checks_for(pipeline, facts)
    if rec.warmup:
        # The decay check takes one step from step 0, where a warmup's LR is 0: nothing
        # to measure there (decoupled decay is scaled by the LR).
        checks = [c for c in checks if c != "decay"]
    steps = rec.sample_steps()
    response = worker.request({
        "op": "verify", "spec": spec, "checks": checks, **extra,
        "schedules": {"schedule": {"spec": schedule_spec, "steps": steps}},
    })
    if not response.get("built"):
        return Verification(error=response.get("error", "the chain did not build"))
    result = Verification(rows=list(response.get("results", [])))
    samples = response.get("schedules", {}).get("schedule")
    if not isinstance(samples, list):
        result.rows.append({"property": "schedule samples", "expected": "numbers", "measured": str(samples), "ok": False})
        return result
    for step, measured in zip(steps, samples):
        expected = rec.schedule_value(step)
        ok = abs(measured - expected) <= ABS_TOL + REL_TOL * abs(expected)
        result.rows.append({"property": f"LR at step {step:,}", "expected": py_number(expected), "measured": py_number(measured), "ok": ok})
    return result
