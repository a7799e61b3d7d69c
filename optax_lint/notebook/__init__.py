"""Jupyter notebooks (.ipynb): lint the code cells as one module, fix them in place.

`format` finds the cells in the JSON text and splices fixed sources back into it;
`magics` turns IPython-only lines into placeholders; `layout` joins the cells into
one logical module and maps lines (and fix edits) back to cells; `lint` runs the
engine over an editor's cells and holds what `run/notebook_file.py` needs to lint a
notebook file. Findings carry the cell number
and the line within the cell: `nb.ipynb:cell 3:2:5: OPX101 ...`.
"""

from optax_lint.notebook.lint import (
    SIZE_FACTOR,
    cell_findings,
    cell_locations,
    fix_cells,
    notebook_text,
)

__all__ = ["SIZE_FACTOR", "cell_findings", "cell_locations", "fix_cells", "notebook_text"]
