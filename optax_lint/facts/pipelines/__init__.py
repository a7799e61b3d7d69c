"""Optimizer pipelines: the transform trees, where they are used as the optimizer, and the update sites that step them."""
