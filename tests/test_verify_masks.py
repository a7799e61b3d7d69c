"""--verify for weight-decay masks: the decayed-leaf table of a Transformer fixture,
measured by optax.add_decayed_weights in the worker on a synthetic params tree shaped
like the file's model."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest.importorskip("jax")
pytest.importorskip("optax")

from optax_lint.verify.masks import decayed_leaves  # noqa: E402
from optax_lint.verify.report import render, verify_text  # noqa: E402
from optax_lint.verify.runner import Worker  # noqa: E402

# Its module fixtures are costly: one xdist worker computes them once (--dist loadgroup).
pytestmark = pytest.mark.xdist_group("verify_masks")

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "fixtures" / "verify" / "masks_transformer.py"


@pytest.fixture(scope="module")
def worker(tmp_path_factory):
    os.environ.setdefault("OPTAX_LINT_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    with Worker(timeout=180) as w:
        yield w


def _mask_reports(worker, text: str, path: str = "train.py"):
    return [r for r in verify_text(text, path, worker) if r.name.endswith("decay mask")]


def test_transformer_fixture_table_shows_the_decayed_norm_scales(worker) -> None:
    reports = _mask_reports(worker, FIXTURE.read_text(), str(FIXTURE))
    assert [r.name for r in reports] == ["tx: decay mask", "fixed: decay mask"]
    buggy, fixed = reports
    assert decayed_leaves(buggy) == [
        "Embed_0/embedding", "Block_0/LayerNorm_0/scale", "Block_0/Dense_0/kernel",
        "Block_0/Dense_1/kernel", "head/kernel", "LayerNorm_0/scale",
    ]
    assert decayed_leaves(fixed) == ["Embed_0/embedding", "Block_0/Dense_0/kernel", "Block_0/Dense_1/kernel", "head/kernel"]
    table = render([buggy])
    print(table)
    assert "Block_0/LayerNorm_0/scale (8,)  not decayed  decayed      ✗" in table
    assert "head/bias (8,)                  not decayed  not decayed  ✓" in table
    assert all(r["ok"] for r in fixed.results)


def test_scanned_stack_without_visible_model_uses_a_stacked_synthetic_tree(worker) -> None:
    text = (
        "import flax.linen as nn\nimport jax\nimport optax\n"
        "from mylib import Block\n"
        "Stack = nn.scan(Block, variable_axes={'params': 0}, split_rngs={'params': True}, length=4)\n"
        "tx = optax.adamw(1e-3, weight_decay=0.1, mask=lambda p: jax.tree.map(lambda x: x.ndim > 1, p))\n"
    )
    (report,) = _mask_reports(worker, text)
    assert "ScanBlock_0/LayerNorm_0/scale" in decayed_leaves(report)  # (4, 8): decayed, as OPX110 says
    assert "LayerNorm_1/scale" not in decayed_leaves(report)


def test_mask_from_unknown_code_is_not_verifiable(worker) -> None:
    text = "import optax\nfrom mylib import make_mask\ntx = optax.adamw(1e-3, weight_decay=0.1, mask=make_mask(cfg))\n"
    (report,) = _mask_reports(worker, text)
    assert not report.verifiable and "not one optax-lint can interpret" in report.reason
    assert "not verifiable" in render([report])
