"""Rule implementations: a package per catalogue family (`family` in rules/OPXnnn.toml,
with `-` as `_`), one module per rule named after the rule (`name`, likewise). A
family package's `__init__` holds only its prefilter `TRIGGERS`; `registry.py` imports
a rule's module when the rule is asked for, so nothing here is imported up front."""
