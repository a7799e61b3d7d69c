"""What linting one file looked at besides the file itself, for the result cache.

A script's findings can depend on other project files (a config module it imports,
`configs/*.py` beside it): their text, whether a candidate path exists, what a folder
holds. Every such look goes through the functions here, which record it in the
`ReadLog` they are given: the one of the file being linted, held by the run's
ProjectFiles (facts/project/files.py). The cache stores the log with the findings
and replays it to decide whether the findings still hold. With no log (no cache)
they only do the look.
"""

from __future__ import annotations

import hashlib
import os
from typing import Optional


def digest(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


class ReadLog:
    """Files read (path -> [mtime_ns, size, digest]; None when unreadable), paths probed
    (path -> is a file), folders listed (path -> sorted .py names or None)."""

    def __init__(self) -> None:
        self.files: dict[str, Optional[list]] = {}
        self.probes: dict[str, bool] = {}
        self.dirs: dict[str, Optional[list[str]]] = {}

    def to_dict(self) -> dict:
        return {"files": self.files, "probes": self.probes, "dirs": self.dirs}


def isfile(path: str, log: Optional[ReadLog]) -> bool:
    found = os.path.isfile(path)
    if log is not None:
        log.probes[path] = found
    return found


def isdir(path: str, log: Optional[ReadLog]) -> bool:
    found = os.path.isdir(path)
    if log is not None:
        log.probes[path + os.sep] = found  # the trailing separator marks a folder probe
    return found


def listdir(path: str, log: Optional[ReadLog]) -> list[str]:
    """The folder's entries (raises OSError like os.listdir); recorded sorted."""
    try:
        names = os.listdir(path)
    except OSError:
        if log is not None:
            log.dirs[path] = None
        raise
    if log is not None:
        log.dirs[path] = sorted(names)
    return names


def note_text(path: str, stat: Optional[os.stat_result], text: Optional[str], log: Optional[ReadLog]) -> None:
    """A project file's text was used (None: it could not be read)."""
    if log is None:
        return
    if stat is None or text is None:
        log.files[path] = None
    else:
        log.files[path] = [stat.st_mtime_ns, stat.st_size, digest(text)]


def probe_holds(path: str, was_file: bool) -> bool:
    if path.endswith(os.sep):
        return os.path.isdir(path[:-1] or os.sep) == was_file
    return os.path.isfile(path) == was_file


def listing_holds(path: str, names: Optional[list[str]]) -> bool:
    try:
        now = sorted(os.listdir(path))
    except OSError:
        return names is None
    return now == names
