"""Checkpoint saves and restores and what they hold."""
