"""optax_lint.core.source: safe reads (encoding, BOM, endings, errors) and atomic writes."""

from __future__ import annotations

import errno
import hashlib
import os
import random
import signal
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from optax_lint.core.source import (
    MAX_FILE_BYTES,
    SourceChanged,
    SourceError,
    SourceFile,
    encode_text,
    read_source,
    write_source,
)

REPO = Path(__file__).resolve().parents[1]
BOM = b"\xef\xbb\xbf"


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def _leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".optax-lint.tmp"))


# --- reading: encodings --------------------------------------------------------


def test_utf8_default(tmp_path):
    data = "x = 'héllo ✓'\n".encode()
    src = read_source(_write(tmp_path / "a.py", data))
    assert src.text == "x = 'héllo ✓'\n"
    assert (src.encoding, src.bom, src.newline) == ("utf-8", False, "\n")
    assert src.digest == hashlib.sha256(data).hexdigest()
    assert src.path == tmp_path / "a.py"


def test_bom_stripped_and_restored_exactly(tmp_path):
    data = BOM + "# é\r\nx = 1\r\n".encode()
    path = _write(tmp_path / "a.py", data)
    src = read_source(path)
    assert src.text == "# é\r\nx = 1\r\n"
    assert (src.encoding, src.bom) == ("utf-8", True)
    write_source(src, src.text.replace("1", "2"))
    assert path.read_bytes() == BOM + "# é\r\nx = 2\r\n".encode()


def test_latin1_cookie_round_trip(tmp_path):
    data = b"# -*- coding: latin-1 -*-\ns = '\xe9'\n"
    path = _write(tmp_path / "a.py", data)
    src = read_source(path)
    assert src.encoding == "latin-1"
    assert src.text == "# -*- coding: latin-1 -*-\ns = 'é'\n"
    write_source(src, src.text + "t = 'é'\n")
    assert path.read_bytes() == data + b"t = '\xe9'\n"


def test_cookie_on_second_line_after_shebang(tmp_path):
    data = b"#!/usr/bin/env python\n# vim: set fileencoding=cp1252 :\ns = '\x80'\n"
    src = read_source(_write(tmp_path / "a.py", data))
    assert src.encoding == "cp1252"
    assert src.text.endswith("s = '€'\n")


def test_cookie_after_code_line_is_ignored(tmp_path):
    # PEP 263: line 2 counts only if line 1 is blank or a comment.
    data = b"x = 1\n# coding: latin-1\ns = '\xe9'\n"
    with pytest.raises(SourceError) as info:
        read_source(_write(tmp_path / "a.py", data))
    assert (info.value.kind, info.value.line, info.value.column) == ("decode", 3, 6)


def test_unknown_cookie_codec(tmp_path):
    with pytest.raises(SourceError) as info:
        read_source(_write(tmp_path / "a.py", b"# coding: klingon\nx = 1\n"))
    err = info.value
    assert (err.kind, err.line, err.column) == ("decode", 1, 11)
    assert "klingon" in err.message


def test_bom_conflicting_with_cookie(tmp_path):
    with pytest.raises(SourceError) as info:
        read_source(_write(tmp_path / "a.py", BOM + b"# coding: latin-1\n"))
    assert info.value.kind == "decode"
    assert "BOM" in info.value.message


def test_invalid_utf8_reports_character_position(tmp_path):
    # "s = 'é" is 6 characters (7 bytes): the column counts characters.
    data = b"a = 1\nb = 2\ns = '\xc3\xa9\xff'\n"
    with pytest.raises(SourceError) as info:
        read_source(_write(tmp_path / "a.py", data))
    err = info.value
    assert (err.kind, err.line, err.column) == ("decode", 3, 7)
    assert err.message == (
        "invalid UTF-8 (byte 0xff) at line 3, column 7; declare the encoding with a coding cookie"
    )
    assert str(err) == err.message


def test_invalid_utf8_position_with_cr_endings(tmp_path):
    with pytest.raises(SourceError) as info:
        read_source(_write(tmp_path / "a.py", b"a = 1\rb = 2\r\nc\x80\n"))
    assert (info.value.line, info.value.column) == (3, 2)


