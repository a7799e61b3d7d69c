"""Reads of other files of the user's project (config modules), recorded for the result cache."""
