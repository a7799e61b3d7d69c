"""`optax-lint server`: a subprocess speaking LSP over stdio, driven by a minimal JSON-RPC
client written here (so the test checks the wire protocol, not pygls's own client):
open a document, receive its diagnostics, request and apply a code action, check the
text, send the change and see the diagnostics go; hover shows the rule's doc."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT = 60

BAD = """import optax

tx = optax.chain(
    optax.adamw(1e-3),
    optax.clip_by_global_norm(1.0),
)
"""
FIXED = """import optax

tx = optax.chain(
    optax.clip_by_global_norm(1.0),
    optax.adamw(1e-3),
)
"""


class Client:
    """Content-Length framed JSON-RPC over the server's stdin/stdout."""

    def __init__(self, cwd: Path) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "optax_lint", "server"], cwd=cwd, env=env,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )
        self.inbox: "queue.Queue[dict]" = queue.Queue()
        self.pending: list[dict] = []
        self.next_id = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        stream = self.proc.stdout
        while True:
            headers = {}
            while True:
                line = stream.readline()
                if not line:
                    return
                line = line.decode("ascii").strip()
                if not line:
                    break
                key, _, value = line.partition(":")
                headers[key.strip().lower()] = value.strip()
            self.inbox.put(json.loads(stream.read(int(headers["content-length"]))))

    def send(self, message: dict) -> None:
        body = json.dumps({"jsonrpc": "2.0", **message}).encode("utf-8")
        self.proc.stdin.write(f"Content-Length: {len(body)}\r\n\r\n".encode("ascii") + body)
        self.proc.stdin.flush()

    def notify(self, method: str, params: dict) -> None:
        self.send({"method": method, "params": params})

    def request(self, method: str, params: dict):
        self.next_id += 1
        ident = self.next_id
        self.send({"id": ident, "method": method, "params": params})
        reply = self._wait(lambda m: m.get("id") == ident and "method" not in m)
        assert "error" not in reply, reply
        return reply["result"]

    def notification(self, method: str, where=lambda params: True) -> dict:
        return self._wait(lambda m: m.get("method") == method and where(m["params"]))["params"]

    def _wait(self, match) -> dict:
        for i, message in enumerate(self.pending):
            if match(message):
                return self.pending.pop(i)
        while True:
            message = self.inbox.get(timeout=TIMEOUT)
            if match(message):
                return message
            self.pending.append(message)

    def close(self) -> int:
        try:
            self.request("shutdown", None)
            self.notify("exit", None)
            return self.proc.wait(timeout=TIMEOUT)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(timeout=TIMEOUT)


def apply_edits(text: str, edits: list[dict]) -> str:
    """Apply LSP TextEdits (UTF-16 positions) to `text`, last first."""
    lines = text.split("\n")

    def offset(position: dict) -> int:
        line = lines[position["line"]]
        units, chars = 0, 0
        while units < position["character"]:
            units += len(line[chars].encode("utf-16-le")) // 2
            chars += 1
        return sum(len(l) + 1 for l in lines[: position["line"]]) + chars

    for edit in sorted(edits, key=lambda e: (e["range"]["start"]["line"], e["range"]["start"]["character"]), reverse=True):
        start, end = offset(edit["range"]["start"]), offset(edit["range"]["end"])
        text = text[:start] + edit["newText"] + text[end:]
    return text


@pytest.fixture
def client(tmp_path: Path):
    pytest.importorskip("pygls")
    c = Client(tmp_path)
    result = c.request("initialize", {"processId": None, "rootUri": tmp_path.as_uri(), "capabilities": {}})
    assert result["serverInfo"]["name"] == "optax-lint"
    assert result["capabilities"]["codeActionProvider"]["codeActionKinds"] == ["quickfix", "source.fixAll.optax-lint"]
    assert result["capabilities"]["hoverProvider"]
    c.notify("initialized", {})
    yield c
    assert c.close() == 0


def open_document(client: Client, uri: str, text: str, version: int = 1) -> list[dict]:
    client.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": version, "text": text}})
    return client.notification("textDocument/publishDiagnostics", lambda p: p["uri"] == uri and p.get("version") == version)["diagnostics"]


