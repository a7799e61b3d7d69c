"""The run context (architecture, steps, batch, devices, ...): declared, or inferred with provenance."""
