"""What a pipeline holds: its optimizer aliases, whether its expanded sequences make a
whole optimizer, whether every step of them is known."""

from __future__ import annotations

from optax_lint.facts.pipelines.build import Pipeline, Step, TxNode


def complete(sequences: list[list[Step]]) -> bool:
    """Every step known: a pipeline with an unknown part could hold anything."""
    return all(step.primitive != "<unknown>" for seq in sequences for step in seq)


def optimizers(pipeline: Pipeline) -> list[TxNode]:
    return [node for node in pipeline.nodes() if node.kind == "alias" and node.call is not None]


def is_full_optimizer(sequences: list[list[Step]]) -> bool:
    return any(step.is_lr_step for seq in sequences for step in seq)
