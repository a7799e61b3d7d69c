"""optax-lint: a static-analysis linter for JAX/Optax training code."""

__version__ = "0.1.0"
