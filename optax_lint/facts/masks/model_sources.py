"""What the model's source says beyond its parameter tree, in this file or in a project
module it imports (read through `facts/project`, so the result cache knows of the
read): parameters declared with PyTorch-style names, and layers stacked by scan/vmap.
"""

from __future__ import annotations

import re

_DECLARES_PYTORCH_NAME = re.compile(
    r"""(?:param|get_parameter)\(\s*['"](?:weight|gamma|beta|running_mean|running_var)['"]"""
    r"|self\.(?:weight|gamma|beta)\s*=\s*(?:nnx\.)?Param\("
)


def declares_pytorch_names(facts) -> bool:
    """Whether this file, or a project module it imports, declares a parameter with a
    PyTorch-style name (`self.param("weight", ...)`, `self.weight = nnx.Param(...)`)."""


    texts = [facts.text or ""]
    project = facts.project
    texts += [project.text_of(path) or "" for path in project.imported_paths()]
    return any(_DECLARES_PYTORCH_NAME.search(text) for text in texts)


def project_stacks(facts) -> list:
    """(module facts, stack site) pairs for where this file, or else the first project
    module it imports that stacks layers, or else the module the trained model is
    defined in (the run context's `arch` evidence), stacks them."""
    found = [(facts, s) for s in facts.stacked_layers]
    if found:
        return found

    for module in facts.project.imported_modules(("scan", "vmap", "layer_stack")):
        found.extend((module, s) for s in module.stacked_layers)
        if found:
            return found
    # The module the trained model is defined in, when the file reaches it only through
    # a builder (`model = build_encoder()` of a module that imports the model's).
    arch = facts.run_context.get("arch")
    module = getattr(arch, "module", None)
    if module is not None and module is not facts:
        found.extend((module, s) for s in module.stacked_layers)
    return found
