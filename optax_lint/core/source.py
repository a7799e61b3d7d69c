"""Reading user source files safely and writing fixed files back atomically.

Nothing may be lost: the encoding (PEP 263), a UTF-8 BOM, the line endings and
the file mode survive a read/fix/write round trip, and a write either fully
replaces the file or leaves it untouched (temp file + fsync + os.replace).
"""

from __future__ import annotations

import codecs
import errno
import hashlib
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

MAX_FILE_BYTES = 8 * 1024 * 1024  # default per-file size bound (--max-file-size)
# A notebook's JSON carries outputs and metadata besides the code: its file may be this
# many times the bound (the code cells themselves are held to the bound).
NOTEBOOK_SIZE_FACTOR = 8

_CHUNK = 1024 * 1024
# Flags absent on some platforms default to 0 (no-op).
_O_BINARY = getattr(os, "O_BINARY", 0)
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)  # so a FIFO swapped in after stat cannot hang us

# PEP 263, exactly as tokenize.detect_encoding matches them.
_COOKIE_RE = re.compile(rb"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)", re.ASCII)
_BLANK_RE = re.compile(rb"^[ \t\f]*(?:[#\r\n]|$)", re.ASCII)
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_BARE_LF = re.compile(r"(?<!\r)\n")


class SourceError(Exception):
    """A file that cannot be read, decoded or written; reported, never a traceback."""

    def __init__(
        self,
        kind: str,
        message: str,
        line: Optional[int] = None,
        column: Optional[int] = None,
    ) -> None:
        super().__init__(message)
        # "not-found" | "permission" | "is-directory" | "binary" | "decode" |
        # "too-large" | "os-error" | "encode" | "changed"
        self.kind = kind
        self.message = message
        self.line = line  # 1-based, when the error has a position
        self.column = column

    def __str__(self) -> str:
        return self.message


class SourceChanged(SourceError):
    """The file on disk is no longer the one we read: refuse to overwrite it."""

    def __init__(self, message: str = "file changed on disk since it was read; not overwritten") -> None:
        super().__init__("changed", message)


@dataclass(frozen=True)
class SourceFile:
    path: Path
    text: str  # decoded, BOM stripped, line endings unchanged
    encoding: str  # codec to write back with
    bom: bool  # a UTF-8 BOM was present
    newline: str  # dominant line ending: "\n", "\r\n" or "\r"
    mode: int  # permission bits (stat.S_IMODE)
    digest: str  # sha256 of the raw bytes as read


# --- reading -----------------------------------------------------------------


def read_source(path: Path, *, max_bytes: int = MAX_FILE_BYTES) -> SourceFile:
    """Read and decode `path` as Python would; raise SourceError on any problem."""
    path = Path(path)
    try:
        st = os.stat(path)
        _check_stat(st, max_bytes)
        fd = os.open(path, os.O_RDONLY | _O_BINARY | _O_CLOEXEC | _O_NONBLOCK)
        try:
            # The path may have been swapped since os.stat: judge what we opened.
            st = os.fstat(fd)
            _check_stat(st, max_bytes)
            data = _read_bounded(fd, max_bytes)
        finally:
            os.close(fd)
    except OSError as exc:
        raise _os_error(exc) from exc
    return source_from_bytes(path, data, stat.S_IMODE(st.st_mode), max_bytes=max_bytes)


def source_from_bytes(path: Path, data: bytes, mode: int = 0o644, *, max_bytes: int = MAX_FILE_BYTES) -> SourceFile:
    """Decode `data` as Python would a file named `path` (stdin input goes through here)."""
    if len(data) > max_bytes:  # a file that grew after the stat; stdin read one byte past the bound
        raise _too_large(len(data), max_bytes, at_least=True)
    nul = data.find(b"\x00")
    if nul != -1:
        raise SourceError("binary", f"binary file (NUL byte at offset {nul})")

    encoding, bom, declared = _detect_encoding(data)
    body = data[len(codecs.BOM_UTF8):] if bom else data
    text = _decode(body, encoding, declared)
    return SourceFile(
        path=path,
        text=text,
        encoding=encoding,
        bom=bom,
        newline=_dominant_newline(text),
        mode=mode,
        digest=hashlib.sha256(data).hexdigest(),
    )


def _check_stat(st: os.stat_result, max_bytes: int) -> None:
    if stat.S_ISDIR(st.st_mode):
        raise SourceError("is-directory", "is a directory")
    if not stat.S_ISREG(st.st_mode):
        raise SourceError("os-error", "not a regular file")
    if st.st_size > max_bytes:
        raise _too_large(st.st_size, max_bytes)


