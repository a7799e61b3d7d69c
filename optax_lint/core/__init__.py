"""The bottom layer: findings, the rule catalogue, parsing, source text and the config file. Imports nothing else of optax_lint."""
