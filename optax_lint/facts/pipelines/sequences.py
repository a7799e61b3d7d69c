"""Each pipeline's primitive sequences, expanded once per file for every rule that
reads them (`Pipeline.sequences()` expands the tree anew on every call)."""

from __future__ import annotations

from optax_lint.facts.pipelines.build import Pipeline, Step


def expanded_sequences(facts, pipeline: Pipeline) -> list[list[Step]]:
    cache = facts.sequences_cache
    key = id(pipeline)
    if key not in cache:
        cache[key] = (pipeline, pipeline.sequences())  # the pipeline is kept so its id stays unique
    return cache[key][1]
