"""`optax-lint rule` (a rule's documentation) and `optax-lint server` (the Language Server)."""

from __future__ import annotations

import json
from typing import Optional

import click

from optax_lint.commands.common import fail


@click.command("rule")
@click.argument("code", required=False)
@click.option("--all", "show_all", is_flag=True, help="List every rule.")
@click.option("--output-format", type=click.Choice(["text", "json"]), default="text", help="text (the documentation as Markdown) or json.")
def rule(code: Optional[str], show_all: bool, output_format: str) -> None:
    """Explain a rule (by code or name), or list them all with --all."""
    from optax_lint.core.catalogue import load_catalogue

    catalogue = load_catalogue()
    if show_all:
        if output_format == "json":
            click.echo(json.dumps([spec.to_dict() for spec in catalogue.values()], indent=2))
            return
        for spec in catalogue.values():
            fix = spec.fix.value if spec.fix else "-"
            click.echo(f"{spec.code}  {spec.name:<38} {spec.severity.value:<8} fix:{fix:<13} {spec.summary}")
        return
    if not code:
        fail("give a rule code (e.g. `optax-lint rule OPX101`) or --all")
    wanted = code.strip()
    spec = catalogue.get(wanted.upper()) or next((s for s in catalogue.values() if s.name == wanted), None)
    if spec is None:
        fail(f"unknown rule {code!r}; `optax-lint rule --all` lists them")
    if output_format == "json":
        click.echo(json.dumps({**spec.to_dict(), "doc": spec.doc}, indent=2))
    else:
        click.echo(spec.render_doc(), nl=False)


@click.command("server")
def server() -> None:
    """Run the Language Server over stdio, for editors (needs pygls: the lsp extra)."""
    try:
        from optax_lint.lsp import run
    except ImportError as exc:
        from optax_lint.core.install import install_hint

        fail(f"`optax-lint server` needs pygls ({exc}); install the lsp extra {install_hint('lsp')}")
    run()
