"""Weight-decay masks and partition labels, and the parameter names a model produces."""