def test_invalid_bytes_for_declared_encoding(tmp_path):
    with pytest.raises(SourceError) as info:
        read_source(_write(tmp_path / "a.py", b"# coding: ascii\ns = '\xe9'\n"))
    err = info.value
    assert (err.kind, err.line, err.column) == ("decode", 2, 6)
    assert "declared by the coding cookie" in err.message


def test_binary_file_with_py_name(tmp_path):
    with pytest.raises(SourceError) as info:
        read_source(_write(tmp_path / "model.py", b"x = 1\n\x00\x01\x02"))
    assert info.value.kind == "binary"
    assert info.value.message == "binary file (NUL byte at offset 6)"


def test_nul_byte_beyond_first_8k(tmp_path):
    with pytest.raises(SourceError) as info:
        read_source(_write(tmp_path / "a.py", b"x = 1\n" * 3000 + b"\x00"))
    assert info.value.message == "binary file (NUL byte at offset 18000)"


def test_empty_file(tmp_path):
    path = _write(tmp_path / "a.py", b"")
    src = read_source(path)
    assert (src.text, src.encoding, src.bom, src.newline) == ("", "utf-8", False, "\n")
    assert src.digest == hashlib.sha256(b"").hexdigest()
    write_source(src, "")
    assert path.read_bytes() == b""


# --- reading: line endings -----------------------------------------------------


@pytest.mark.parametrize(
    "data, newline",
    [
        (b"a = 1\r\nb = 2\r\n", "\r\n"),
        (b"a = 1\rb = 2\r", "\r"),
        (b"a = 1\nb = 2\n", "\n"),
        (b"a = 1", "\n"),
        (b"a\r\nb\r\nc\nd\r\n", "\r\n"),  # mixed: CRLF dominates
        (b"a\nb\rc\n", "\n"),
        (b"a\r\nb\n", "\n"),  # tie: "\n" preferred
    ],
)
def test_newline_detected_and_text_unchanged(tmp_path, data, newline):
    path = _write(tmp_path / "a.py", data)
    src = read_source(path)
    assert src.newline == newline
    assert src.text == data.decode()  # no universal-newline translation
    write_source(src, src.text)
    assert path.read_bytes() == data


def test_crlf_safety_net_converts_bare_lf(tmp_path):
    src = read_source(_write(tmp_path / "a.py", b"a = 1\r\nb = 2\r\n"))
    new = "import optax\na = 1\r\nb = 2\r\n"
    assert encode_text(src, new) == b"import optax\r\na = 1\r\nb = 2\r\n"
    write_source(src, new)
    assert src.path.read_bytes() == b"import optax\r\na = 1\r\nb = 2\r\n"


def test_no_newline_conversion_for_mixed_or_lf_files(tmp_path):
    mixed = read_source(_write(tmp_path / "m.py", b"a\r\nb\n"))
    assert encode_text(mixed, "x\ny\r\n") == b"x\ny\r\n"
    lf = read_source(_write(tmp_path / "l.py", b"a\nb\n"))
    assert encode_text(lf, "x\r\ny\n") == b"x\r\ny\n"
    cr = read_source(_write(tmp_path / "c.py", b"a\rb\r"))
    assert encode_text(cr, "x\ry\n") == b"x\ry\n"


# --- reading: file-system errors -------------------------------------------------


def test_size_limit_checked_before_reading(tmp_path, monkeypatch):
    path = _write(tmp_path / "a.py", b"x = 1\n" * 200)
    reads = []
    real_read = os.read
    monkeypatch.setattr(os, "read", lambda fd, n: reads.append(n) or real_read(fd, n))
    with pytest.raises(SourceError) as info:
        read_source(path, max_bytes=100)
    assert info.value.kind == "too-large"
    assert info.value.message == "file is 1.2 KB, above the 100 bytes limit (--max-file-size)"
    assert reads == []
    assert read_source(path, max_bytes=1200).text == "x = 1\n" * 200  # exactly at the bound


def test_huge_sparse_file_rejected_by_default_bound(tmp_path):
    path = tmp_path / "huge.py"
    with open(path, "wb") as f:
        f.truncate(10 * 1024**3)  # sparse: costs no disk or memory
    with pytest.raises(SourceError) as info:
        read_source(path)
    assert info.value.kind == "too-large"
    assert info.value.message == "file is 10240 MB, above the 8 MB limit (--max-file-size)"
    assert MAX_FILE_BYTES == 8 * 1024 * 1024


