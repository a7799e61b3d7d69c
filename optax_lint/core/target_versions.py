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


def predating_target(library: str, version: str, configured: Mapping[str, str], pins: Mapping[str, object]) -> Optional[str]:
    """A phrase naming the release the code targets when it predates `version` (the
    release an API broke in), else None. The target: `target-versions`, else the upper
    bound the project's own dependencies declare (`pins`, facts/project/pins.py), else
    the installed release."""
    if configured.get(library):
        if version_tuple(configured[library]) < version_tuple(version):
            return f"the target is {library} {configured[library]} (target-versions)"
        return None
    pin = pins.get(library)
    if pin is not None:
        return pin.describe() if pin.excludes(version) else None
    installed = installed_version("orbax-checkpoint" if library == "orbax" else library)
    if installed and version_tuple(installed) < version_tuple(version):
        return f"the installed release is {library} {installed}"
    return None


def missing_in_target(key: str, configured: Mapping[str, str], pins: Optional[Mapping[str, object]] = None) -> Optional[str]:
    """None when the API `key` (a path, `callable(keyword=)` or a call form from the
    table's [available]) exists in the target release, else a sentence saying what it
    needs. Without `target-versions`, a project whose own dependencies keep the library
    below that release (`pins`) is the target before the installed release is."""
    since = load_table("api_currency").get("available", {}).get(key)
    if not since:
        return None
    library, _, version = since.partition(" ")
    pin = (pins or {}).get(library)
    if not configured.get(library) and pin is not None:
        return f"it needs {library} {version} or newer, and {pin.describe()}" if pin.excludes(version) else None
    target = target_of(library, configured)
    if not target or version_tuple(target) >= version_tuple(version):
        return None
    how = "target-versions" if configured.get(library) else "installed"
    return f"it needs {library} {version} or newer, and the target is {library} {target} ({how})"