def rng(line: int, start: int, end_line: int, end: int) -> dict:
    return {"start": {"line": line, "character": start}, "end": {"line": end_line, "character": end}}


def test_open_diagnose_code_action_change(client: Client, tmp_path: Path) -> None:
    uri = (tmp_path / "train.py").as_uri()  # never written: the server lints the editor's text
    [diagnostic] = open_document(client, uri, BAD)
    assert diagnostic["code"] == "OPX101" and diagnostic["source"] == "optax-lint"
    assert diagnostic["range"] == rng(4, 4, 4, 34)
    assert diagnostic["severity"] == 1  # Error
    assert diagnostic["codeDescription"]["href"].endswith("docs/rules.md#clip-after-optimizer-opx101")
    assert diagnostic["message"].startswith("clip_by_global_norm(1.0) runs after adamw(1e-3) in this chain")
    assert diagnostic["message"].endswith("\nhelp: Move clip_by_global_norm(1.0) to the front of the chain (the optimizer state changes structure: a checkpoint of the old opt_state will not restore into it)")
    assert [(r["location"]["uri"], r["location"]["range"]) for r in diagnostic["relatedInformation"]] == [
        (uri, rng(2, 5, 5, 1)), (uri, rng(3, 4, 3, 21))]  # the chain call, the learning-rate step

    actions = client.request("textDocument/codeAction", {
        "textDocument": {"uri": uri}, "range": diagnostic["range"], "context": {"diagnostics": [diagnostic]},
    })
    quick = [a for a in actions if a["kind"] == "quickfix"]
    assert [a["title"] for a in quick] == ["Move clip_by_global_norm(1.0) to the front of the chain (the optimizer state changes structure: a checkpoint of the old opt_state will not restore into it) (safe fix, OPX101)"]
    assert quick[0]["isPreferred"] is True and quick[0]["diagnostics"][0]["code"] == "OPX101"
    fixed = apply_edits(BAD, quick[0]["edit"]["changes"][uri])
    assert fixed == FIXED
    assert not (tmp_path / "train.py").exists()

    client.notify("textDocument/didChange", {
        "textDocument": {"uri": uri, "version": 2}, "contentChanges": [{"text": fixed}],
    })
    after = client.notification("textDocument/publishDiagnostics", lambda p: p["uri"] == uri and p.get("version") == 2)
    assert after["diagnostics"] == []


def test_incremental_change_from_the_code_action_clears_the_diagnostic(client: Client, tmp_path: Path) -> None:
    """What an editor does: apply the action's edits, then send them as incremental changes."""
    uri = (tmp_path / "train.py").as_uri()
    [diagnostic] = open_document(client, uri, BAD)
    [action] = [a for a in client.request("textDocument/codeAction", {
        "textDocument": {"uri": uri}, "range": diagnostic["range"], "context": {"diagnostics": [diagnostic]},
    }) if a["kind"] == "quickfix"]
    edits = action["edit"]["changes"][uri]
    changes = [{"range": e["range"], "text": e["newText"]} for e in sorted(edits, key=lambda e: (e["range"]["start"]["line"], e["range"]["start"]["character"]), reverse=True)]
    client.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": 2}, "contentChanges": changes})
    after = client.notification("textDocument/publishDiagnostics", lambda p: p["uri"] == uri and p.get("version") == 2)
    assert after["diagnostics"] == []
    hover = client.request("textDocument/hover", {"textDocument": {"uri": uri}, "position": {"line": 4, "character": 10}})
    assert hover is None


def test_hover_over_a_finding_shows_the_rule_doc(client: Client, tmp_path: Path) -> None:
    uri = (tmp_path / "train.py").as_uri()
    open_document(client, uri, BAD)
    hover = client.request("textDocument/hover", {"textDocument": {"uri": uri}, "position": {"line": 4, "character": 10}})
    assert hover["contents"]["kind"] == "markdown"
    value = hover["contents"]["value"]
    assert value.startswith("**OPX101** clip_by_global_norm(1.0) runs after adamw(1e-3)")
    assert "# clip-after-optimizer (OPX101)" in value and "## Why is this bad?" in value
    assert hover["range"] == rng(4, 4, 4, 34)
    assert client.request("textDocument/hover", {"textDocument": {"uri": uri}, "position": {"line": 0, "character": 2}}) is None