def _read_bounded(fd: int, max_bytes: int) -> bytes:
    # Read at most max_bytes + 1: enough to notice the file exceeds the bound.
    chunks = []
    remaining = max_bytes + 1
    while remaining > 0:
        chunk = os.read(fd, min(remaining, _CHUNK))
        if not chunk:
            break
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def _human_size(n: int) -> str:
    for unit, scale in (("MB", 1024 * 1024), ("KB", 1024)):
        if n >= scale:
            value = n / scale
            return f"{value:.0f} {unit}" if n % scale == 0 else f"{value:.1f} {unit}"
    return f"{n} bytes"


def _too_large(size: int, max_bytes: int, at_least: bool = False) -> SourceError:
    more = "more than " if at_least else ""
    return SourceError(
        "too-large",
        f"file is {more}{_human_size(size)}, above the {_human_size(max_bytes)} limit (--max-file-size)",
    )


def _os_error(exc: OSError) -> SourceError:
    if isinstance(exc, FileNotFoundError) or exc.errno in (errno.ENOENT, errno.ENOTDIR):
        return SourceError("not-found", "no such file")
    if isinstance(exc, PermissionError):
        return SourceError("permission", "permission denied")
    if isinstance(exc, IsADirectoryError):
        return SourceError("is-directory", "is a directory")
    return SourceError("os-error", exc.strerror or str(exc))


def _first_two_lines(data: bytes) -> list[tuple[int, bytes]]:
    """(1-based line number, line including its ending) for lines 1 and 2.

    Splits on \\r too, unlike tokenize (which would scan a CR-only file as one line).
    """
    lines = []
    start = 0
    while len(lines) < 2:
        # bytes.find is memchr: a regex scan of a one-line 40 MB notebook took over a second.
        end = _line_end(data, start)
        if end == -1:
            break
        lines.append((len(lines) + 1, data[start:end]))
        start = end
    if len(lines) < 2 and (start < len(data) or not lines):
        lines.append((len(lines) + 1, data[start:]))
    return lines[:2]


def _line_end(data: bytes, start: int) -> int:
    """Offset just past the first line break at or after `start` (\r\n, \r or \n); -1 if none."""
    lf = data.find(b"\n", start)
    cr = data.find(b"\r", start, lf if lf != -1 else len(data))
    if cr == -1:
        return lf + 1 if lf != -1 else -1
    return cr + 2 if data[cr + 1:cr + 2] == b"\n" else cr + 1


def _find_cookie(data: bytes) -> Optional[tuple[int, int, str]]:
    """(line, column, name) of the PEP 263 coding cookie, if any."""
    for lineno, line in _first_two_lines(data):
        m = _COOKIE_RE.match(line)
        if m:
            column = len(line[: m.start(1)].decode("utf-8", "replace")) + 1
            return lineno, column, m.group(1).decode("ascii")
        if not _BLANK_RE.match(line):  # line 2 counts only after a blank/comment line 1
            return None
    return None


def _detect_encoding(data: bytes) -> tuple[str, bool, bool]:
    """(codec, has BOM, declared by a cookie), following PEP 263."""
    bom = data.startswith(codecs.BOM_UTF8)
    body = data[len(codecs.BOM_UTF8):] if bom else data
    cookie = _find_cookie(body)
    if cookie is None:
        return "utf-8", bom, False
    line, column, name = cookie
    encoding = _codec_name(name)
    if encoding is None:
        raise SourceError("decode", f"unknown encoding {name!r} in the coding cookie", line, column)
    if bom and encoding != "utf-8":
        raise SourceError("decode", f"UTF-8 BOM conflicts with the coding cookie {name!r}", line, column)
    return encoding, bom, True


def _codec_name(name: str) -> Optional[str]:
    # tokenize treats "utf-8-*" spellings (e.g. utf-8-sig) as plain utf-8.
    lowered = name[:12].lower().replace("_", "-")
    if lowered == "utf-8" or lowered.startswith("utf-8-"):
        return "utf-8"
    try:
        info = codecs.lookup(name)
    except LookupError:
        return None
    if not getattr(info, "_is_text_encoding", True):  # e.g. "hex", "rot13"
        return None
    return {"utf-8": "utf-8", "iso8859-1": "latin-1"}.get(info.name, info.name)


def _decode(body: bytes, encoding: str, declared: bool) -> str:
    try:
        return body.decode(encoding)
    except UnicodeDecodeError as exc:
        line, column = _position(body, exc.start, encoding)
        label = "UTF-8" if encoding == "utf-8" else encoding
        hint = (
            "for the encoding declared by the coding cookie"
            if declared
            else "declare the encoding with a coding cookie"
        )
        raise SourceError(
            "decode",
            f"invalid {label} (byte 0x{body[exc.start]:02x}) at line {line}, column {column}; {hint}",
            line,
            column,
        ) from exc
    except LookupError as exc:  # codec found but unusable for bytes -> str
        raise SourceError("decode", f"cannot decode with {encoding!r}: {exc}") from exc


