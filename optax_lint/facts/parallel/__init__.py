"""Parallel train steps: pmap/shard_map/jit steps, collectives, gradient data flow, replication."""
