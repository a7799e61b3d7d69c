"""Reading a project's configuration the way its code would see it, without running it:
files.py (which project files may be read, cached per run), found.py (values with
confidence and provenance), sources.py (the config sources a module defines),
evaluate.py (static values across modules).
"""

# used by rules/: moved to files.py (project_of) and found.py (line_of)
from optax_lint.facts.project.files import project_of  # noqa: F401
from optax_lint.facts.project.found import line_of  # noqa: F401
