"""Tests of transforms, in the shape of optax's and flax's own test modules."""

from absl.testing import absltest, parameterized
import chex
import jax
import jax.numpy as jnp
import optax
from transformers import FlaxAutoModel


class MockTransformer:
    """Stands in for a model in a test of a helper; builds no layers."""

    def __call__(self, x):
        return x


class TransformsTest(parameterized.TestCase):
    def test_masked_passes_unmasked_leaves_through(self):
        params = {"a": jnp.ones(3), "b": jnp.ones(3)}
        mask = {"a": True, "b": False}
        tx = optax.masked(optax.sgd(0.1), mask)
        state = tx.init(params)
        updates, _ = tx.update(params, state, params)
        # the unmasked leaf is passed through unchanged, on purpose
        chex.assert_trees_all_close(updates["b"], params["b"])

    def test_scale_by_adam_direction(self):
        params = jnp.ones(3)
        tx = optax.scale_by_adam()
        state = tx.init(params)
        updates, _ = tx.update(params, state)
        self.assertEqual(updates.shape, (3,))

    def test_adam_no_clipping(self):
        model = MockTransformer()
        tx = optax.adam(1e-3)
        params = jnp.ones(3)
        state = tx.init(params)
        tx.update(model(params), state)

    def test_constant_schedule(self):
        tx = optax.adamw(learning_rate=3e-4)
        params = jnp.ones(3)
        state = tx.init(params)
        for _ in range(20_000):
            updates, state = tx.update(params, state, params)

    def test_fine_tune_loader(self):
        model = FlaxAutoModel.from_pretrained("bert-base-uncased")
        self.assertIsNotNone(model)

    def test_join_schedules(self):
        pieces = []
        pieces.append(optax.constant_schedule(1.0))
        pieces.append(optax.constant_schedule(0.5))
        schedule = optax.join_schedules(pieces, [10])
        self.assertEqual(schedule(0), 1.0)


    def test_rms_matches_adam_without_momentum(self):
        rms = optax.scale_by_rms(decay=0.999, eps_in_sqrt=False, bias_correction=True)
        adam = optax.scale_by_adam(b1=0)
        params = jnp.ones(3)
        rms_state, adam_state = rms.init(params), adam.init(params)
        rms_params, adam_params = params, params
        for _ in range(5):
            rms_updates, rms_state = rms.update(rms_params, rms_state)
            rms_params = optax.apply_updates(rms_params, rms_updates)
            adam_updates, adam_state = adam.update(adam_params, adam_state)
            adam_params = optax.apply_updates(adam_params, adam_updates)
        chex.assert_trees_all_close(rms_params, adam_params)


if __name__ == "__main__":
    absltest.main()
