"""The result cache, like ruff's: findings of unchanged files are not recomputed.

Layout: `<project root>/.optax_lint_cache/<version>/<settings key>.json`, the folder
marked with its own `.gitignore` (`*`) and a `CACHEDIR.TAG`. The settings key hashes
the tool (version and a fingerprint of its code and rule tables), the settings, the
options that change findings, and the working directory (paths in messages are shown
relative to it). One entry per linted file holds:

- the file's mtime, size and sha256: an unchanged stat is trusted unless the file was
  written within `RACY_NS` of being read (git's "racily clean" rule); otherwise the
  content is hashed and compared, so a touched but unchanged file still hits;
- the shown path and the file's own selection (per-file ignores, declared context);
- what the lint read besides the file (readlog.py): other files' mtime/size/digest,
  paths probed, folders listed. A config module a script imports is part of the
  script's key: edit it and the script is linted again;
- the findings, with each fix reduced to its title, applicability, edits and whether
  it can be applied.

Nothing here can make a run fail or answer wrongly: an unreadable, corrupt, foreign or
half-written cache file is ignored (each file carries a checksum of its body); writes
go to a temporary file renamed into place, merged with what another run wrote
meanwhile; any OSError while saving is swallowed.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Optional

from optax_lint import __version__
from optax_lint.core import readlog
from optax_lint.core.cache_files import (
    CACHEDIR_TAG,
    ensure_dir,
    read_checked,
    write_checked,
)
from optax_lint.core.diagnostics import (
    Applicability,
    Edit,
    FileResult,
    Finding,
    Fix,
    Related,
    Severity,
    Span,
)

CACHE_DIR_NAME = ".optax_lint_cache"
FORMAT = 1
RACY_NS = 2_000_000_000  # coarse file-system timestamps (FAT: 2 s) cannot be trusted closer than this
_FINGERPRINT: list[Optional[str]] = [None]


def is_cache_dir(path: Path) -> bool:
    """A folder optax-lint made (so `clean` may delete it): it holds our CACHEDIR.TAG."""
    try:
        tag = (Path(path) / "CACHEDIR.TAG").read_text(encoding="utf-8")
    except (OSError, UnicodeError):
        return False
    return tag.startswith(CACHEDIR_TAG.splitlines()[0]) and "optax-lint" in tag


def clean(path: Path) -> bool:
    """Delete a cache folder optax-lint made; True when something was removed."""
    import shutil

    path = Path(path)
    if not path.is_dir() or not is_cache_dir(path):
        return False
    shutil.rmtree(path, ignore_errors=True)
    return True


def tool_fingerprint() -> str:
    """Version plus the size and mtime of every module and table: an edited rule (in a
    checkout, or an upgrade that kept the version) invalidates the cache."""
    if _FINGERPRINT[0] is None:
        from optax_lint.core.catalogue import catalogue_dir

        h = hashlib.blake2b(f"{__version__}:{FORMAT}".encode(), digest_size=16)
        package = Path(__file__).resolve().parent.parent
        for base, pattern in ((package, "**/*.py"), (catalogue_dir(), "*.toml")):
            for file in sorted(base.glob(pattern)):
                try:
                    st = file.stat()
                except OSError:
                    continue
                h.update(f"{file.relative_to(base)}:{st.st_size}:{st.st_mtime_ns}\n".encode())
        _FINGERPRINT[0] = h.hexdigest()
    return _FINGERPRINT[0]


def _site_packages_stamp() -> list:
    stamps = []
    for entry in sys.path:
        if entry.endswith(("site-packages", "dist-packages")):
            try:
                stamps.append((entry, os.stat(entry).st_mtime_ns))
            except OSError:
                pass
    return stamps


def settings_key(settings, options) -> str:
    """What every file's findings depend on besides the file: tool, settings, options."""
    relevant = {
        "tool": tool_fingerprint(),
        "cwd": os.getcwd(),
        "root": str(settings.root),
        "select": settings.select,
        "ignore": settings.ignore,
        "extend_select": settings.extend_select,
        "per_file_ignores": settings.per_file_ignores,
        "rule_options": settings.rule_options,
        "context": settings.context,
        "cli_context": options.context,
        "max_file_bytes": options.max_file_bytes,
        "with_edits": options.with_edits,
        "show_traceback": options.show_traceback,
        # The API-currency fixes target the installed optax/flax unless configured; an
        # install or upgrade adds and removes dist-info folders, which changes the
        # site-packages mtime (one stat each instead of ~80 ms of importlib.metadata).
        "site_packages": _site_packages_stamp(),
    }
    text = json.dumps(relevant, sort_keys=True, default=repr)
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


