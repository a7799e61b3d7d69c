"""Files of the cache folder: checksummed JSON replaced atomically, and the folder's
markers (.gitignore, CACHEDIR.TAG). The result cache keeps its files this way."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

CACHEDIR_TAG = (
    "Signature: 8a477f597d28d172789f06886806bc55\n"
    "# This file is a cache directory tag created by optax-lint.\n"
    "# For information about cache directory tags see https://bford.info/cachedir/\n"
)


def ensure_dir(directory: Path) -> None:
    """Create the cache folder with its .gitignore and CACHEDIR.TAG."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in ((".gitignore", "# Automatically created by optax-lint.\n*\n"), ("CACHEDIR.TAG", CACHEDIR_TAG)):
        marker = directory / name
        if not marker.exists():
            marker.write_text(text, encoding="utf-8")


def write_checked(file: Path, body: str) -> None:
    """Write `<checksum>\n<body>` to a temporary file beside `file`, then rename it over."""
    import tempfile  # imports `random`: only a run that writes pays for it

    checksum = hashlib.blake2b(body.encode(), digest_size=16).hexdigest()
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".json", dir=file.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(checksum + "\n" + body)
        os.replace(tmp, file)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def read_checked(file: Path):
    """The JSON a `write_checked` file holds; None when missing, unreadable or damaged."""
    try:
        raw = file.read_text(encoding="utf-8")
        checksum, _, body = raw.partition("\n")
        if hashlib.blake2b(body.encode(), digest_size=16).hexdigest() != checksum:
            return None
        return json.loads(body)
    except (OSError, ValueError, UnicodeError):
        return None
