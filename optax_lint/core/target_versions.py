"""Which library release the user's code must keep working on, for API-currency fixes.

`target-versions = {optax = "0.2.4"}` in the config pins it; otherwise it is the
installed release as package metadata reports it (read without importing the package),
else the newest release in rules/api_currency.toml. A fix that writes an API the target
does not have yet (see the table's `[available]`) is not offered as safe.
"""

from __future__ import annotations

import functools
import re
from typing import Mapping, Optional

from optax_lint.core.catalogue import load_table


def version_tuple(text: str) -> tuple[int, ...]:
    parts = [int(p) for p in re.findall(r"\d+", text)[:3]]
    return tuple(parts + [0] * (3 - len(parts)))


@functools.lru_cache(maxsize=None)
def installed_version(library: str) -> Optional[str]:
    import importlib.metadata  # ~30 ms to import: only when a fix is gated on a version

    try:
        return importlib.metadata.version(library)
    except (importlib.metadata.PackageNotFoundError, ValueError):
        return None


def target_of(library: str, configured: Mapping[str, str]) -> str:
    if configured.get(library):
        return configured[library]
    installed = installed_version(library)
    if installed:
        return installed
    return str(load_table("api_currency").get("versions", {}).get(library, ""))


def missing_in_target(key: str, configured: Mapping[str, str]) -> Optional[str]:
    """None when the API `key` (a path, `callable(keyword=)` or a call form from the
    table's [available]) exists in the target release, else a sentence saying what it needs."""
    since = load_table("api_currency").get("available", {}).get(key)
    if not since:
        return None
    library, _, version = since.partition(" ")
    target = target_of(library, configured)
    if not target or version_tuple(target) >= version_tuple(version):
        return None
    how = "target-versions" if configured.get(library) else "installed"
    return f"it needs {library} {version} or newer, and the target is {library} {target} ({how})"
