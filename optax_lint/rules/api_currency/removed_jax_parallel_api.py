"""OPX704 removed-jax-parallel-api: A removed or deprecated jax/flax parallelism API:
`jax.device_put_replicated`/`device_put_sharded`, `jax.experimental.shard_map`,
`flax.jax_utils.pmean`."""

from __future__ import annotations

from optax_lint.rules.api_currency.references import report_references
from optax_lint.rules.base import Context, Rule


class RemovedJaxParallelApi(Rule):
    code = "OPX704"

    def check(self, ctx: Context) -> None:
        report_references(ctx, self.code)