def test_read_is_bounded_when_file_grows_after_stat(tmp_path, monkeypatch):
    path = _write(tmp_path / "a.py", b"x" * 100_000)

    def small(st):  # report a 10-byte file, as if stat ran before the file grew
        fields = list(st[:10])
        fields[stat.ST_SIZE] = 10
        return os.stat_result(fields)

    real_stat, real_fstat, real_read = os.stat, os.fstat, os.read
    total = []
    monkeypatch.setattr(os, "stat", lambda p, *a, **k: small(real_stat(p, *a, **k)))
    monkeypatch.setattr(os, "fstat", lambda fd: small(real_fstat(fd)))
    monkeypatch.setattr(os, "read", lambda fd, n: total.append(len(chunk := real_read(fd, n))) or chunk)
    with pytest.raises(SourceError) as info:
        read_source(path, max_bytes=1000)
    assert info.value.kind == "too-large"
    assert sum(total) == 1001


def test_missing_file(tmp_path):
    with pytest.raises(SourceError) as info:
        read_source(tmp_path / "gone.py")
    assert info.value.kind == "not-found"


def test_file_vanishing_between_stat_and_open(tmp_path, monkeypatch):
    path = _write(tmp_path / "a.py", b"x = 1\n")
    real_open = os.open

    def racing_open(p, flags, *args, **kwargs):
        os.unlink(path)
        return real_open(p, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", racing_open)
    with pytest.raises(SourceError) as info:
        read_source(path)
    assert info.value.kind == "not-found"


def test_path_through_a_file_is_not_found(tmp_path):
    _write(tmp_path / "a.py", b"")
    with pytest.raises(SourceError) as info:
        read_source(tmp_path / "a.py" / "b.py")
    assert info.value.kind == "not-found"


def test_directory(tmp_path):
    (tmp_path / "pkg.py").mkdir()
    with pytest.raises(SourceError) as info:
        read_source(tmp_path / "pkg.py")
    assert info.value.kind == "is-directory"


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs")
def test_fifo_is_rejected_without_blocking(tmp_path):
    os.mkfifo(tmp_path / "pipe.py")
    with pytest.raises(SourceError) as info:
        read_source(tmp_path / "pipe.py")
    assert info.value.kind == "os-error"


def test_permission_denied(tmp_path, monkeypatch):
    # Tests may run as root, where chmod 000 does not block reads: fake EACCES.
    path = _write(tmp_path / "a.py", b"x = 1\n")
    real_open = os.open

    def denied(p, flags, *args, **kwargs):
        if Path(p) == path:
            raise PermissionError(errno.EACCES, "Permission denied", str(p))
        return real_open(p, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", denied)
    with pytest.raises(SourceError) as info:
        read_source(path)
    assert info.value.kind == "permission"


# --- writing ---------------------------------------------------------------------


@pytest.mark.parametrize("mode", [0o755, 0o640, 0o444])
def test_mode_kept_after_write(tmp_path, mode):
    path = _write(tmp_path / "a.py", b"x = 1\n")
    os.chmod(path, mode)
    src = read_source(path)
    assert src.mode == mode
    write_source(src, "x = 2\n")
    assert path.read_bytes() == b"x = 2\n"
    assert stat.S_IMODE(os.stat(path).st_mode) == mode


def test_no_temp_files_after_success(tmp_path):
    path = _write(tmp_path / "a.py", b"x = 1\n")
    write_source(read_source(path), "x = 2\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.py"]


def test_failed_replace_leaves_original_and_no_temp(tmp_path, monkeypatch):
    path = _write(tmp_path / "a.py", b"x = 1\n")
    src = read_source(path)
    seen = []

    def broken_replace(a, b):
        seen.append(Path(a).name)
        raise OSError(errno.EIO, "I/O error")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(SourceError) as info:
        write_source(src, "x = 2\n")
    assert info.value.kind == "os-error"
    assert seen and seen[0].startswith(".a.py.") and seen[0].endswith(".optax-lint.tmp")
    assert path.read_bytes() == b"x = 1\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.py"]


def test_source_changed_on_disk(tmp_path):
    path = _write(tmp_path / "a.py", b"x = 1\n")
    src = read_source(path)
    path.write_bytes(b"x = 1  # edited meanwhile\n")
    with pytest.raises(SourceChanged) as info:
        write_source(src, "x = 2\n")
    assert isinstance(info.value, SourceError)
    assert info.value.kind == "changed"
    assert info.value.message == "file changed on disk since it was read; not overwritten"
    assert path.read_bytes() == b"x = 1  # edited meanwhile\n"
    assert _leftovers(tmp_path) == []


def test_deleted_file_is_not_recreated(tmp_path):
    path = _write(tmp_path / "a.py", b"x = 1\n")
    src = read_source(path)
    path.unlink()
    with pytest.raises(SourceChanged):
        write_source(src, "x = 2\n")
    assert not path.exists()


def test_unencodable_text_writes_nothing(tmp_path):
    data = b"# coding: latin-1\ns = '\xe9'\n"
    path = _write(tmp_path / "a.py", data)
    src = read_source(path)
    with pytest.raises(SourceError) as info:
        write_source(src, src.text + "t = '€'\n")
    err = info.value
    assert (err.kind, err.line, err.column) == ("encode", 3, 6)
    assert "U+20AC" in err.message
    assert path.read_bytes() == data
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.py"]


def test_symlink_written_through(tmp_path):
    real = _write(tmp_path / "real.py", b"x = 1\n")
    os.chmod(real, 0o750)
    link = tmp_path / "link.py"
    link.symlink_to("real.py")
    src = read_source(link)
    write_source(src, "x = 2\n")
    assert link.is_symlink() and os.readlink(link) == "real.py"
    assert real.read_bytes() == b"x = 2\n"
    assert stat.S_IMODE(os.stat(real).st_mode) == 0o750
    assert _leftovers(tmp_path) == []


def test_encode_text_matches_written_bytes(tmp_path):
    path = _write(tmp_path / "a.py", BOM + b"a = 1\r\n")
    src = read_source(path)
    expected = encode_text(src, "a = 2\nb = 3\r\n")
    assert expected == BOM + b"a = 2\r\nb = 3\r\n"
    write_source(src, "a = 2\nb = 3\r\n")
    assert path.read_bytes() == expected


def test_source_file_is_frozen(tmp_path):
    src = read_source(_write(tmp_path / "a.py", b""))
    assert isinstance(src, SourceFile)
    with pytest.raises(AttributeError):
        src.text = "x"  # type: ignore[misc]


# --- crash safety ------------------------------------------------------------------

_CHILD = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from optax_lint.core.source import read_source, write_source

    path, old, new = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
    print("ready", flush=True)
    while True:  # flip between the two contents until killed
        src = read_source(path)
        write_source(src, new * 400_000 if src.text.startswith(old) else old * 300_000)
    """
)


def test_sigkill_mid_write_leaves_old_or_new(tmp_path):
    old_bytes, new_bytes = b"a = 1\n" * 300_000, b"bb = 22\n" * 400_000  # 1.8 MB / 3.2 MB
    path = tmp_path / "target.py"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    seen = set()
    deadline = time.monotonic() + 30
    for i in range(20):
        path.write_bytes(old_bytes)
        child = subprocess.Popen(
            [sys.executable, "-c", _CHILD, str(path), "a = 1\n", "bb = 22\n"],
            stdout=subprocess.PIPE,
            env=env,
        )
        try:
            assert child.stdout.readline() == b"ready\n"
            time.sleep(rng.uniform(0, 0.15))
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait()
            child.stdout.close()
        data = path.read_bytes()
        assert data in (old_bytes, new_bytes), f"torn file on iteration {i} (seed {seed}): {len(data)} bytes"
        seen.add(data == new_bytes)
        # A killed writer may leave its temp file, but never anything else.
        for name in _leftovers(tmp_path):
            assert name.startswith(".target.py.")
            (tmp_path / name).unlink()
        assert sorted(p.name for p in tmp_path.iterdir()) == ["target.py"]
        if time.monotonic() > deadline:
            break
    assert seen  # at least one iteration ran to a check