def test_unsafe_fix_is_marked_and_utf16_columns(client: Client, tmp_path: Path) -> None:
    uri = (tmp_path / "other.py").as_uri()
    text = 'import optax\nweight_decay = 0.01\nnote = "\U0001f680"; tx = optax.adamw(1e-3, weight_decay)\n'
    diagnostics = open_document(client, uri, text)
    [d] = [d for d in diagnostics if d["code"] == "OPX105"]
    line = text.splitlines()[2]
    # The rocket is one code point but two UTF-16 code units: LSP counts the latter.
    assert d["range"] == rng(2, line.index("weight_decay)") + 1, 2, line.index(")") + 1)
    actions = client.request("textDocument/codeAction", {"textDocument": {"uri": uri}, "range": d["range"], "context": {"diagnostics": [d]}})
    [unsafe] = [a for a in actions if "OPX105" in a["title"]]
    assert unsafe["title"].endswith("(unsafe fix, OPX105)") and unsafe["isPreferred"] is False
    fixed = apply_edits(text, unsafe["edit"]["changes"][uri])
    assert fixed == text.replace("(1e-3, weight_decay)", "(1e-3, weight_decay=weight_decay)")


def test_fix_all_source_action(client: Client, tmp_path: Path) -> None:
    uri = (tmp_path / "train.py").as_uri()
    open_document(client, uri, BAD)
    actions = client.request("textDocument/codeAction", {
        "textDocument": {"uri": uri}, "range": rng(0, 0, 0, 0), "context": {"diagnostics": [], "only": ["source.fixAll.optax-lint"]},
    })
    [action] = actions
    assert action["title"] == "Apply all safe optax-lint fixes" and action["kind"] == "source.fixAll.optax-lint"
    assert apply_edits(BAD, action["edit"]["changes"][uri]) == FIXED


def test_a_config_error_is_shown_once_and_defaults_apply(client: Client, tmp_path: Path) -> None:
    (tmp_path / "optax-lint.toml").write_text("select = 3\n")
    uri = (tmp_path / "train.py").as_uri()
    [diagnostic] = open_document(client, uri, BAD)
    assert diagnostic["code"] == "OPX101"
    message = client.notification("window/showMessage")
    assert message["type"] == 2 and message["message"].startswith("optax-lint: ") and "select" in message["message"]
    client.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": 2}, "contentChanges": [{"text": BAD + "\n"}]})
    client.notification("textDocument/publishDiagnostics", lambda p: p.get("version") == 2)
    assert not [m for m in client.pending if m.get("method") == "window/showMessage"]