def file_key(shown: str, codes: set[str], declared: dict) -> str:
    """The per-file part: the shown path, the file's selection and declared context."""
    text = json.dumps([shown, sorted(codes), declared], sort_keys=True, default=repr)
    return hashlib.blake2b(text.encode(), digest_size=12).hexdigest()


def content_digest(path: Path) -> Optional[str]:
    """sha256 of the raw bytes, as `source.read_source` computes it."""
    try:
        with open(path, "rb") as handle:
            return hashlib.sha256(handle.read()).hexdigest()
    except OSError:
        return None


# ---- findings <-> JSON ------------------------------------------------------------


def finding_to_dict(finding: Finding) -> dict:
    d = finding.to_dict()
    if finding.fix is not None:
        d["fix"]["can_apply"] = bool(finding.fix.apply)
    return d


def _span(d: dict) -> Span:
    return Span(int(d["line"]), int(d["column"]), int(d["end_line"]), int(d["end_column"]))


class FixMarker:
    """Stands in for a fix function that crossed a process boundary or came from the
    cache: keeps `fixable()` right. A run that applies fixes never calls it: it lints
    such a file again in its own process."""

    def __init__(self, present: bool) -> None:
        self.present = present

    def __bool__(self) -> bool:
        return self.present


def finding_from_dict(d: dict) -> Finding:
    fix = None
    if d.get("fix") is not None:
        f = d["fix"]
        fix = Fix(
            title=str(f["title"]),
            applicability=Applicability(f["applicability"]),
            apply=FixMarker(bool(f.get("can_apply"))),
            edits=[Edit(_span(e), str(e["content"])) for e in f.get("edits", [])],
        )
    return Finding(
        code=str(d["code"]),
        name=str(d["name"]),
        severity=Severity(d["severity"]),
        message=str(d["message"]),
        path=str(d["path"]),
        span=_span(d),
        fix=fix,
        related=[Related(str(r["message"]), _span(r), r.get("path"), _cell(r)) for r in d.get("related", [])],
        help=str(d.get("help") or ""),  # the full format's "= help:" line (a cached finding kept none)
        evidence=d.get("evidence"),
        cell=_cell(d),  # a notebook finding's cell: its lines count within the cell
    )


def _cell(d: dict) -> Optional[int]:
    return int(d["cell"]) if d.get("cell") is not None else None


# ---- the cache ----------------------------------------------------------------------


