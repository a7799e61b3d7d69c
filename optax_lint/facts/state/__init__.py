"""Optimizer state: where opt_state comes from and how its layout is read."""
