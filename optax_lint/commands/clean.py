"""`optax-lint clean`: delete the result cache."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import click

from optax_lint.commands.common import default_cache_dir, fail


@click.command("clean")
@click.argument("path", required=False, type=click.Path(path_type=Path))
@click.option("--cache-dir", type=click.Path(path_type=Path), default=None,
              help="The cache folder to delete (default: the project's .optax_lint_cache).")
def clean(path: Optional[Path], cache_dir: Optional[Path]) -> None:
    """Delete the result cache of the project holding PATH (default: the current directory)."""
    from optax_lint.core.config import ConfigError, load_settings
    from optax_lint.run.cache import clean as remove_cache

    if cache_dir is None:
        try:
            settings = load_settings(start=path if path is not None and path.exists() else Path.cwd())
        except ConfigError as exc:
            fail(str(exc))
        cache_dir = default_cache_dir(settings)
    if not cache_dir.exists():
        click.echo(f"No cache at {cache_dir}", err=True)
        return
    if not remove_cache(cache_dir):
        fail(f"{cache_dir} holds no optax-lint CACHEDIR.TAG; not deleting it")
    click.echo(f"Removed {cache_dir}" if not cache_dir.exists() else f"Could not remove {cache_dir}", err=True)