class ResultCache:
    def __init__(self, directory: Path, key: str) -> None:
        self.directory = Path(directory)
        self.file = self.directory / __version__ / f"{key}.json"
        self._entries: Optional[dict] = None
        self._new: dict[str, dict] = {}
        self._deps_ok: dict[tuple, bool] = {}
        self.hits = 0
        self.misses = 0

    # -- reading ----------------------------------------------------------------
    @property
    def entries(self) -> dict:
        if self._entries is None:
            self._entries = _read_entries(self.file)
        return self._entries

    def lookup(self, path: Path, fkey: str) -> Optional[tuple[FileResult, Optional[os.stat_result]]]:
        """The cached result for `path` when it still holds, else None."""
        absolute = os.path.abspath(path)
        entry = self.entries.get(absolute)
        if entry is None:
            return None
        try:
            if entry["fkey"] != fkey:
                return None
            st = os.stat(absolute)
            racy = entry["mtime"] + RACY_NS > entry["checked"]
            if racy or entry["mtime"] != st.st_mtime_ns or entry["size"] != st.st_size:
                if entry["size"] != st.st_size or content_digest(absolute) != entry["digest"]:
                    return None
                # Same bytes: trust this stat from now on (if it is not itself racy).
                entry = {**entry, "mtime": st.st_mtime_ns, "checked": time.time_ns()}
                self._new[absolute] = entry
            if not self._deps_hold(entry["deps"], entry["deps_checked"]):
                return None
            result = FileResult(str(entry["shown"]))
            result.findings = [finding_from_dict(d) for d in entry["findings"]]
        except (KeyError, TypeError, ValueError, AttributeError):  # a malformed entry: lint the file
            return None
        return result, st

    def _deps_hold(self, deps: dict, checked: int) -> bool:
        for path, recorded in deps.get("files", {}).items():
            key = ("file", path, json.dumps(recorded))
            ok = self._deps_ok.get(key)
            if ok is None:
                ok = self._deps_ok[key] = _file_holds(path, recorded, checked)
            if not ok:
                return False
        for path, was in deps.get("probes", {}).items():
            key = ("probe", path, was)
            ok = self._deps_ok.get(key)
            if ok is None:
                ok = self._deps_ok[key] = readlog.probe_holds(path, bool(was))
            if not ok:
                return False
        for path, names in deps.get("dirs", {}).items():
            key = ("dir", path, json.dumps(names))
            ok = self._deps_ok.get(key)
            if ok is None:
                ok = self._deps_ok[key] = readlog.listing_holds(path, names)
            if not ok:
                return False
        return True

    # -- writing ----------------------------------------------------------------
    def store(self, path: Path, fkey: str, shown: str, st: os.stat_result, digest: str, checked: int,
              findings: list[Finding], log: readlog.ReadLog) -> None:
        self._new[os.path.abspath(path)] = {
            "fkey": fkey,
            "shown": shown,
            "mtime": st.st_mtime_ns,
            "size": st.st_size,
            "digest": digest,
            "checked": checked,
            "deps_checked": checked,  # stays when a touched file's entry is refreshed
            "deps": log.to_dict(),
            "findings": [finding_to_dict(f) for f in findings],
        }

    def save(self) -> None:
        """Merge this run's entries into the file on disk (another run may have written
        it meanwhile) and replace it atomically. Never raises."""
        if not self._new:
            return
        try:
            ensure_dir(self.directory)
            self.file.parent.mkdir(parents=True, exist_ok=True)
            merged = _read_entries(self.file)
            merged.update(self._new)
            write_checked(self.file, json.dumps({"format": FORMAT, "entries": merged}, separators=(",", ":")))
        except (OSError, ValueError, TypeError):  # read-only tree, full disk, ...: run without
            return
        self._new.clear()


def _read_entries(file: Path) -> dict:
    """Entries of a cache file; {} when missing, unreadable, corrupt or of another format."""
    data = read_checked(file)
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("entries"), dict):
        return {}
    return {k: v for k, v in data["entries"].items() if isinstance(v, dict)}


def _file_holds(path: str, recorded, checked: int) -> bool:
    """A file another file's lint read: still the same (or still absent)?"""
    try:
        st = os.stat(path)
    except OSError:
        return recorded is None
    if recorded is None:
        return False
    mtime, size, digest = recorded
    if st.st_size != size:
        return False
    if st.st_mtime_ns == mtime and mtime + RACY_NS <= checked:
        return True
    if digest is None:
        return False
    from optax_lint.core.source import SourceError, read_source

    try:
        text = read_source(Path(path), max_bytes=max(size, 1)).text
    except SourceError:
        return False
    return readlog.digest(text) == digest