def test_notebook_cells_get_their_own_diagnostics_and_fixes(client: Client, tmp_path: Path) -> None:
    """An editor's notebook: cells are linted together (imports in cell 1 count in cell 3),
    each cell gets its diagnostics, a quick fix edits the cell, and a change clears it."""
    nb_uri = (tmp_path / "train.ipynb").as_uri()
    cell = [f"vscode-notebook-cell:{tmp_path / 'train.ipynb'}#c{i}" for i in (1, 2, 3)]
    texts = ["%pip install -q optax\nimport optax\n", "# Training", "!nvidia-smi\n" + BAD.split("\n", 1)[1]]
    client.notify("notebookDocument/didOpen", {
        "notebookDocument": {"uri": nb_uri, "notebookType": "jupyter-notebook", "version": 1, "cells": [
            {"kind": 2, "document": cell[0]}, {"kind": 1, "document": cell[1]}, {"kind": 2, "document": cell[2]},
        ]},
        "cellTextDocuments": [
            {"uri": cell[0], "languageId": "python", "version": 1, "text": texts[0]},
            {"uri": cell[1], "languageId": "markdown", "version": 1, "text": texts[1]},
            {"uri": cell[2], "languageId": "python", "version": 1, "text": texts[2]},
        ],
    })
    first = client.notification("textDocument/publishDiagnostics", lambda p: p["uri"] == cell[0])
    third = client.notification("textDocument/publishDiagnostics", lambda p: p["uri"] == cell[2])
    assert first["diagnostics"] == []
    [diagnostic] = third["diagnostics"]
    assert (diagnostic["code"], diagnostic["range"]) == ("OPX101", rng(4, 4, 4, 34))  # line 5 of cell 3, after !nvidia-smi
    assert [(r["location"]["uri"], r["location"]["range"]["start"]) for r in diagnostic["relatedInformation"]] == [
        (cell[2], {"line": 2, "character": 5}), (cell[2], {"line": 3, "character": 4})]
    actions = client.request("textDocument/codeAction", {"textDocument": {"uri": cell[2]}, "range": diagnostic["range"], "context": {"diagnostics": [diagnostic]}})
    assert [a["kind"] for a in actions] == ["quickfix", "source.fixAll.optax-lint"]
    action = actions[0]
    assert action["title"].endswith("(safe fix, OPX101)")
    fixed = apply_edits(texts[2], action["edit"]["changes"][cell[2]])
    assert fixed == "!nvidia-smi\n" + FIXED.split("\n", 1)[1]
    fix_all_actions = client.request("textDocument/codeAction", {"textDocument": {"uri": cell[0]}, "range": rng(0, 0, 0, 0),
                                                            "context": {"diagnostics": [], "only": ["source.fixAll.optax-lint"]}})
    [fix_all] = fix_all_actions
    assert list(fix_all["edit"]["changes"]) == [cell[2]]  # the whole notebook: only the cell that changes
    assert apply_edits(texts[2], fix_all["edit"]["changes"][cell[2]]) == fixed
    hover = client.request("textDocument/hover", {"textDocument": {"uri": cell[2]}, "position": {"line": 4, "character": 6}})
    assert "# clip-after-optimizer (OPX101)" in hover["contents"]["value"]
    client.notify("notebookDocument/didChange", {
        "notebookDocument": {"uri": nb_uri, "version": 2},
        "change": {"cells": {"textContent": [{"document": {"uri": cell[2], "version": 2}, "changes": [{"text": fixed}]}]}},
    })
    after = client.notification("textDocument/publishDiagnostics", lambda p: p["uri"] == cell[2] and p.get("version") == 2)
    assert after["diagnostics"] == []


def test_documents_that_are_not_python_get_no_diagnostics(client: Client, tmp_path: Path) -> None:
    assert open_document(client, (tmp_path / "train.ipynb").as_uri(), BAD) == []  # a notebook opened as JSON text
    uri = (tmp_path / "notes.md").as_uri()
    client.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "markdown", "version": 1, "text": BAD}})
    assert client.notification("textDocument/publishDiagnostics", lambda p: p["uri"] == uri)["diagnostics"] == []


def test_excluded_files_get_no_diagnostics(client: Client, tmp_path: Path) -> None:
    (tmp_path / "optax-lint.toml").write_text('extend-exclude = ["scratch"]\n')
    (tmp_path / "scratch").mkdir()
    assert open_document(client, (tmp_path / "scratch" / "try.py").as_uri(), BAD) == []
    assert [d["code"] for d in open_document(client, (tmp_path / "train.py").as_uri(), BAD)] == ["OPX101"]


def test_server_without_pygls_explains_the_extra(tmp_path: Path) -> None:
    code = "import sys; sys.modules['pygls'] = None\nfrom optax_lint.cli import main\nmain(['server'])"
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 2 and proc.stdout == ""
    assert "pip install '.[lsp]'" in proc.stderr and "Traceback" not in proc.stderr  # not on PyPI: from a clone or from git
    assert "pip install 'optax-lint[lsp] @ git+https://github.com/optax-lint/optax-lint@<rev>'" in proc.stderr
