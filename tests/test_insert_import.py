"""An import a fix adds goes among the file's imports, in their order (syntax/edits.insert_import)."""

from __future__ import annotations

import libcst as cst
import pytest

from optax_lint.syntax.edits import insert_import

NEW = "from flax import traverse_util\n"


def _insert(source: str, new: str = NEW) -> str:
    module = cst.parse_module(source)
    return module.with_changes(body=insert_import(list(module.body), cst.parse_statement(new))).code


@pytest.mark.parametrize(
    "source, expected",
    [
        # isort style: `import x` lines, then `from x import y`, each sorted
        (
            "import jax\nimport optax\nfrom flax.training import train_state\n\nx = 1\n",
            "import jax\nimport optax\nfrom flax import traverse_util\nfrom flax.training import train_state\n\nx = 1\n",
        ),
        # Google style: both forms sorted together by module
        (
            '"""Doc."""\n\nfrom absl import app\nimport flax.linen as nn\nimport optax\n',
            '"""Doc."""\n\nfrom absl import app\nfrom flax import traverse_util\nimport flax.linen as nn\nimport optax\n',
        ),
        # groups: stdlib, then third party; it joins the group that imports flax (only
        # `import x` lines there: isort's default puts a from-import after them)
        (
            "import os\nimport sys\n\nimport flax.linen as nn\nimport optax\n\nfrom mypkg import model\n",
            "import os\nimport sys\n\nimport flax.linen as nn\nimport optax\nfrom flax import traverse_util\n\nfrom mypkg import model\n",
        ),
        # first of its group: it takes over the group's leading blank line and comment
        (
            "from __future__ import annotations\n\n# third party\nfrom jax import numpy as jnp\nimport optax\n",
            "from __future__ import annotations\n\n# third party\nfrom flax import traverse_util\nfrom jax import numpy as jnp\nimport optax\n",
        ),
        # an unsorted block: after its last import
        (
            "import optax\nimport jax\n\nx = 1\n",
            "import optax\nimport jax\nfrom flax import traverse_util\n\nx = 1\n",
        ),
    ],
)
def test_insert_import(source: str, expected: str) -> None:
    assert _insert(source) == expected


def test_no_import_block_leaves_the_body() -> None:
    assert _insert("x = 1\n") == "x = 1\n"
