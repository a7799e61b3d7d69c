"""The commands of `optax-lint`, one module each; `optax_lint.cli.main` groups them."""
