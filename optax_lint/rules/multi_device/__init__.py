"""Multi-device data parallelism (docs/protocol.md#multi-device-training): gradients
averaged with `lax.pmean` before the update, axis names that exist, learning rate and
warmup scaled with the device count, state replicated before a pmapped step and
unreplicated before a save, and the pmap idiom that turns into n x the gradient under
`jax.shard_map`.

All judgements come from `facts/parallel/steps.py`; whatever it cannot follow is
Unknown and these rules stay silent."""

# Prefilter (optax_lint/engine/prefilter.py): every rule here needs a mapped step (pmap,
# shard_map), a collective or replicated state; the learning-rate rules also need an
# optax pipeline (then "optax" is spelled). The names are the last parts of the facts'
# tables (PMAP, SHARD_MAP, REPLICATE, UNREPLICATE, COLLECTIVES in
# facts/parallel/steps.py), written out so that prefiltering imports no facts;
# tests/test_prefilter.py checks they still cover those tables. Spelled as code:
# `jax.pmap`, `filter_pmap`, `pmap(`, `import pmap`, `pmap as`, not "... for pmap." in
# a docstring.
TRIGGERS = ("optax", *(rf"[._]{n}\b|\b{n}(?=[\s(),]|$)" for n in (
    "all_gather", "all_to_all", "axis_index", "axis_size", "device_put_replicated", "filter_pmap", "pbroadcast",
    "pcast", "pmap", "pmax", "pmean", "pmin", "ppermute", "pshuffle", "psum", "psum_scatter", "pswapaxes",
    "ragged_all_to_all", "replicate", "shard_map", "smap", "unreplicate",
)))
