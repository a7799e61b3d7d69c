"""`optax-lint recommend`: the decision protocol run forwards."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import click

from optax_lint.commands.common import fail


@click.command("recommend")
@click.option("--arch", help="transformer, cnn, mlp or rnn.")
@click.option("--params", help="Parameter count (1.3e9, 1.3B, 350M).")
@click.option("--steps", help="Training length in optimizer updates (50000, 50k).")
@click.option("--batch", help="Batch size per device.")
@click.option("--devices", help="Data-parallel (pmap) devices [default: 1].")
@click.option("--dataset-size", help="Training examples (for epochs and overfitting risk).")
@click.option("--fine-tune", is_flag=True, help="Fine-tuning a pretrained model.")
@click.option("--from-scratch", is_flag=True, help="Training from random initialisation (contradicts --fine-tune).")
@click.option("--issue", "issues", multiple=True, metavar="ISSUE",
              help="Known issue (repeatable): gradient-explosion, gradient-noise, slow-convergence, overfitting, unstable-early.")
@click.option("--memory-constrained", is_flag=True, help="Optimizer state must be small.")
@click.option("--sparse-gradients", is_flag=True, help="Mostly-zero gradients (embeddings): factored second moments.")
@click.option("--base-lr", help="A learning rate you tuned (with --base-batch): scaled from there instead of the protocol's.")
@click.option("--base-batch", help="The global batch --base-lr was tuned at.")
@click.option("--device-memory", help="GB one device holds, for the memory verdict [default: 80].")
@click.option("--output-format", type=click.Choice(["text", "python", "json"]), default="text", show_default=True,
              help="text: the decision trace, code, schedule and advice; python: a runnable module; json: structured, for tools.")
@click.option("--verify", is_flag=True, help="Build and step the chain under JAX and check the schedule's numbers (needs jax and optax: the verify extra).")
@click.option("-o", "--output", "output", type=click.Path(path_type=Path), default=None, help="Write to FILE instead of stdout.")
@click.option("--from", "from_path", type=click.Path(path_type=Path), default=None,
              help="Take the run context from a training script and compare its chain with the recommendation.")
def recommend(output: Optional[Path], **values) -> None:
    """Recommend an optimizer chain, schedule and gradient processing (the decision protocol run forwards)."""
    from optax_lint.core.config import ConfigError, load_settings
    from optax_lint.recommend.command import Options, run
    from optax_lint.recommend.request import RequestError
    from optax_lint.verify.runner import VerifyUnavailable

    start = values["from_path"] if values["from_path"] is not None and values["from_path"].exists() else Path.cwd()
    try:
        settings = load_settings(start=start)  # the project's rule options move the protocol's thresholds
    except ConfigError as exc:
        fail(str(exc))
    try:
        text, code = run(Options(**values), settings)
    except (RequestError, VerifyUnavailable) as exc:
        fail(str(exc))
    if output is None:
        click.echo(text, nl=False)
    else:
        try:
            output.write_text(text, encoding="utf-8")
        except OSError as exc:
            fail(f"-o {output}: {exc.strerror or exc}")
        click.echo(f"wrote {output}", err=True)
    sys.exit(code)
