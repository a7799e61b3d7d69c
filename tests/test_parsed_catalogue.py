"""rules/_parsed.json: the catalogue parsed ahead of time, used only while it matches.

The bundle spares every start-up tomllib's parse of the catalogue (~90 ms, a third of a
pre-commit run over files the prefilter rules out). It must never change what the
linter reads: an entry whose hash no longer matches its TOML file is ignored.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from optax_lint.core import catalogue

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A catalogue folder of one table, with the bundle's cache cleared around the test."""
    (tmp_path / "protocol.toml").write_text('[warmup]\nmin_fraction = 0.01\n', encoding="utf-8")
    monkeypatch.setattr(catalogue, "catalogue_dir", lambda: tmp_path)
    catalogue._parsed_bundle.cache_clear()
    yield tmp_path
    catalogue._parsed_bundle.cache_clear()


def _bundle(folder: Path) -> dict:
    return json.loads((folder / catalogue.PARSED_BUNDLE).read_text(encoding="utf-8"))


def test_the_committed_bundle_is_current() -> None:
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "gen_parsed_catalogue.py"), "--check"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_every_catalogue_file_reads_the_same_from_the_bundle_as_from_its_toml() -> None:
    parser = catalogue.toml_parser()
    bundle = _bundle(catalogue.catalogue_dir())["files"]
    tomls = sorted(catalogue.catalogue_dir().glob("*.toml"))
    assert sorted(bundle) == [p.name for p in tomls]
    for path in tomls:
        assert catalogue._read_toml(path) == parser.loads(path.read_text(encoding="utf-8")), path.name
        assert catalogue._read_toml(path) is bundle_entry(path.name), path.name  # from the bundle, not reparsed


def bundle_entry(name: str):
    return catalogue._parsed_bundle()[name]["data"]


def test_a_matching_entry_is_read_from_the_bundle(folder: Path) -> None:
    (folder / catalogue.PARSED_BUNDLE).write_text(catalogue.render_parsed_bundle(folder), encoding="utf-8")
    stored = _bundle(folder)
    stored["files"]["protocol.toml"]["data"] = {"warmup": {"min_fraction": 0.5}}  # same hash, other data
    (folder / catalogue.PARSED_BUNDLE).write_text(json.dumps(stored), encoding="utf-8")
    assert catalogue._read_toml(folder / "protocol.toml") == {"warmup": {"min_fraction": 0.5}}


def test_an_entry_for_an_edited_file_is_ignored(folder: Path) -> None:
    (folder / catalogue.PARSED_BUNDLE).write_text(catalogue.render_parsed_bundle(folder), encoding="utf-8")
    (folder / "protocol.toml").write_text('[warmup]\nmin_fraction = 0.02\n', encoding="utf-8")
    assert catalogue._read_toml(folder / "protocol.toml") == {"warmup": {"min_fraction": 0.02}}


@pytest.mark.parametrize("text", ["", "{not json", '{"format": 99, "files": {}}', '[1, 2]', '{"format": 1, "files": 3}'])
def test_an_absent_damaged_or_foreign_bundle_falls_back_to_the_toml(folder: Path, text: str) -> None:
    if text:
        (folder / catalogue.PARSED_BUNDLE).write_text(text, encoding="utf-8")
    assert catalogue._read_toml(folder / "protocol.toml") == {"warmup": {"min_fraction": 0.01}}


def test_the_bundle_is_deterministic_and_lists_only_toml_files(folder: Path) -> None:
    (folder / "notes.txt").write_text("not a table\n", encoding="utf-8")
    first = catalogue.render_parsed_bundle(folder)
    assert first == catalogue.render_parsed_bundle(folder)
    assert list(json.loads(first)["files"]) == ["protocol.toml"]