def _position(body: bytes, offset: int, encoding: str) -> tuple[int, int]:
    """1-based line and character column of byte `offset`."""
    prefix = body[:offset].decode(encoding, "replace")
    line, line_start = 1, 0
    for m in _LINE_BREAK.finditer(prefix):
        line += 1
        line_start = m.end()
    return line, len(prefix) - line_start + 1


def _dominant_newline(text: str) -> str:
    crlf = text.count("\r\n")
    counts = {"\n": text.count("\n") - crlf, "\r\n": crlf, "\r": text.count("\r") - crlf}
    best = max(counts.values())
    if best == 0:
        return "\n"
    return next(nl for nl in ("\n", "\r\n", "\r") if counts[nl] == best)  # ties: \n first


# --- writing -----------------------------------------------------------------


def _only_crlf(text: str) -> bool:
    crlf = text.count("\r\n")
    return crlf > 0 and text.count("\n") == crlf and text.count("\r") == crlf


def encode_text(src: SourceFile, text: str) -> bytes:
    """The bytes write_source would write for `text`."""
    # Safety net: a fixer that emitted "\n" into an all-CRLF file must not mix endings.
    if _only_crlf(src.text):
        text = _BARE_LF.sub("\r\n", text)
    try:
        data = text.encode(src.encoding)
    except UnicodeEncodeError as exc:
        line, column = _char_position(text, exc.start)
        ch = text[exc.start]
        raise SourceError(
            "encode",
            f"cannot encode {ch!r} (U+{ord(ch):04X}) at line {line}, column {column} "
            f"in the file's encoding {src.encoding}; not written",
            line,
            column,
        ) from exc
    return codecs.BOM_UTF8 + data if src.bom else data


def _char_position(text: str, index: int) -> tuple[int, int]:
    line, line_start = 1, 0
    for m in _LINE_BREAK.finditer(text, 0, index):
        line += 1
        line_start = m.end()
    return line, index - line_start + 1


def _digest_of(path: str) -> Optional[str]:
    """sha256 of the file's current bytes, streamed; None if it is gone."""
    h = hashlib.sha256()
    try:
        fd = os.open(path, os.O_RDONLY | _O_BINARY | _O_CLOEXEC | _O_NONBLOCK)
    except FileNotFoundError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        while True:
            chunk = os.read(fd, _CHUNK)
            if not chunk:
                return h.hexdigest()
            h.update(chunk)
    finally:
        os.close(fd)


def write_source(src: SourceFile, new_text: str) -> None:
    """Atomically replace the file with `new_text`, if it is still what we read."""
    data = encode_text(src, new_text)  # fail before touching the disk
    # Write through a symlink to its target instead of replacing the link.
    target = os.path.realpath(src.path)
    try:
        if _digest_of(target) != src.digest:
            raise SourceChanged()
        _atomic_replace(target, data, src.mode)
    except OSError as exc:
        raise _os_error(exc) from exc


def _atomic_replace(target: str, data: bytes, mode: int) -> None:
    import tempfile  # imports `random`: only a run that writes pays for it

    directory, name = os.path.split(target)
    fd, tmp = tempfile.mkstemp(dir=directory or ".", prefix=f".{name}.", suffix=".optax-lint.tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        _keep_owner(tmp, target)
        os.replace(tmp, target)
    except BaseException:  # includes KeyboardInterrupt: never leave the temp file
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _fsync_dir(directory or ".")


def _keep_owner(tmp: str, target: str) -> None:
    # The temp file belongs to us; as root, hand it back to the file's owner.
    try:
        st = os.stat(target)
        if hasattr(os, "chown") and (st.st_uid, st.st_gid) != (os.getuid(), os.getgid()):
            os.chown(tmp, st.st_uid, st.st_gid)
    except OSError:
        pass  # best effort: an unprivileged user cannot chown anyway


def _fsync_dir(directory: str) -> None:
    # Makes the rename durable; unsupported on some platforms, hence best effort.
    try:
        fd = os.open(directory, os.O_RDONLY | _O_CLOEXEC)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# Python's (and libcst's) line breaks; str.splitlines would also split on \f, \x1c, ...
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def source_lines(source: str) -> list[str]:
    """The lines of a text as Python counts them (no line breaks kept)."""
    lines = _LINE_BREAK.split(source)
    if lines and lines[-1] == "" and len(lines) > 1:
        lines.pop()  # the "line" after a final newline
    return lines
