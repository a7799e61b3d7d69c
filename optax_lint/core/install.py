"""How to install optax-lint with an extra, worded once for every message.

optax-lint is not on a package index (`pip install optax-lint` finds nothing), so
each command installs from a clone or from the git repository at a pinned revision;
tests/test_install_commands.py resolves every one of them with pip.
"""

from __future__ import annotations

from optax_lint.core.catalogue import HOMEPAGE


def from_clone(extra: str) -> str:
    return f"pip install '.[{extra}]'"


def from_git(extra: str) -> str:
    return f"pip install 'optax-lint[{extra}] @ git+{HOMEPAGE}@<rev>'"


def install_hint(extra: str) -> str:
    """Both ways, for a message: `<rev>` is the one part the user fills in."""
    return (f"from a clone of optax-lint, in its root: {from_clone(extra)}; or from git: {from_git(extra)} "
            "(<rev>: a commit sha or tag)")
