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


def parameter_paths(sequence: list[Step]) -> list[list[Step]]:
    """The steps one parameter may pass through, once per optax.masked group.

    Steps under `optax.masked` reach only the parameters its mask selects, and two
    masked wrappers in a chain usually split the parameters into groups (encoder and
    decoder, backbone and head). A parameter selected by a group passes through the
    unmasked steps plus that group's steps (and those of the wrappers around it);
    with no masked step the only path is the whole sequence. Which parameters no
    mask selects, if any, cannot be read from the masks: the unmasked steps alone
    form no path of their own.
    """
    groups: list[tuple] = []
    for step in sequence:
        for end in range(1, len(step.mask_group) + 1):
            prefix = step.mask_group[:end]
            if not any(len(prefix) == len(g) and all(a is b for a, b in zip(prefix, g)) for g in groups):
                groups.append(prefix)
    if not groups:
        return [list(sequence)]
    return [[s for s in sequence if _within(s.mask_group, group)] for group in groups]


def _within(step_group: tuple, group: tuple) -> bool:
    """Whether a step under `step_group` reaches the parameters of `group`."""
    return len(step_group) <= len(group) and all(a is b for a, b in zip(step_group, group))
