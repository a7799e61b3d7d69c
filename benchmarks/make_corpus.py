#!/usr/bin/env python3
"""Write a deterministic, realistic corpus of JAX-project Python files for the benchmark.

    python benchmarks/make_corpus.py OUT_DIR [--files 240] [--seed 0]

About 40% of the files use optax, in the styles real projects use (literal chains,
chains built with `.append` under config branches, inject_hyperparams, MultiSteps,
masked / multi_transform, TrainState, `tx.update` + `apply_updates`, pmap with
`lax.pmean`, nnx.Optimizer, PPO-style RL, optimizer factories, tests); a minority
carry known bugs (clip after adamw, decay after adam, ...). The rest is ordinary
project code that never mentions optax: flax models, ml_collections configs, data
pipelines, numpy utilities, CLI tools, dataclasses, logging helpers, tests.

The output depends only on --files and --seed. Every file is checked with
`ast.parse` as it is generated; a template bug fails loudly.
"""

from __future__ import annotations

import argparse
import ast
import json
import random
import re
import shutil
import string
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

MANIFEST = "MANIFEST.json"
OPTAX_SHARE = 0.40
MIN_FILES, MIN_LINES = 200, 50_000

# --------------------------------------------------------------------------------------
# Template helpers
# --------------------------------------------------------------------------------------

_BLOCK_LINE = re.compile(r"(\s*)\$\{?(\w+)\}?")


def T(src: str, **kw: object) -> str:
    """Dedent and fill a template.

    A line holding only `$name` takes a (multi-line) block, indented like the line;
    an empty block drops the line, which is how optional statements are written.
    """
    out: list[str] = []
    for line in textwrap.dedent(src).strip("\n").split("\n"):
        m = _BLOCK_LINE.fullmatch(line)
        if m and m.group(2) in kw:
            block = str(kw[m.group(2)]).rstrip("\n")
            if block:
                out.extend(m.group(1) + b if b.strip() else "" for b in block.split("\n"))
        else:
            out.append(line)
    return string.Template("\n".join(out)).substitute({k: str(v) for k, v in kw.items()}) + "\n"


class Src:
    """One Python file being assembled: imports, top-level blocks, names in use."""

    def __init__(self, rng: random.Random, project: str) -> None:
        self.rng = rng
        self.project = project
        self.imports: list[str] = []
        self.typing: list[str] = []
        self.blocks: list[str] = []
        self.tail = ""  # the `if __name__ == "__main__":` block, always last
        self.fillers_used: list[Callable] = []
        self.used: set[str] = set()  # membership only; never iterated (keeps output deterministic)
        self.patterns: list[str] = []  # notable optax patterns and injected bugs, for the manifest
        self.stdlib_logging = True  # False when absl.logging owns the name `logging`

    def imp(self, *lines: str) -> None:
        for line in lines:
            if line not in self.imports:
                self.imports.append(line)

    def typ(self, *names: str) -> None:
        for n in names:
            if n not in self.typing:
                self.typing.append(n)

    def pick(self, seq):  # type: ignore[no-untyped-def]
        return self.rng.choice(seq)

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    def fresh(self, *bases: str) -> str:
        base = self.rng.choice(bases)
        name, k = base, 2
        while name in self.used:
            name, k = f"{base}_{k}", k + 1
        self.used.add(name)
        return name

    def add(self, block: str) -> None:
        self.blocks.append(block)

    def n_lines(self) -> int:
        return len(self.render("x").splitlines())

    def render(self, doc: str) -> str:
        std: list[str] = []
        third: list[str] = []
        local: list[str] = []
        lines = list(self.imports)
        if self.typing:
            lines.append("from typing import " + ", ".join(sorted(self.typing)))
        for line in lines:
            mod = line.split()[1].split(".")[0]
            if mod.startswith("proj_"):
                local.append(line)
            elif mod in sys.stdlib_module_names:
                std.append(line)
            else:
                third.append(line)
        key = lambda s: (s.split()[1].lower(), s)  # noqa: E731 - isort-like: by module
        head = [f'"""{doc}"""', ""]
        for group in (sorted(std, key=key), sorted(third, key=key), sorted(local, key=key)):
            if group:
                head += group + [""]
        return "\n".join(head) + "\n\n" + "\n\n".join(self.blocks + ([self.tail] if self.tail else []))


def fill(s: Src, pools: list[Callable[[Src], str]], target: int, hard_max: int) -> None:
    """Append filler blocks until the file reaches `target` lines without passing `hard_max`.

    Each filler is used once per file (a few that generate varied code may repeat); when the
    file's own pools run dry, any other plain filler is used.
    """
    spare = [f for f in ALL_FILLERS if f not in pools and (s.stdlib_logging or f not in STDLIB_LOGGING)]
    for _ in range(100):
        if s.n_lines() >= target:
            return
        fresh = [f for f in pools if f in REPEATABLE or f not in s.fillers_used]
        fresh = fresh or [f for f in spare if f not in s.fillers_used]
        if not fresh:
            return
        gen = s.rng.choice(fresh)
        s.fillers_used.append(gen)
        # Fillers may add imports or a TypeVar too: undo all of it if the file grows too long.
        saved = (list(s.imports), list(s.typing), list(s.blocks))
        s.add(gen(s))
        if s.n_lines() > hard_max:
            s.imports, s.typing, s.blocks = saved


WORDS = ["batch", "record", "example", "shard", "sample", "token", "feature", "metric",
         "frame", "image", "sequence", "span", "chunk", "window", "label", "episode", "split"]
DATASETS = ["imagenet", "cifar10", "c4", "wmt14", "mnist", "librispeech", "coco", "lm1b",
            "glue", "openwebtext", "atari", "procgen", "squad", "laion"]


# --------------------------------------------------------------------------------------
# Fillers: plain code, no optax. Each returns one top-level block with random names.
# --------------------------------------------------------------------------------------


def f_normalize(s: Src) -> str:
    s.imp("import numpy as np")
    s.typ("Optional")
    return T('''
    def $fn(x: np.ndarray, axis: Optional[int] = $axis, eps: float = $eps) -> np.ndarray:
        """Zero mean, unit variance along `axis`; eps keeps constant columns finite."""
        x = np.asarray(x, dtype=np.float32)
        mean = x.mean(axis=axis, keepdims=True)
        std = x.std(axis=axis, keepdims=True)
        return (x - mean) / (std + eps)
    ''', fn=s.fresh("normalize", "standardize", "zscore", "whiten"),
             axis=s.pick(["0", "-1", "None"]), eps=s.pick(["1e-6", "1e-8", "1e-5"]))


def f_pad_to_multiple(s: Src) -> str:
    s.imp("import numpy as np")
    return T('''
    def $fn(x: np.ndarray, multiple: int = $m, axis: int = 0, value: float = $val) -> np.ndarray:
        """Pads `x` along `axis` so its length divides evenly into $m-sized shards."""
        length = x.shape[axis]
        remainder = length % multiple
        if remainder == 0:
            return x
        pad = [(0, 0)] * x.ndim
        pad[axis] = (0, multiple - remainder)
        return np.pad(x, pad, mode="constant", constant_values=value)
    ''', fn=s.fresh("pad_to_multiple", "pad_for_sharding", "pad_batch"),
             m=s.pick(["8", "16", "32", "128"]), val=s.pick(["0", "0.0", "-1"]))


def f_moving_average(s: Src) -> str:
    s.imp("import numpy as np")
    cls = s.fresh("MovingAverage", "RunningMean", "SmoothedValue")
    return T('''
    class $cls:
        """Exponential moving average of a scalar, with bias correction."""

        def __init__(self, decay: float = $decay) -> None:
            self.decay = decay
            self.value = 0.0
            self.count = 0

        def update(self, x: float) -> float:
            self.count += 1
            self.value = self.decay * self.value + (1.0 - self.decay) * float(x)
            return self.corrected

        @property
        def corrected(self) -> float:
            if self.count == 0:
                return float("nan")
            return self.value / (1.0 - self.decay**self.count)

        def __repr__(self) -> str:
            return f"$cls(value={self.corrected:.4f}, count={self.count})"


    def $fn(values: np.ndarray, window: int = $w) -> np.ndarray:
        """Simple moving average with a `valid` window, for smoothing loss curves."""
        if window <= 1:
            return np.asarray(values, dtype=np.float64)
        kernel = np.ones(window) / window
        return np.convolve(values, kernel, mode="valid")
    ''', cls=cls, decay=s.pick(["0.9", "0.99", "0.999"]), w=s.pick(["5", "10", "50", "100"]),
             fn=s.fresh("smooth", "moving_average", "rolling_mean"))


def f_confusion(s: Src) -> str:
    s.imp("import numpy as np")
    s.typ("Dict")
    return T('''
    def $fn(labels: np.ndarray, preds: np.ndarray, num_classes: int = $n) -> np.ndarray:
        """Confusion matrix via np.add.at; rows are labels, columns predictions."""
        matrix = np.zeros((num_classes, num_classes), dtype=np.int64)
        np.add.at(matrix, (labels.astype(np.int64), preds.astype(np.int64)), 1)
        return matrix


    def ${fn}_summary(matrix: np.ndarray) -> Dict[str, float]:
        """Accuracy and macro precision / recall from a confusion matrix."""
        tp = np.diag(matrix).astype(np.float64)
        precision = tp / np.maximum(matrix.sum(axis=0), 1)
        recall = tp / np.maximum(matrix.sum(axis=1), 1)
        f1 = 2 * precision * recall / np.maximum(precision + recall, 1e-12)
        return {
            "accuracy": float(tp.sum() / max(matrix.sum(), 1)),
            "macro_precision": float(precision.mean()),
            "macro_recall": float(recall.mean()),
            "macro_f1": float(f1.mean()),
        }
    ''', fn=s.fresh("confusion_matrix", "compute_confusion", "class_confusion"),
             n=s.pick(["10", "100", "1000", "21"]))


def f_windows(s: Src) -> str:
    s.imp("import numpy as np")
    s.typ("Iterator", "Tuple")
    return T('''
    def $fn(x: np.ndarray, size: int = $size, stride: int = $stride) -> Iterator[Tuple[int, np.ndarray]]:
        """Yields (start, window) pairs over the first axis; the tail is zero-padded."""
        n = x.shape[0]
        for start in range(0, max(n - size, 0) + stride, stride):
            window = x[start : start + size]
            if window.shape[0] < size:
                pad = np.zeros((size - window.shape[0],) + x.shape[1:], dtype=x.dtype)
                window = np.concatenate([window, pad], axis=0)
            yield start, window
    ''', fn=s.fresh("sliding_windows", "iter_windows", "frame_signal"),
             size=s.pick(["64", "128", "256", "512"]), stride=s.pick(["32", "64", "128"]))


def f_iou(s: Src) -> str:
    s.imp("import numpy as np")
    return T('''
    def $fn(boxes_a: np.ndarray, boxes_b: np.ndarray) -> np.ndarray:
        """Pairwise IoU of [N, 4] and [M, 4] boxes given as (y0, x0, y1, x1)."""
        area_a = (boxes_a[:, 2] - boxes_a[:, 0]) * (boxes_a[:, 3] - boxes_a[:, 1])
        area_b = (boxes_b[:, 2] - boxes_b[:, 0]) * (boxes_b[:, 3] - boxes_b[:, 1])
        top_left = np.maximum(boxes_a[:, None, :2], boxes_b[None, :, :2])
        bottom_right = np.minimum(boxes_a[:, None, 2:], boxes_b[None, :, 2:])
        wh = np.clip(bottom_right - top_left, 0.0, None)
        inter = wh[..., 0] * wh[..., 1]
        union = area_a[:, None] + area_b[None, :] - inter
        return inter / np.maximum(union, $eps)
    ''', fn=s.fresh("pairwise_iou", "box_iou", "iou_matrix"), eps=s.pick(["1e-9", "1e-6"]))


def f_one_hot(s: Src) -> str:
    s.imp("import numpy as np")
    return T('''
    def $fn(labels: np.ndarray, num_classes: int, smoothing: float = 0.0) -> np.ndarray:
        """One-hot encode integer labels, optionally with uniform label smoothing."""
        out = np.zeros(labels.shape + (num_classes,), dtype=np.float32)
        np.put_along_axis(out, labels[..., None].astype(np.int64), 1.0, axis=-1)
        if smoothing:
            out = out * (1.0 - smoothing) + smoothing / num_classes
        return out
    ''', fn=s.fresh("one_hot", "to_one_hot", "encode_labels"))


def f_welford(s: Src) -> str:
    s.imp("import numpy as np")
    cls = s.fresh("RunningStats", "WelfordStats", "OnlineMoments")
    return T('''
    class $cls:
        """Streaming mean and variance (Welford), so huge datasets fit in one pass."""

        def __init__(self, shape: tuple = ()) -> None:
            self.n = 0
            self.mean = np.zeros(shape, dtype=np.float64)
            self.m2 = np.zeros(shape, dtype=np.float64)

        def push(self, x: np.ndarray) -> None:
            for row in np.atleast_2d(x):
                self.n += 1
                delta = row - self.mean
                self.mean += delta / self.n
                self.m2 += delta * (row - self.mean)

        @property
        def variance(self) -> np.ndarray:
            return self.m2 / max(self.n - 1, 1)

        @property
        def std(self) -> np.ndarray:
            return np.sqrt(self.variance)

        def merge(self, other: "$cls") -> "$cls":
            out = $cls(self.mean.shape)
            out.n = self.n + other.n
            if out.n == 0:
                return out
            delta = other.mean - self.mean
            out.mean = self.mean + delta * other.n / out.n
            out.m2 = self.m2 + other.m2 + delta**2 * self.n * other.n / out.n
            return out
    ''', cls=cls)


def f_chunked(s: Src) -> str:
    s.imp("import itertools")
    s.typ("Iterable", "Iterator", "List", "TypeVar")
    if "_T = TypeVar(\"_T\")\n" not in s.blocks:
        s.blocks.insert(0, '_T = TypeVar("_T")\n')
    return T('''
    def $fn(items: Iterable[_T], size: int = $size, drop_remainder: bool = $drop) -> Iterator[List[_T]]:
        """Groups an iterable into lists of `size`; the last one may be short."""
        it = iter(items)
        while True:
            chunk = list(itertools.islice(it, size))
            if not chunk:
                return
            if drop_remainder and len(chunk) < size:
                return
            yield chunk
    ''', fn=s.fresh("chunked", "batched", "group_into", "take_batches"),
             size=s.pick(["32", "64", "256", "1024"]), drop=s.pick(["False", "True"]))


def f_jsonl(s: Src) -> str:
    s.imp("import json", "import pathlib")
    s.typ("Any", "Dict", "Iterator", "Iterable")
    return T('''
    def read_${w}s(path: "pathlib.Path | str") -> Iterator[Dict[str, Any]]:
        """Reads one JSON object per line, skipping blank lines and comments."""
        with open(path, encoding="utf-8") as f:
            for lineno, line in enumerate(f, start=1):
                line = line.strip()
                if not line or line.startswith("#"):
                    continue
                try:
                    yield json.loads(line)
                except json.JSONDecodeError as e:
                    raise ValueError(f"{path}:{lineno}: bad JSON: {e}") from e


    def write_${w}s(path: "pathlib.Path | str", rows: Iterable[Dict[str, Any]]) -> int:
        """Writes rows as JSON lines; returns how many were written."""
        path = pathlib.Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        count = 0
        with open(path, "w", encoding="utf-8") as f:
            for row in rows:
                f.write(json.dumps(row, sort_keys=True) + "\\n")
                count += 1
        return count
    ''', w=s.fresh(*WORDS))


def f_augment(s: Src) -> str:
    s.imp("import numpy as np")
    return T('''
    def $fn(rng: np.random.Generator, image: np.ndarray, crop: int = $crop, pad: int = $pad) -> np.ndarray:
        """Random crop after reflect padding, then a random horizontal flip."""
        padded = np.pad(image, ((pad, pad), (pad, pad), (0, 0)), mode="reflect")
        y = rng.integers(0, padded.shape[0] - crop + 1)
        x = rng.integers(0, padded.shape[1] - crop + 1)
        out = padded[y : y + crop, x : x + crop]
        if rng.random() < 0.5:
            out = out[:, ::-1]
        return np.ascontiguousarray(out)
    ''', fn=s.fresh("random_crop_flip", "augment_image", "train_augment"),
             crop=s.pick(["32", "224", "64"]), pad=s.pick(["4", "8", "16"]))


def f_vocab(s: Src) -> str:
    s.imp("import collections")
    s.typ("Dict", "Iterable", "List")
    cls = s.fresh("Vocabulary", "Vocab", "TokenTable")
    return T('''
    class $cls:
        """Word-level vocabulary with reserved ids for padding and unknown words."""

        PAD, UNK = "<pad>", "<unk>"

        def __init__(self, tokens: Iterable[str], min_count: int = $minc, max_size: int = $maxs) -> None:
            counts = collections.Counter(tokens)
            kept = [t for t, c in counts.most_common(max_size) if c >= min_count]
            self.itos: List[str] = [self.PAD, self.UNK] + sorted(kept)
            self.stoi: Dict[str, int] = {t: i for i, t in enumerate(self.itos)}

        def __len__(self) -> int:
            return len(self.itos)

        def encode(self, text: str) -> List[int]:
            unk = self.stoi[self.UNK]
            return [self.stoi.get(t, unk) for t in text.lower().split()]

        def decode(self, ids: Iterable[int]) -> str:
            return " ".join(self.itos[i] for i in ids if i != 0)
    ''', cls=cls, minc=s.pick(["1", "2", "5"]), maxs=s.pick(["30_000", "50_000", "8192"]))


def f_pack(s: Src) -> str:
    s.imp("import numpy as np")
    s.typ("Dict", "List", "Sequence")
    return T('''
    def $fn(sequences: Sequence[List[int]], seq_len: int = $n, pad_id: int = 0) -> Dict[str, np.ndarray]:
        """Greedily packs token sequences into rows of `seq_len`, with segment ids."""
        rows, segs = [], []
        row: List[int] = []
        seg: List[int] = []
        seg_id = 1
        for seq in sequences:
            seq = list(seq)[:seq_len]
            if len(row) + len(seq) > seq_len:
                rows.append(row + [pad_id] * (seq_len - len(row)))
                segs.append(seg + [0] * (seq_len - len(seg)))
                row, seg, seg_id = [], [], 1
            row.extend(seq)
            seg.extend([seg_id] * len(seq))
            seg_id += 1
        if row:
            rows.append(row + [pad_id] * (seq_len - len(row)))
            segs.append(seg + [0] * (seq_len - len(seg)))
        return {"inputs": np.asarray(rows, np.int32), "segment_ids": np.asarray(segs, np.int32)}
    ''', fn=s.fresh("pack_sequences", "pack_examples", "greedy_pack"),
             n=s.pick(["128", "256", "512", "1024", "2048"]))


def f_prefetch(s: Src) -> str:
    s.imp("import queue", "import threading")
    s.typ("Iterable", "Iterator", "TypeVar")
    if "_T = TypeVar(\"_T\")\n" not in s.blocks:
        s.blocks.insert(0, '_T = TypeVar("_T")\n')
    cls = s.fresh("Prefetcher", "BackgroundIterator", "ThreadedLoader")
    return T('''
    class $cls(Iterator[_T]):
        """Runs an iterator in a background thread so host input overlaps compute."""

        _DONE = object()

        def __init__(self, source: Iterable[_T], buffer_size: int = $buf) -> None:
            self._queue: "queue.Queue[object]" = queue.Queue(maxsize=buffer_size)
            self._error: "BaseException | None" = None
            self._thread = threading.Thread(target=self._worker, args=(iter(source),), daemon=True)
            self._thread.start()

        def _worker(self, it: Iterator[_T]) -> None:
            try:
                for item in it:
                    self._queue.put(item)
            except BaseException as e:  # re-raised in the consumer thread
                self._error = e
            finally:
                self._queue.put(self._DONE)

        def __next__(self) -> _T:
            item = self._queue.get()
            if item is self._DONE:
                if self._error is not None:
                    raise self._error
                raise StopIteration
            return item  # type: ignore[return-value]
    ''', cls=cls, buf=s.pick(["2", "4", "8", "16"]))


def f_split(s: Src) -> str:
    s.imp("import hashlib")
    s.typ("Dict", "List", "Sequence")
    return T('''
    def $fn(keys: Sequence[str], eval_fraction: float = $frac, salt: str = "$salt") -> Dict[str, List[str]]:
        """Deterministic train/eval split by hashing keys, stable across runs and machines."""
        out: Dict[str, List[str]] = {"train": [], "eval": []}
        for key in keys:
            digest = hashlib.sha256((salt + key).encode("utf-8")).digest()
            bucket = int.from_bytes(digest[:4], "big") / 2**32
            out["eval" if bucket < eval_fraction else "train"].append(key)
        return out
    ''', fn=s.fresh("split_by_hash", "hash_split", "assign_splits"),
             frac=s.pick(["0.01", "0.05", "0.1"]), salt=s.pick(["v1", "split-2021", "eval"]))


def f_csv(s: Src) -> str:
    s.imp("import csv", "import statistics")
    s.typ("Dict", "List")
    return T('''
    def $fn(path: str, column: str = "$col") -> Dict[str, float]:
        """Summary statistics of one numeric column of a CSV file."""
        values: List[float] = []
        with open(path, newline="") as f:
            for row in csv.DictReader(f):
                raw = row.get(column, "").strip()
                if raw:
                    values.append(float(raw))
        if not values:
            return {"count": 0}
        return {
            "count": len(values),
            "mean": statistics.fmean(values),
            "median": statistics.median(values),
            "stdev": statistics.stdev(values) if len(values) > 1 else 0.0,
            "min": min(values),
            "max": max(values),
        }
    ''', fn=s.fresh("summarize_csv", "column_stats", "csv_summary"),
             col=s.pick(["loss", "accuracy", "latency_ms", "reward", "tokens_per_sec"]))


def f_glob(s: Src) -> str:
    s.imp("import fnmatch", "import os")
    s.typ("List", "Sequence")
    return T('''
    def $fn(root: str, patterns: Sequence[str] = ($pat,), exclude: Sequence[str] = ($exc,)) -> List[str]:
        """Files under `root` matching any pattern and no exclude, sorted for determinism."""
        found = []
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            for name in filenames:
                if not any(fnmatch.fnmatch(name, p) for p in patterns):
                    continue
                full = os.path.join(dirpath, name)
                if any(fnmatch.fnmatch(full, e) for e in exclude):
                    continue
                found.append(full)
        return sorted(found)
    ''', fn=s.fresh("find_files", "list_shards", "glob_recursive"),
             pat=s.pick(['"*.tfrecord"', '"*.npz", "*.npy"', '"*.json"', '"*.parquet"']),
             exc=s.pick(['"*/tmp/*"', '"*/.cache/*"', '"*_backup*"']))


def f_timer(s: Src) -> str:
    s.imp("import contextlib", "import time")
    s.typ("Dict", "Iterator", "List")
    cls = s.fresh("Timer", "StepTimer", "Stopwatch")
    return T('''
    class $cls:
        """Accumulates wall time per named section; cheap enough for every step."""

        def __init__(self) -> None:
            self.totals: Dict[str, float] = {}
            self.counts: Dict[str, int] = {}

        @contextlib.contextmanager
        def section(self, name: str) -> Iterator[None]:
            start = time.perf_counter()
            try:
                yield
            finally:
                elapsed = time.perf_counter() - start
                self.totals[name] = self.totals.get(name, 0.0) + elapsed
                self.counts[name] = self.counts.get(name, 0) + 1

        def summary(self) -> List[str]:
            rows = []
            for name in sorted(self.totals, key=self.totals.get, reverse=True):
                mean_ms = 1000 * self.totals[name] / self.counts[name]
                rows.append(f"{name:<24} {self.totals[name]:9.3f}s {mean_ms:9.2f}ms x{self.counts[name]}")
            return rows
    ''', cls=cls)


def f_json_formatter(s: Src) -> str:
    s.imp("import json", "import logging", "import time")
    cls = s.fresh("JsonFormatter", "StructuredFormatter")
    return T('''
    class $cls(logging.Formatter):
        """One JSON object per record, for log aggregation."""

        def format(self, record: logging.LogRecord) -> str:
            payload = {
                "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)),
                "level": record.levelname.lower(),
                "logger": record.name,
                "msg": record.getMessage(),
            }
            if record.exc_info:
                payload["exc"] = self.formatException(record.exc_info)
            for key in ("step", "epoch", "$extra"):
                if hasattr(record, key):
                    payload[key] = getattr(record, key)
            return json.dumps(payload, default=str)


    def $fn(level: str = "$lvl", json_output: bool = False) -> logging.Logger:
        """Configures the root logger once; later calls only change the level."""
        root = logging.getLogger()
        root.setLevel(level.upper())
        if not root.handlers:
            handler = logging.StreamHandler()
            if json_output:
                handler.setFormatter($cls())
            else:
                handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
            root.addHandler(handler)
        return root
    ''', cls=cls, fn=s.fresh("setup_logging", "configure_logging", "init_logging"),
             extra=s.pick(["host", "run_id", "worker"]), lvl=s.pick(["info", "warning", "debug"]))


def f_metric_writer(s: Src) -> str:
    s.imp("import json", "import os", "import time")
    s.typ("Dict", "Optional")
    cls = s.fresh("MetricWriter", "ScalarLogger", "CsvWriter")
    return T('''
    class $cls:
        """Appends scalar metrics to a JSON-lines file; flushes every `flush_every` writes."""

        def __init__(self, logdir: str, flush_every: int = $fe) -> None:
            os.makedirs(logdir, exist_ok=True)
            self._path = os.path.join(logdir, "$fname")
            self._file = open(self._path, "a", encoding="utf-8")
            self._flush_every = flush_every
            self._pending = 0

        def write_scalars(self, step: int, scalars: Dict[str, float], prefix: Optional[str] = None) -> None:
            row = {"step": int(step), "time": time.time()}
            for key, value in scalars.items():
                row[f"{prefix}/{key}" if prefix else key] = float(value)
            self._file.write(json.dumps(row) + "\\n")
            self._pending += 1
            if self._pending >= self._flush_every:
                self.flush()

        def flush(self) -> None:
            self._file.flush()
            self._pending = 0

        def close(self) -> None:
            self.flush()
            self._file.close()

        def __enter__(self) -> "$cls":
            return self

        def __exit__(self, *exc: object) -> None:
            self.close()
    ''', cls=cls, fe=s.pick(["1", "10", "50"]), fname=s.pick(["metrics.jsonl", "scalars.jsonl"]))


def f_retry(s: Src) -> str:
    s.imp("import functools", "import random", "import time")
    s.typ("Callable", "Tuple", "Type")
    return T('''
    def $fn(attempts: int = $n, base_delay: float = $d, exceptions: Tuple[Type[BaseException], ...] = ($exc,)) -> Callable:
        """Retries a flaky call (network storage, preemption) with jittered exponential backoff."""

        def decorator(func: Callable) -> Callable:
            @functools.wraps(func)
            def wrapper(*args, **kwargs):
                for attempt in range(attempts):
                    try:
                        return func(*args, **kwargs)
                    except exceptions:
                        if attempt == attempts - 1:
                            raise
                        time.sleep(base_delay * 2**attempt * (0.5 + random.random()))
                return None

            return wrapper

        return decorator
    ''', fn=s.fresh("retry", "with_retries", "backoff"), n=s.pick(["3", "5", "8"]),
             d=s.pick(["0.5", "1.0", "2.0"]), exc=s.pick(["OSError", "OSError, TimeoutError", "ConnectionError"]))


def f_table(s: Src) -> str:
    s.typ("Any", "Dict", "List", "Sequence")
    return T('''
    def $fn(rows: Sequence[Dict[str, Any]], columns: Sequence[str] = (), floatfmt: str = "$ff") -> str:
        """Renders rows as a fixed-width text table (for logs and CLI output)."""
        if not rows:
            return "(no rows)"
        cols = list(columns) or list(rows[0])
        cells: List[List[str]] = [cols]
        for row in rows:
            cells.append([format(row.get(c, ""), floatfmt) if isinstance(row.get(c), float) else str(row.get(c, "")) for c in cols])
        widths = [max(len(r[i]) for r in cells) for i in range(len(cols))]
        lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths)) for r in cells]
        lines.insert(1, "  ".join("-" * w for w in widths))
        return "\\n".join(lines)
    ''', fn=s.fresh("format_table", "render_table", "tabulate_rows"), ff=s.pick([".4f", ".3g", ".2e"]))


def f_dataclass(s: Src) -> str:
    s.imp("import dataclasses")
    s.typ("Any", "Dict", "Optional", "Tuple")
    cls = s.fresh("DataConfig", "EvalSpec", "ExportOptions", "ShardSpec", "RunInfo", "SweepPoint")
    fields_ = s.rng.sample([
        ("name", "str", '"default"'), ("num_workers", "int", s.pick(["4", "8", "16"])),
        ("shuffle", "bool", "True"), ("buffer_size", "int", s.pick(["1024", "10_000"])),
        ("image_size", "Tuple[int, int]", "(224, 224)"), ("dtype", "str", '"float32"'),
        ("cache_dir", "Optional[str]", "None"), ("max_examples", "Optional[int]", "None"),
        ("tags", "Tuple[str, ...]", "()"), ("drop_remainder", "bool", "True"),
        ("prefetch", "int", s.pick(["2", "4"])), ("split", "str", '"train"'),
    ], k=s.rng.randint(4, 8))
    body = "\n".join(f"{n}: {t} = {v}" for n, t, v in fields_)
    checks = "\n".join(
        f'if self.{n} < 0:\n    raise ValueError(f"{n} must be >= 0, got {{self.{n}}}")'
        for n, t, _ in fields_ if t == "int") or "pass"
    return T('''
    @dataclasses.dataclass(frozen=$frozen)
    class $cls:
        """$doc"""

        $body

        def __post_init__(self) -> None:
            $checks

        @classmethod
        def from_dict(cls, raw: Dict[str, Any]) -> "$cls":
            known = {f.name for f in dataclasses.fields(cls)}
            unknown = sorted(set(raw) - known)
            if unknown:
                raise KeyError(f"unknown fields for $cls: {unknown}")
            return cls(**raw)

        def to_dict(self) -> Dict[str, Any]:
            return dataclasses.asdict(self)
    ''', cls=cls, frozen=s.pick(["True", "False"]), body=body, checks=checks,
             doc=s.pick(["Options read from the experiment config.", "Immutable description of one run.",
                         "Settings shared by the input pipeline and the evaluator."]))


def f_enum(s: Src) -> str:
    s.imp("import enum")
    cls = s.fresh("Split", "Mode", "Stage", "Precision")
    members = s.pick([["TRAIN", "EVAL", "TEST"], ["FP32", "BF16", "FP16"], ["FIT", "VALIDATE", "PREDICT"]])
    body = "\n".join(f'{m} = "{m.lower()}"' for m in members)
    return T('''
    class $cls(str, enum.Enum):
        """Closed set of values accepted on the command line."""

        $body

        @classmethod
        def parse(cls, value: "str | $cls") -> "$cls":
            if isinstance(value, cls):
                return value
            try:
                return cls(value.lower())
            except ValueError:
                choices = ", ".join(m.value for m in cls)
                raise ValueError(f"{value!r} is not one of: {choices}") from None
    ''', cls=cls, body=body)


def f_registry(s: Src) -> str:
    s.typ("Callable", "Dict", "TypeVar")
    name = s.fresh("_REGISTRY", "_BUILDERS", "_FACTORIES")
    return T('''
    $name: Dict[str, Callable] = {}


    def $reg(key: str) -> Callable:
        """Decorator registering a builder under `key`; duplicate keys are an error."""

        def decorator(fn: Callable) -> Callable:
            if key in $name:
                raise KeyError(f"{key!r} registered twice")
            $name[key] = fn
            return fn

        return decorator


    def $get(key: str) -> Callable:
        try:
            return $name[key]
        except KeyError:
            raise KeyError(f"unknown {key!r}; known: {sorted($name)}") from None
    ''', name=name, reg=s.fresh("register", "register_builder"), get=s.fresh("lookup", "get_builder"))


def f_state_machine(s: Src) -> str:
    s.typ("Dict", "List", "Tuple")
    cls = s.fresh("JobState", "RunTracker", "Lifecycle")
    return T('''
    class $cls:
        """Tracks a job through PENDING -> RUNNING -> (DONE | FAILED), rejecting bad moves."""

        _ALLOWED: Dict[str, Tuple[str, ...]] = {
            "PENDING": ("RUNNING", "FAILED"),
            "RUNNING": ("DONE", "FAILED", "PENDING"),
            "DONE": (),
            "FAILED": ("PENDING",),
        }

        def __init__(self) -> None:
            self.state = "PENDING"
            self.history: List[str] = [self.state]

        def move(self, new_state: str) -> None:
            if new_state not in self._ALLOWED[self.state]:
                raise RuntimeError(f"illegal transition {self.state} -> {new_state}")
            self.state = new_state
            self.history.append(new_state)

        @property
        def finished(self) -> bool:
            return self.state in ("DONE", "FAILED")
    ''', cls=cls)


def f_shuffle_buffer(s: Src) -> str:
    s.imp("import random")
    s.typ("Iterable", "Iterator", "TypeVar")
    if "_T = TypeVar(\"_T\")\n" not in s.blocks:
        s.blocks.insert(0, '_T = TypeVar("_T")\n')
    return T('''
    def $fn(items: Iterable[_T], buffer_size: int = $buf, seed: int = $seed) -> Iterator[_T]:
        """Approximate shuffle with a bounded buffer, like tf.data's shuffle."""
        rng = random.Random(seed)
        buffer = []
        for item in items:
            if len(buffer) < buffer_size:
                buffer.append(item)
                continue
            idx = rng.randrange(buffer_size)
            yield buffer[idx]
            buffer[idx] = item
        rng.shuffle(buffer)
        yield from buffer
    ''', fn=s.fresh("shuffle_buffer", "buffered_shuffle", "stream_shuffle"),
             buf=s.pick(["1000", "10_000", "4096"]), seed=s.pick(["0", "42", "1234"]))


# ---- fillers that use jax (but never optax) -----------------------------------------


def f_count_params(s: Src) -> str:
    s.imp("import jax", "import numpy as np")
    s.typ("Any", "Dict")
    return T('''
    def $fn(params: Any) -> Dict[str, int]:
        """Parameter counts per top-level module, plus the total."""
        counts: Dict[str, int] = {}
        for key, subtree in params.items():
            counts[key] = sum(int(np.prod(x.shape)) for x in jax.tree_util.tree_leaves(subtree))
        counts["total"] = sum(counts.values())
        return counts
    ''', fn=s.fresh("count_params", "param_counts", "num_parameters"))


def f_topk(s: Src) -> str:
    s.imp("import jax", "import jax.numpy as jnp")
    return T('''
    def $fn(logits: jnp.ndarray, labels: jnp.ndarray, k: int = $k) -> jnp.ndarray:
        """Fraction of examples whose label is among the top-k logits."""
        _, top = jax.lax.top_k(logits, k)
        hits = jnp.any(top == labels[..., None], axis=-1)
        return jnp.mean(hits.astype(jnp.float32))
    ''', fn=s.fresh("topk_accuracy", "top_k_acc", "recall_at_k"), k=s.pick(["1", "5", "10"]))


def f_xent(s: Src) -> str:
    s.imp("import jax", "import jax.numpy as jnp")
    s.typ("Optional")
    return T('''
    def $fn(logits: jnp.ndarray, targets: jnp.ndarray, weights: Optional[jnp.ndarray] = None, z_loss: float = $z) -> jnp.ndarray:
        """Token cross-entropy with an optional z-loss that keeps logits from drifting."""
        log_z = jax.nn.logsumexp(logits, axis=-1)
        target_logits = jnp.take_along_axis(logits, targets[..., None], axis=-1)[..., 0]
        loss = log_z - target_logits + z_loss * jnp.square(log_z)
        if weights is None:
            return jnp.mean(loss)
        return jnp.sum(loss * weights) / jnp.maximum(jnp.sum(weights), 1.0)
    ''', fn=s.fresh("cross_entropy", "weighted_xent", "token_loss"), z=s.pick(["0.0", "1e-4"]))


def f_shard(s: Src) -> str:
    s.imp("import jax", "import numpy as np")
    s.typ("Any")
    return T('''
    def $fn(batch: Any) -> Any:
        """Reshapes host arrays to [local_devices, per_device, ...] for pmap."""
        n = jax.local_device_count()

        def _reshape(x: np.ndarray) -> np.ndarray:
            if x.shape[0] % n:
                raise ValueError(f"batch of {x.shape[0]} does not split over {n} devices")
            return x.reshape((n, -1) + x.shape[1:])

        return jax.tree_util.tree_map(_reshape, batch)
    ''', fn=s.fresh("shard", "shard_batch", "split_for_devices"))


def f_tree_norms(s: Src) -> str:
    s.imp("import jax", "import jax.numpy as jnp")
    s.typ("Any", "Dict")
    return T('''
    def $fn(tree: Any, prefix: str = "$pre") -> Dict[str, jnp.ndarray]:
        """L2 norm of every leaf, keyed by its path, for gradient/param summaries."""
        out = {}
        for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]:
            name = "/".join(str(getattr(p, "key", getattr(p, "idx", p))) for p in path)
            out[f"{prefix}/{name}"] = jnp.sqrt(jnp.sum(jnp.square(leaf.astype(jnp.float32))))
        return out
    ''', fn=s.fresh("leaf_norms", "tree_norms", "per_param_norm"), pre=s.pick(["grad_norm", "param_norm"]))


def f_ema(s: Src) -> str:
    s.imp("import jax")
    s.typ("Any")
    return T('''
    def $fn(ema_params: Any, new_params: Any, decay: float = $d) -> Any:
        """Polyak averaging of parameters, for evaluation with the EMA weights."""
        return jax.tree_util.tree_map(lambda e, p: decay * e + (1.0 - decay) * p, ema_params, new_params)
    ''', fn=s.fresh("update_ema", "ema_update", "polyak_average"), d=s.pick(["0.999", "0.9999", "0.99"]))


def f_rng_stream(s: Src) -> str:
    s.imp("import jax")
    cls = s.fresh("RngStream", "KeySequence", "PRNGSequence")
    return T('''
    class $cls:
        """Hands out fresh PRNG keys without threading `rng` through every call."""

        def __init__(self, seed: int = $seed) -> None:
            self._key = jax.random.PRNGKey(seed)

        def next(self) -> jax.Array:
            self._key, sub = jax.random.split(self._key)
            return sub

        def take(self, n: int) -> jax.Array:
            self._key, sub = jax.random.split(self._key)
            return jax.random.split(sub, n)
    ''', cls=cls, seed=s.pick(["0", "42", "17"]))


GENERIC = [f_normalize, f_pad_to_multiple, f_moving_average, f_chunked, f_table, f_retry,
           f_timer, f_registry, f_state_machine, f_enum, f_glob]
NUMPY = [f_normalize, f_pad_to_multiple, f_moving_average, f_confusion, f_windows, f_iou,
         f_one_hot, f_welford]
DATA = [f_jsonl, f_augment, f_vocab, f_pack, f_prefetch, f_split, f_csv, f_glob, f_chunked,
        f_shuffle_buffer, f_windows]
LOGGING = [f_timer, f_json_formatter, f_metric_writer, f_retry, f_table, f_moving_average]
DATACLASSES = [f_dataclass, f_enum, f_registry, f_state_machine, f_dataclass]
JAXF = [f_count_params, f_topk, f_xent, f_shard, f_tree_norms, f_ema, f_rng_stream]
# Fillers safe next to `from absl import logging` (none of these touch stdlib logging).
TRAIN_FILL = JAXF + [f_normalize, f_moving_average, f_chunked, f_table, f_retry, f_timer,
                     f_confusion, f_one_hot, f_pack, f_augment]
STDLIB_LOGGING = [f_json_formatter]


# --------------------------------------------------------------------------------------
# Flax models (linen and nnx); shared by model files and training scripts.
# --------------------------------------------------------------------------------------


@dataclass
class Model:
    code: list[str]
    cls: str
    ctor: str  # expression building the top-level module
    x_key: str
    y_key: Optional[str]  # None for language models (targets are shifted inputs)
    shape: str  # dummy input shape for init
    dtype: str
    num_out: int
    bn: bool = False
    data: dict = field(default_factory=dict)


def _linen(s: Src) -> None:
    s.imp("import flax.linen as nn", "import jax", "import jax.numpy as jnp")
    s.typ("Any")


def m_transformer(s: Src) -> Model:
    _linen(s)
    s.typ("Optional")
    mlp, attn = s.fresh("MlpBlock", "FeedForward", "MLP"), s.fresh("SelfAttention", "CausalAttention", "MultiHeadAttention")
    block, top = s.fresh("TransformerBlock", "DecoderBlock", "EncoderBlock"), s.fresh("Transformer", "TransformerLM", "GPT", "Decoder")
    act = s.pick(["gelu", "relu", "silu"])
    dim, heads = s.pick([(256, 4), (512, 8), (768, 12), (1024, 16)])
    vocab, layers, maxlen = s.pick([32_000, 50_257, 8192, 32_128]), s.pick([4, 6, 8, 12]), s.pick([256, 512, 1024, 2048])
    prenorm = s.chance(0.7)
    code = [T('''
    class $mlp(nn.Module):
        """Position-wise feed-forward: Dense -> $act -> Dropout -> Dense."""

        hidden_dim: int
        dropout_rate: float = $drop
        dtype: Any = jnp.float32

        @nn.compact
        def __call__(self, x: jnp.ndarray, train: bool = False) -> jnp.ndarray:
            features = x.shape[-1]
            y = nn.Dense(self.hidden_dim, dtype=self.dtype, kernel_init=nn.initializers.xavier_uniform())(x)
            y = nn.$act(y)
            y = nn.Dropout(rate=self.dropout_rate, deterministic=not train)(y)
            return nn.Dense(features, dtype=self.dtype, kernel_init=nn.initializers.xavier_uniform())(y)
    ''', mlp=mlp, act=act, drop=s.pick(["0.0", "0.1"])), T('''
    class $attn(nn.Module):
        """Multi-head self-attention written out with einsum, causal by default."""

        num_heads: int
        dropout_rate: float = 0.0
        causal: bool = True

        @nn.compact
        def __call__(self, x: jnp.ndarray, train: bool = False, mask: Optional[jnp.ndarray] = None) -> jnp.ndarray:
            batch, length, features = x.shape
            head_dim = features // self.num_heads
            qkv = nn.DenseGeneral((3, self.num_heads, head_dim), name="qkv")(x)
            q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]
            logits = jnp.einsum("bqhd,bkhd->bhqk", q, k) / jnp.sqrt(head_dim).astype(x.dtype)
            if self.causal:
                causal_mask = jnp.tril(jnp.ones((length, length), dtype=bool))
                logits = jnp.where(causal_mask[None, None], logits, jnp.finfo(logits.dtype).min)
            if mask is not None:
                logits = jnp.where(mask[:, None, None, :], logits, jnp.finfo(logits.dtype).min)
            weights = jax.nn.softmax(logits, axis=-1)
            weights = nn.Dropout(self.dropout_rate, deterministic=not train)(weights)
            out = jnp.einsum("bhqk,bkhd->bqhd", weights, v)
            return nn.DenseGeneral(features, axis=(-2, -1), name="out")(out)
    ''', attn=attn)]
    if prenorm:
        body = f'''x = x + {attn}(self.num_heads, self.dropout_rate)(nn.LayerNorm()(x), train=train)
x = x + {mlp}(self.mlp_dim, self.dropout_rate)(nn.LayerNorm()(x), train=train)
return x'''
    else:
        body = f'''x = nn.LayerNorm()(x + {attn}(self.num_heads, self.dropout_rate)(x, train=train))
x = nn.LayerNorm()(x + {mlp}(self.mlp_dim, self.dropout_rate)(x, train=train))
return x'''
    code.append(T('''
    class $block(nn.Module):
        """$norm transformer block."""

        num_heads: int
        mlp_dim: int
        dropout_rate: float = 0.1

        @nn.compact
        def __call__(self, x: jnp.ndarray, train: bool = False) -> jnp.ndarray:
            $body
    ''', block=block, norm="Pre-LayerNorm" if prenorm else "Post-LayerNorm", body=body))
    code.append(T('''
    class $top(nn.Module):
        """Decoder-only language model: token + learned position embeddings, $layers blocks."""

        vocab_size: int = $vocab
        num_layers: int = $layers
        embed_dim: int = $dim
        num_heads: int = $heads
        max_len: int = $maxlen
        dropout_rate: float = $drop

        @nn.compact
        def __call__(self, tokens: jnp.ndarray, train: bool = False) -> jnp.ndarray:
            x = nn.Embed(self.vocab_size, self.embed_dim, name="embed")(tokens)
            pos = self.param("pos_embedding", nn.initializers.normal(stddev=0.02), (1, self.max_len, self.embed_dim))
            x = x + pos[:, : tokens.shape[1]]
            x = nn.Dropout(self.dropout_rate, deterministic=not train)(x)
            for i in range(self.num_layers):
                x = $block(self.num_heads, 4 * self.embed_dim, self.dropout_rate, name=f"block_{i}")(x, train=train)
            x = nn.LayerNorm(name="final_norm")(x)
            return nn.Dense(self.vocab_size, use_bias=False, name="lm_head")(x)
    ''', top=top, vocab=vocab, layers=layers, dim=dim, heads=heads, maxlen=maxlen, block=block,
          drop=s.pick(["0.0", "0.1"])))
    seq = min(maxlen, s.pick([128, 256, 512]))
    return Model(code, top, f"{top}()", "tokens", None, f"(1, {seq})", "jnp.int32", vocab,
                 data={"seq": seq, "vocab": vocab})


def m_cnn(s: Src) -> Model:
    _linen(s)
    s.typ("Sequence")
    top = s.fresh("CNN", "ConvNet", "SimpleCNN", "Classifier")
    nc, hw, ch = s.pick([(10, 32, 3), (10, 28, 1), (100, 32, 3), (200, 64, 3)])
    feats = s.pick(["(32, 64)", "(32, 64, 128)", "(64, 128, 256)"])
    return Model([T('''
    class $top(nn.Module):
        """Conv -> ReLU -> pool stacks, then a dense head."""

        num_classes: int = $nc
        features: Sequence[int] = $feats
        hidden: int = $hidden
        dropout_rate: float = $drop

        @nn.compact
        def __call__(self, x: jnp.ndarray, train: bool = False) -> jnp.ndarray:
            for i, feat in enumerate(self.features):
                x = nn.Conv(feat, kernel_size=(3, 3), padding="SAME", name=f"conv_{i}")(x)
                x = nn.relu(x)
                x = nn.avg_pool(x, window_shape=(2, 2), strides=(2, 2))
            x = x.reshape((x.shape[0], -1))
            x = nn.Dense(self.hidden)(x)
            x = nn.relu(x)
            x = nn.Dropout(rate=self.dropout_rate, deterministic=not train)(x)
            return nn.Dense(self.num_classes)(x)
    ''', top=top, nc=nc, feats=feats, hidden=s.pick([128, 256, 512]), drop=s.pick(["0.1", "0.25", "0.5"]))],
        top, f"{top}(num_classes={nc})", s.pick(["image", "images", "inputs"]), s.pick(["label", "labels"]),
        f"(1, {hw}, {hw}, {ch})", "jnp.float32", nc, data={"hw": hw, "ch": ch})


def m_resnet(s: Src) -> Model:
    _linen(s)
    s.imp("import functools")
    s.typ("Sequence", "Tuple")
    block, top = s.fresh("ResNetBlock", "BasicBlock", "ResidualBlock"), s.fresh("ResNet", "ResNet18", "WideResNet")
    nc = s.pick([10, 100, 1000])
    hw = 224 if nc == 1000 else 32
    return Model([T('''
    class $block(nn.Module):
        """Two 3x3 convs with BatchNorm and a projection shortcut when shapes change."""

        filters: int
        strides: Tuple[int, int] = (1, 1)

        @nn.compact
        def __call__(self, x: jnp.ndarray, train: bool = True) -> jnp.ndarray:
            norm = functools.partial(nn.BatchNorm, use_running_average=not train, momentum=$mom, epsilon=1e-5)
            residual = x
            y = nn.Conv(self.filters, (3, 3), self.strides, padding="SAME", use_bias=False)(x)
            y = norm()(y)
            y = nn.relu(y)
            y = nn.Conv(self.filters, (3, 3), padding="SAME", use_bias=False)(y)
            y = norm(scale_init=nn.initializers.zeros_init())(y)
            if residual.shape != y.shape:
                residual = nn.Conv(self.filters, (1, 1), self.strides, use_bias=False, name="proj")(residual)
                residual = norm(name="proj_norm")(residual)
            return nn.relu(residual + y)
    ''', block=block, mom=s.pick(["0.9", "0.99"])), T('''
    class $top(nn.Module):
        """ResNet v1 with BatchNorm; `train` switches batch statistics."""

        stage_sizes: Sequence[int] = $stages
        num_classes: int = $nc
        num_filters: int = $nf

        @nn.compact
        def __call__(self, x: jnp.ndarray, train: bool = True) -> jnp.ndarray:
            x = nn.Conv(self.num_filters, (7, 7), (2, 2), padding=[(3, 3), (3, 3)], use_bias=False, name="conv_init")(x)
            x = nn.BatchNorm(use_running_average=not train, momentum=0.9, name="bn_init")(x)
            x = nn.relu(x)
            x = nn.max_pool(x, (3, 3), strides=(2, 2), padding="SAME")
            for i, block_size in enumerate(self.stage_sizes):
                for j in range(block_size):
                    strides = (2, 2) if i > 0 and j == 0 else (1, 1)
                    x = $block(self.num_filters * 2**i, strides=strides)(x, train=train)
            x = jnp.mean(x, axis=(1, 2))
            return nn.Dense(self.num_classes, dtype=jnp.float32)(x)
    ''', top=top, block=block, nc=nc, stages=s.pick(["(2, 2, 2, 2)", "(3, 4, 6, 3)", "(1, 1, 1)"]),
          nf=s.pick([16, 32, 64]))],
        top, f"{top}(num_classes={nc})", s.pick(["image", "images"]), s.pick(["label", "labels"]),
        f"(1, {hw}, {hw}, 3)", "jnp.float32", nc, bn=True, data={"hw": hw, "ch": 3})


def m_mlp(s: Src) -> Model:
    _linen(s)
    s.typ("Sequence")
    top = s.fresh("MLPClassifier", "DenseNet", "MLP", "FeedForwardClassifier")
    nc, d = s.pick([(10, 784), (2, 128), (5, 64), (10, 3072)])
    return Model([T('''
    class $top(nn.Module):
        """Fully connected classifier; flattens its input."""

        hidden_sizes: Sequence[int] = $hs
        num_classes: int = $nc
        dropout_rate: float = $drop

        @nn.compact
        def __call__(self, x: jnp.ndarray, train: bool = False) -> jnp.ndarray:
            x = x.reshape((x.shape[0], -1))
            for i, size in enumerate(self.hidden_sizes):
                x = nn.Dense(size, name=f"dense_{i}")(x)
                x = nn.$act(x)
                x = nn.Dropout(self.dropout_rate, deterministic=not train)(x)
            return nn.Dense(self.num_classes, name="head")(x)
    ''', top=top, nc=nc, hs=s.pick(["(512, 512)", "(256, 128)", "(1024, 512, 256)"]),
          act=s.pick(["relu", "gelu", "tanh"]), drop=s.pick(["0.0", "0.1", "0.2"]))],
        top, f"{top}(num_classes={nc})", "inputs", s.pick(["labels", "targets"]), f"(1, {d})",
        "jnp.float32", nc, data={"d": d})


def m_nnx(s: Src) -> Model:
    s.imp("from flax import nnx", "import jax", "import jax.numpy as jnp")
    top = s.fresh("MLP", "DotReluDot", "NnxClassifier", "CNN")
    nc, d = s.pick([(10, 784), (10, 3072), (2, 256)])
    dmid = s.pick([256, 512, 1024])
    return Model([T('''
    class $top(nnx.Module):
        """Linear -> BatchNorm -> Dropout -> gelu -> Linear, in nnx style."""

        def __init__(self, din: int, dmid: int, dout: int, *, rngs: nnx.Rngs) -> None:
            self.linear1 = nnx.Linear(din, dmid, rngs=rngs)
            self.bn = nnx.BatchNorm(dmid, rngs=rngs)
            self.dropout = nnx.Dropout($drop, rngs=rngs)
            self.linear2 = nnx.Linear(dmid, dout, rngs=rngs)

        def __call__(self, x: jax.Array) -> jax.Array:
            x = x.reshape((x.shape[0], -1))
            x = nnx.gelu(self.dropout(self.bn(self.linear1(x))))
            return self.linear2(x)
    ''', top=top, drop=s.pick(["0.1", "0.2", "0.5"]))],
        top, f"{top}({d}, {dmid}, {nc}, rngs=nnx.Rngs({s.pick([0, 42])}))", s.pick(["image", "inputs"]),
        s.pick(["label", "labels"]), f"(1, {d})", "jnp.float32", nc, data={"d": d})


LINEN_MODELS = [m_transformer, m_cnn, m_resnet, m_mlp]


def model_extras(s: Src) -> str:
    """A stand-alone linen module (for model files and to vary training scripts)."""
    return s.rng.choice(LINEN_MODELS)(s).code[0]


REPEATABLE = [f_dataclass, model_extras]  # their output varies enough to appear twice in a file
ALL_FILLERS = list(dict.fromkeys(GENERIC + NUMPY + DATA + LOGGING + DATACLASSES + JAXF))


# --------------------------------------------------------------------------------------
# Training code: configs, schedules, optimizers, steps, checkpoints
# --------------------------------------------------------------------------------------

# role -> (attribute names seen in real configs, default values, type)
ROLES: dict[str, tuple[list[str], list[str], str]] = {
    "lr": (["learning_rate", "lr", "base_lr", "peak_lr"], ["1e-3", "3e-4", "1e-4", "5e-4", "2e-5", "6e-4"], "float"),
    "wd": (["weight_decay", "wd", "weight_decay_rate"], ["0.0", "1e-4", "0.01", "0.05", "0.1"], "float"),
    "warmup": (["warmup_steps", "num_warmup_steps", "warmup"], ["500", "1000", "2000", "5000", "10_000"], "int"),
    "steps": (["num_train_steps", "total_steps", "max_steps", "train_steps"], ["10_000", "50_000", "100_000", "250_000"], "int"),
    "clip": (["grad_clip_norm", "max_grad_norm", "clip_norm", "gradient_clip"], ["1.0", "0.5", "5.0", "10.0"], "float"),
    "b1": (["b1", "adam_b1", "beta1"], ["0.9"], "float"),
    "b2": (["b2", "adam_b2", "beta2"], ["0.95", "0.98", "0.999"], "float"),
    "bs": (["batch_size", "global_batch_size", "per_device_batch_size"], ["32", "64", "128", "256", "512"], "int"),
    "seed": (["seed", "rng_seed"], ["0", "42", "1", "17"], "int"),
    "log_every": (["log_every_steps", "log_every", "log_interval"], ["50", "100", "200", "500"], "int"),
    "ckpt_every": (["checkpoint_every_steps", "save_every", "ckpt_every"], ["1000", "5000", "10_000"], "int"),
    "accum": (["grad_accum_steps", "accum_steps", "gradient_accumulation_steps"], ["2", "4", "8"], "int"),
    "smoothing": (["label_smoothing"], ["0.0", "0.1"], "float"),
    "momentum": (["momentum"], ["0.9", "0.95"], "float"),
    "workdir": (["workdir", "output_dir", "ckpt_dir"], ['"/tmp/train"', '"./runs/default"', '"/tmp/ckpts"'], "str"),
    "optimizer": (["optimizer", "optimizer_name", "opt"], ['"adamw"', '"adam"', '"lamb"', '"sgd"'], "str"),
}
HELP = {"lr": "Peak learning rate.", "wd": "Decoupled weight decay.", "warmup": "Linear warmup steps.",
        "steps": "Total optimizer steps.", "clip": "Global gradient-norm clip.", "b1": "Adam beta1.",
        "b2": "Adam beta2.", "bs": "Global batch size.", "seed": "Random seed.",
        "log_every": "Steps between log lines.", "ckpt_every": "Steps between checkpoints.",
        "accum": "Micro-batches per optimizer step.", "smoothing": "Label smoothing.",
        "momentum": "SGD momentum.", "workdir": "Where checkpoints and logs go.",
        "optimizer": "Optimizer name."}


class Train(Src):
    """A training file: config style, names of config fields, and how the step is written."""

    def __init__(self, rng: random.Random, project: str) -> None:
        super().__init__(rng, project)
        self.ox = "optax" if self.chance(0.94) else self.pick(["optx", "ox"])
        self.imp("import optax" if self.ox == "optax" else f"import optax as {self.ox}")
        self.style = self.rng.choices(["mlc_flags", "mlc_inline", "absl", "argparse", "dataclass"],
                                      weights=[25, 15, 20, 25, 15])[0]
        self.cfg = {"mlc_flags": "config", "mlc_inline": "config", "absl": "FLAGS", "argparse": "args",
                    "dataclass": self.pick(["cfg", "hparams", "config"])}[self.style]
        self.names = {r: self.pick(v[0]) for r, v in ROLES.items()}
        self.vals = {r: self.pick(v[1]) for r, v in ROLES.items()}
        self.used_roles: list[str] = []
        if self.style in ("mlc_flags", "mlc_inline", "absl"):
            self.imp("from absl import logging")
            self.stdlib_logging = False
            self.log = "logging.info"
        elif self.chance(0.7):
            self.imp("import logging")
            self.log = "logger.info"
            self.add('logger = logging.getLogger(__name__)\n')
        else:
            self.log = "print"
        self.axis = "batch" if self.chance(0.9) else self.pick(["devices", "data"])
        self.hyper: Optional[str] = None  # where the loop reads inject_hyperparams' learning rate
        self.init_fn = ""  # name of the create-train-state function, once written

    def e(self, role: str) -> str:
        """Config expression for a role (`config.learning_rate`); remembers it is used."""
        if role not in self.used_roles:
            self.used_roles.append(role)
        return f"{self.cfg}.{self.names[role]}"

    @property
    def param(self) -> str:
        """Parameter declaring the config object in a signature ('' for global FLAGS)."""
        return {"mlc_flags": "config: ml_collections.ConfigDict", "mlc_inline": "config: ml_collections.ConfigDict",
                "absl": "", "argparse": "args: argparse.Namespace", "dataclass": f"{self.cfg}: TrainConfig"}[self.style]

    @property
    def arg(self) -> str:
        return "" if self.style == "absl" else self.cfg

    def logline(self, fmt: str, *args: str) -> str:
        if self.log == "print":
            return f'print({fmt!r} % ({", ".join(args)}{"," if len(args) == 1 else ""}))' if args else f"print({fmt!r})"
        return f"{self.log}({', '.join([repr(fmt), *args])})"


def config_block(c: Train) -> str:
    """Defines the config for the roles used so far, in the file's config style."""
    roles = c.used_roles + [r for r in ("seed", "workdir", "bs") if r not in c.used_roles]
    c.rng.shuffle(roles)
    if c.style == "mlc_flags":
        c.imp("from ml_collections import config_flags", "import ml_collections")
        return T('''
        _CONFIG = config_flags.DEFINE_config_file("config", None, "Training configuration.", lock_config=True)
        _WORKDIR = flags.DEFINE_string("workdir", None, "Directory for checkpoints and logs.")
        ''')
    if c.style == "mlc_inline":
        c.imp("import ml_collections")
        body = "\n".join(f"config.{c.names[r]} = {c.vals[r]}" for r in roles)
        return T('''
        def get_config() -> ml_collections.ConfigDict:
            """Default hyperparameters; override with --config.<field>=value."""
            config = ml_collections.ConfigDict()
            $body
            return config
        ''', body=body)
    if c.style == "absl":
        kind = {"float": "float", "int": "integer", "str": "string"}
        body = "\n".join(f'flags.DEFINE_{kind[ROLES[r][2]]}("{c.names[r]}", {c.vals[r]}, "{HELP[r]}")' for r in roles)
        return body + "\n\nFLAGS = flags.FLAGS\n"
    if c.style == "argparse":
        c.imp("import argparse")
        c.typ("Optional", "Sequence")
        hy = c.chance(0.5)
        body = "\n".join(
            f'parser.add_argument("--{c.names[r].replace("_", "-") if hy else c.names[r]}", '
            f'type={ROLES[r][2]}, default={c.vals[r]}, help="{HELP[r]}")' for r in roles)
        return T('''
        def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
            parser = argparse.ArgumentParser(description="$desc")
            $body
            return parser.parse_args(argv)
        ''', desc=c.pick(["Train a model.", "Training entry point.", "Fine-tune from a checkpoint."]), body=body)
    c.imp("import dataclasses")
    body = "\n".join(f"{c.names[r]}: {ROLES[r][2]} = {c.vals[r]}" for r in roles)
    return T('''
    @dataclasses.dataclass
    class TrainConfig:
        """Hyperparameters; one instance per run, logged with the results."""

        $body
    ''', body=body)


def schedule(c: Train, E: Callable[[str], str]) -> tuple[str, str, bool]:
    """Returns (code, expression for the LR schedule, has_warmup)."""
    ox = c.ox
    kind = c.rng.choices(["wcd", "join", "const", "piecewise", "exp", "rsqrt"], weights=[40, 20, 15, 8, 7, 10])[0]
    lr, warm, total = E("lr"), E("warmup"), E("steps")
    if kind == "wcd":
        decay = total
        if c.chance(0.1):
            decay = f"{total} - {warm}"
            c.patterns.append("bug:wcd_decay_steps_minus_warmup")
        return (T('''
        schedule = $ox.warmup_cosine_decay_schedule(
            init_value=0.0,
            peak_value=$lr,
            warmup_steps=$warm,
            decay_steps=$decay,
            end_value=$end,
        )
        ''', ox=ox, lr=lr, warm=warm, decay=decay, end=c.pick(["0.0", f"{lr} * 0.1", "1e-6"])), "schedule", True)
    if kind == "join":
        return (T('''
        warmup_fn = $ox.linear_schedule(init_value=0.0, end_value=$lr, transition_steps=$warm)
        decay_fn = $ox.cosine_decay_schedule(init_value=$lr, decay_steps=max($total - $warm, 1))
        schedule = $ox.join_schedules(schedules=[warmup_fn, decay_fn], boundaries=[$warm])
        ''', ox=ox, lr=lr, warm=warm, total=total), "schedule", True)
    if kind == "const":
        return "", lr, False
    if kind == "piecewise":
        return (T('''
        boundaries = {int($total * 0.5): 0.1, int($total * 0.75): 0.1}
        schedule = $ox.piecewise_constant_schedule(init_value=$lr, boundaries_and_scales=boundaries)
        ''', ox=ox, lr=lr, total=total), "schedule", False)
    if kind == "exp":
        return (T('''
        schedule = $ox.exponential_decay(
            init_value=$lr, transition_steps=$n, decay_rate=$r, transition_begin=$warm, staircase=True
        )
        ''', ox=ox, lr=lr, warm=warm, n=c.pick(["1000", "5000", "10_000"]), r=c.pick(["0.97", "0.9", "0.5"])),
            "schedule", False)
    c.imp("import jax.numpy as jnp")
    return (T('''
    def schedule(step):
        """Linear warmup then inverse-square-root decay (the original Transformer recipe)."""
        step = jnp.maximum(step, 1).astype(jnp.float32)
        warmup = jnp.asarray($warm, jnp.float32)
        return $lr * jnp.minimum(step / warmup, jnp.sqrt(warmup / step))
    ''', lr=lr, warm=warm), "schedule", True)


def decay_mask(c: Train) -> str:
    c.imp("from flax import traverse_util")
    name = c.fresh("decay_mask_fn", "weight_decay_mask", "_decay_mask")
    c.add(T('''
    def $name(params):
        """Decay kernels only: not biases, LayerNorm scales or embeddings."""
        flat = traverse_util.flatten_dict(params)
        mask = {path: path[-1] not in ("bias", "scale", "embedding") for path in flat}
        return traverse_util.unflatten_dict(mask)
    ''', name=name))
    return name


def optimizer_fn(c: Train, style: Optional[str] = None) -> tuple[str, str]:
    """Adds one optimizer-building function; returns (its name, a call expression)."""
    ox = c.ox
    mode = "cfg" if c.chance(0.7) else "args"
    taken: list[str] = []

    def E(role: str) -> str:
        if mode == "cfg":
            return c.e(role)
        if role not in taken:
            taken.append(role)
        return c.names[role]

    fn = c.fresh("create_optimizer", "make_optimizer", "build_tx", "get_optimizer", "make_tx", "create_tx")
    style = style or c.rng.choices(
        ["clip_adamw", "append", "inject", "multisteps", "masked", "sgd", "by_name", "handbuilt", "neg_sched", "positional"],
        weights=[30, 18, 10, 8, 8, 8, 6, 8, 2, 2])[0]
    c.patterns.append(f"opt:{style}")
    sched, lr, warm = schedule(c, E)
    wd, clip = E("wd"), E("clip")
    doc = ""
    if style == "clip_adamw":
        betas = f"\n    b1={E('b1')},\n    b2={E('b2')}," if c.chance(0.5) else ""
        mask = f"\n    mask={decay_mask(c)}," if c.chance(0.2) else ""
        if c.chance(0.25):  # adam + add_decayed_weights, sometimes in the wrong order
            parts = [f"{ox}.clip_by_global_norm({clip})", f"{ox}.add_decayed_weights({wd})", f"{ox}.adam(learning_rate={lr})"]
            if c.chance(0.4):
                parts[1], parts[2] = parts[2], parts[1]
                c.patterns.append("bug:decay_after_adam")
        else:
            parts = [f"{ox}.clip_by_global_norm({clip})",
                     f"{ox}.adamw(\n    learning_rate={lr},{betas}\n    weight_decay={wd},{mask}\n)"]
            if c.chance(0.12):
                parts.reverse()
                c.patterns.append("bug:clip_after_adamw")
        body = f"tx = {ox}.chain(\n" + textwrap.indent(",\n".join(parts) + ",", "    ") + "\n)\nreturn tx"
        doc = "Clip the global gradient norm, then AdamW on a warmup schedule."
    elif style == "append":
        opt = E("optimizer")
        clip_line = f"if {clip}:\n    transforms.append({ox}.clip_by_global_norm({clip}))"
        clip_last = c.chance(0.15)
        lines = [] if clip_last else [clip_line]
        if clip_last:
            c.patterns.append("bug:clip_appended_last")
        lines.append(T('''
        if $opt in ("adam", "adamw"):
            transforms.append($ox.scale_by_adam(b1=$b1, b2=$b2))
        elif $opt == "sgd":
            transforms.append($ox.trace(decay=0.9, nesterov=True))
        else:
            raise ValueError(f"Unknown optimizer: {$opt}")
        if $wd > 0:
            transforms.append($ox.add_decayed_weights($wd))
        ''', opt=opt, ox=ox, b1=E("b1"), b2=E("b2"), wd=wd).rstrip())
        if c.chance(0.5):
            lines.append(f"transforms.append({ox}.scale_by_learning_rate({lr}))")
        elif lr == "schedule":
            lines.append(f"transforms.append({ox}.scale_by_schedule({lr}))\ntransforms.append({ox}.scale(-1.0))")
        else:
            lines.append(f"transforms.append({ox}.scale(-{lr}))")
        if clip_last:
            lines.append(clip_line)
        body = "transforms = []\n" + "\n".join(lines) + f"\nreturn {ox}.chain(*transforms)"
        doc = "Builds the optimizer from the config, one optional piece at a time."
    elif style == "inject":
        if c.chance(0.5):
            body = f"tx = {ox}.inject_hyperparams({ox}.adamw)(learning_rate={lr}, weight_decay={wd})\nreturn tx"
            c.hyper = "opt_state.hyperparams"
        else:
            body = (f"tx = {ox}.chain(\n    {ox}.clip_by_global_norm({clip}),\n"
                    f"    {ox}.inject_hyperparams({ox}.adam)(learning_rate={lr}),\n)\nreturn tx")
            c.hyper = "opt_state[1].hyperparams"
            if c.chance(0.25):
                c.hyper = "opt_state.hyperparams"
                c.patterns.append("bug:hyperparams_on_chain_state")
        doc = "inject_hyperparams keeps the learning rate in the optimizer state, for logging."
    elif style == "multisteps":
        body = T('''
        base = $ox.chain(
            $ox.clip_by_global_norm($clip),
            $ox.adamw(learning_rate=$lr, weight_decay=$wd),
        )
        return $ox.MultiSteps(base, every_k_schedule=$k)
        ''', ox=ox, clip=clip, lr=lr, wd=wd, k=E("accum"))
        doc = "AdamW with gradient accumulation; the schedule counts optimizer steps."
    elif style == "masked":
        c.imp("from flax import traverse_util")
        v = c.rng.randrange(3)
        if v == 0:
            mask = decay_mask(c)
            body = T('''
            return $ox.chain(
                $ox.clip_by_global_norm($clip),
                $ox.scale_by_adam(),
                $ox.masked($ox.add_decayed_weights($wd), $mask),
                $ox.scale_by_learning_rate($lr),
            )
            ''', ox=ox, clip=clip, wd=wd, mask=mask, lr=lr)
        elif v == 1:
            prefix = c.pick(["backbone", "encoder", "embed"])
            body = T('''
            def label_fn(params):
                return traverse_util.path_aware_map(
                    lambda path, _: "frozen" if path[0].startswith("$prefix") else "trainable", params
                )

            return $ox.multi_transform(
                {"trainable": $ox.adamw($lr, weight_decay=$wd), "frozen": $ox.set_to_zero()},
                label_fn,
            )
            ''', ox=ox, lr=lr, wd=wd, prefix=prefix)
        else:
            body = T('''
            def trainable(params):
                return traverse_util.path_aware_map(lambda path, _: "head" in path[0], params)

            return $ox.masked($ox.adam($lr), trainable)
            ''', ox=ox, lr=lr)
            c.patterns.append("bug:masked_complement_unhandled")
        doc = "Only some parameters are decayed or trained; the rest are masked out."
    elif style == "sgd":
        mom = E("momentum")
        core = f"{ox}.sgd(learning_rate={lr}, momentum={mom}, nesterov={c.pick(['True', 'False'])})"
        body = (f"return {ox}.chain({ox}.add_decayed_weights({wd}), {core})" if c.chance(0.5) else f"return {core}")
        doc = "SGD with momentum, the classic recipe for ResNets."
    elif style == "by_name":
        opt = E("optimizer")
        body = T('''
        opt_cls = getattr($ox, $opt)
        kwargs = {"learning_rate": $lr}
        if $opt in ("adamw", "lamb", "lion"):
            kwargs["weight_decay"] = $wd
        tx = opt_cls(**kwargs)
        if $clip:
            tx = $ox.chain($ox.clip_by_global_norm($clip), tx)
        return tx
        ''', ox=ox, opt=opt, lr=lr, wd=wd, clip=clip)
        doc = "The optimizer is named by a config string, so its order is only known at run time."
    elif style == "handbuilt":
        v = c.rng.randrange(3)
        if v == 0:
            body = T('''
            # StableAdamW-style: clip the *normalized* update, then step.
            return $ox.chain(
                $ox.scale_by_adam(b1=$b1, b2=$b2, eps=1e-8),
                $ox.clip_by_block_rms(1.0),
                $ox.add_decayed_weights($wd),
                $ox.scale_by_learning_rate($lr),
            )
            ''', ox=ox, b1=E("b1"), b2=E("b2"), wd=wd, lr=lr)
        elif v == 1:
            body = T('''
            # Decoupled decay: added while the update is still positive, negated last.
            return $ox.chain(
                $ox.clip_by_global_norm($clip),
                $ox.scale_by_adam(),
                $ox.scale_by_schedule(lambda count: $lr),
                $ox.add_decayed_weights($wd),
                $ox.scale(-1.0),
            )
            ''', ox=ox, clip=clip, lr=E("lr"), wd=wd)
        else:
            body = T('''
            neg_schedule = $ox.cosine_decay_schedule(-$lr, decay_steps=$total)
            return $ox.chain($ox.clip_by_global_norm($clip), $ox.scale_by_adam(), $ox.scale_by_schedule(neg_schedule))
            ''', ox=ox, lr=E("lr"), total=E("steps"), clip=clip)
        doc = "Hand-built chain from scale_by_* blocks."
    elif style == "neg_sched":
        body = T('''
        neg_schedule = $ox.cosine_decay_schedule(-$lr, decay_steps=$total)
        return $ox.adam(learning_rate=neg_schedule)
        ''', ox=ox, lr=E("lr"), total=E("steps"))
        c.patterns.append("bug:negative_schedule_to_alias")
        doc = "Adam with cosine decay."
    else:
        body = f"return {ox}.adamw({lr}, {wd})"
        c.patterns.append("bug:adamw_positional_weight_decay")
        doc = "AdamW."
    body = (sched + body) if sched else body
    if mode == "cfg":
        sig, call = c.param, f"{fn}({c.arg})"
    else:
        kinds = {"float": "float", "int": "int", "str": "str"}
        sig = ", ".join(f"{c.names[r]}: {kinds[ROLES[r][2]]}" for r in taken)
        call = f"{fn}(" + ", ".join(f"{c.names[r]}={c.e(r)}" for r in taken) + ")"
    c.add(T('''
    def $fn($sig) -> $ox.GradientTransformation:
        """$doc"""
        $body
    ''', fn=fn, sig=sig, ox=ox, doc=doc, body=body))
    return fn, call


def loss_lines(c: Train, m: Model, logits: str = "logits") -> str:
    ox = c.ox
    if m.y_key is None:
        return (f"{logits} = {logits}[:, :-1]\ntargets = batch[\"{m.x_key}\"][:, 1:]\n"
                f"loss = {ox}.softmax_cross_entropy_with_integer_labels({logits}, targets).mean()")
    if c.chance(0.35):
        return (f"targets = batch[\"{m.y_key}\"]\n"
                f"soft = {ox}.smooth_labels(jax.nn.one_hot(targets, {m.num_out}), {c.pick(['0.1', '0.05', '0.2'])})\n"
                f"loss = {ox}.softmax_cross_entropy({logits}, soft).mean()")
    return (f"targets = batch[\"{m.y_key}\"]\n"
            f"loss = {ox}.softmax_cross_entropy_with_integer_labels({logits}, targets).mean()")


def dataset_fn(c: Train, m: Model) -> str:
    c.imp("import numpy as np")
    c.typ("Dict", "Iterator")
    fn = c.fresh("make_dataset", "synthetic_batches", "train_iterator", "get_batches")
    if m.y_key is None:
        body = (f"tokens = rng.integers(0, {m.data['vocab']}, size=(batch_size, {m.data['seq']}), dtype=np.int32)\n"
                f'yield {{"{m.x_key}": tokens}}')
    else:
        shape = m.shape.replace("(1, ", "(batch_size, ")
        body = (f"inputs = rng.normal(size={shape}).astype(np.float32)\n"
                f"labels = rng.integers(0, {m.num_out}, size=(batch_size,))\n"
                f'yield {{"{m.x_key}": inputs, "{m.y_key}": labels}}')
    c.add(T('''
    def $fn(seed: int, batch_size: int, num_batches: int) -> Iterator[Dict[str, np.ndarray]]:
        """Synthetic batches with the real shapes; stands in for the tf.data pipeline."""
        rng = np.random.default_rng(seed)
        for _ in range(num_batches):
            $body
    ''', fn=fn, body=body))
    return fn


@dataclass
class Steps:
    train: str
    eval: Optional[str]
    state_style: bool  # TrainState (True) or params/opt_state (False)
    pmap: bool
    decorated: bool  # whether train_step already carries its jit/pmap


def state_steps(c: Train, m: Model, pmap: bool, decorate: bool = True) -> Steps:
    c.imp("from flax.training import train_state", "import jax", "import jax.numpy as jnp")
    c.typ("Any", "Dict")
    ts = "TrainState" if m.bn else "train_state.TrainState"
    if m.bn:
        c.add(T('''
        class TrainState(train_state.TrainState):
            """TrainState that also carries BatchNorm statistics."""

            batch_stats: Any = None
        '''))
    init_fn = c.fresh("create_train_state", "init_train_state", "make_state")
    c.add(T('''
    def $fn(rng: jax.Array, model: nn.Module, tx: $ox.GradientTransformation) -> $ts:
        """Initializes parameters and the optimizer state."""
        dummy = jnp.ones($shape, $dtype)
        variables = model.init({"params": rng, "dropout": rng}, dummy, train=False)
        return $ts.create(
            apply_fn=model.apply,
            params=variables["params"],
            tx=tx,$bs
        )
    ''', fn=init_fn, ox=c.ox, ts=ts, shape=m.shape, dtype=m.dtype,
             bs='\n        batch_stats=variables["batch_stats"],' if m.bn else ""))
    c.init_fn = init_fn
    step = c.fresh("train_step", "update_step", "step_fn")
    if pmap and decorate:
        c.imp("import functools")
        deco = f'@functools.partial(jax.pmap, axis_name="{c.axis}")'
    else:
        deco = "@jax.jit" if decorate else ""
    if m.bn:
        apply = (f'logits, new_model_state = state.apply_fn(\n    {{"params": params, "batch_stats": state.batch_stats}},\n'
                 f'    batch["{m.x_key}"],\n    train=True,\n    mutable=["batch_stats"],\n)')
        aux, upd = "(logits, targets, new_model_state)", 'state = state.apply_gradients(grads=grads, batch_stats=new_model_state["batch_stats"])'
    else:
        apply = (f'logits = state.apply_fn(\n    {{"params": params}}, batch["{m.x_key}"], train=True, rngs={{"dropout": dropout_rng}}\n)')
        aux, upd = "(logits, targets)", "state = state.apply_gradients(grads=grads)"
    pmean = ""
    if pmap:
        if c.chance(0.1):
            c.patterns.append("bug:pmap_without_pmean")
        else:
            c.imp("from jax import lax")
            pmean = c.pick([f'grads = lax.pmean(grads, axis_name="{c.axis}")', f'grads = lax.pmean(grads, "{c.axis}")'])
        c.patterns.append("pmap")
    c.add(T('''
    $deco
    def $step(state: $ts, batch: Dict[str, jnp.ndarray], dropout_rng: jax.Array):
        """One optimizer step: forward, backward, update."""
        dropout_rng = jax.random.fold_in(dropout_rng, state.step)

        def loss_fn(params):
            $apply
            $loss
            return loss, $aux

        grad_fn = jax.value_and_grad(loss_fn, has_aux=True)
        (loss, $aux), grads = grad_fn(state.params)
        $pmean
        $upd
        metrics = {"loss": loss, "accuracy": jnp.mean(jnp.argmax(logits, -1) == targets)}
        $pm2
        return state, metrics
    ''', deco=deco, step=step, ts=ts, apply=apply, loss=loss_lines(c, m), aux=aux, pmean=pmean, upd=upd,
             pm2=f'metrics = lax.pmean(metrics, axis_name="{c.axis}")' if pmean else ""))
    ev = None
    if c.chance(0.6):
        ev = c.fresh("eval_step", "evaluate_batch")
        variables = '{"params": state.params, "batch_stats": state.batch_stats}' if m.bn else '{"params": state.params}'
        c.add(T('''
        @jax.jit
        def $ev(state: $ts, batch: Dict[str, jnp.ndarray]) -> Dict[str, jnp.ndarray]:
            logits = state.apply_fn($vars, batch["$x"], train=False)
            $loss
            return {"loss": loss, "accuracy": jnp.mean(jnp.argmax(logits, -1) == targets)}
        ''', ev=ev, ts=ts, vars=variables, x=m.x_key, loss=loss_lines(c, m)))
    return Steps(step, ev, True, pmap, bool(deco))


def functional_steps(c: Train, m: Model, pmap: bool) -> Steps:
    c.imp("import jax", "import jax.numpy as jnp")
    fn = c.fresh("make_update_fn", "build_update", "make_train_step")
    pmean = ""
    if pmap:
        c.imp("import functools", "from jax import lax")
        if c.chance(0.1):
            c.patterns.append("bug:pmap_without_pmean")
        else:
            pmean = f'grads = lax.pmean(grads, axis_name="{c.axis}")'
        c.patterns.append("pmap")
    deco = f'@functools.partial(jax.pmap, axis_name="{c.axis}")' if pmap else "@jax.jit"
    with_params = c.chance(0.8)
    upd = "updates, opt_state = tx.update(grads, opt_state, params)" if with_params else "updates, opt_state = tx.update(grads, opt_state)"
    if not with_params:
        c.patterns.append("update_without_params")
    c.add(T('''
    def $fn(model: nn.Module, tx: $ox.GradientTransformation):
        """Returns a compiled update step closed over the model and the optimizer."""

        def loss_fn(params, batch, rng):
            logits = model.apply({"params": params}, batch["$x"], train=True, rngs={"dropout": rng})
            $loss
            return loss, (logits, targets)

        $deco
        def update(params, opt_state, batch, rng):
            (loss, (logits, targets)), grads = jax.value_and_grad(loss_fn, has_aux=True)(params, batch, rng)
            $pmean
            $upd
            params = $ox.apply_updates(params, updates)
            metrics = {"loss": loss, "accuracy": jnp.mean(jnp.argmax(logits, -1) == targets)}
            return params, opt_state, metrics

        return update
    ''', fn=fn, ox=c.ox, x=m.x_key, loss=loss_lines(c, m), deco=deco, pmean=pmean, upd=upd))
    return Steps(fn, None, False, pmap, True)


def ckpt_setup(c: Train, kind: str, state_expr: str) -> tuple[str, str, str]:
    """(setup/restore code, in-loop save code, after-loop code) for a checkpoint style."""
    wd = c.e("workdir") if c.style != "mlc_flags" else "_WORKDIR.value"
    every = c.e("ckpt_every")
    c.patterns.append(f"ckpt:{kind}")
    if kind == "orbax":
        c.imp("import orbax.checkpoint as ocp", "import os")
        return (T('''
        options = ocp.CheckpointManagerOptions(max_to_keep=$k, save_interval_steps=$every)
        manager = ocp.CheckpointManager(os.path.abspath(os.path.join($wd, "checkpoints")), options=options)
        start_step = 0
        if manager.latest_step() is not None:
            start_step = manager.latest_step()
            $state = manager.restore(start_step, args=ocp.args.StandardRestore($state))
            $restored
        ''', k=c.pick([1, 3, 5]), every=every, wd=wd, state=state_expr,
                  restored=c.logline("Restored checkpoint at step %d", "start_step")),
                f"manager.save(step + 1, args=ocp.args.StandardSave({state_expr}))",
                "manager.wait_until_finished()")
    if kind == "flax":
        c.imp("from flax.training import checkpoints")
        return (f"{state_expr} = checkpoints.restore_checkpoint({wd}, {state_expr})\nstart_step = 0",
                f"if (step + 1) % {every} == 0:\n    checkpoints.save_checkpoint({wd}, {state_expr}, step + 1, keep=3, overwrite=True)",
                "")
    if kind == "pickle":
        c.imp("import pickle", "import os")
        return ("start_step = 0", "", T('''
        with open(os.path.join($wd, "final_params.pkl"), "wb") as f:
            pickle.dump(jax.device_get($state), f)
        ''', wd=wd, state=state_expr))
    return "start_step = 0", "", ""


def train_loop(c: Train, m: Model, steps: Steps, opt_call: str, data_fn: str) -> str:
    """The `train_and_evaluate` function: setup, (restore), loop, log, (save)."""
    c.imp("import time")
    fn = c.fresh("train_and_evaluate", "train", "run_training", "fit")
    pre: list[str] = [f"rng = jax.random.PRNGKey({c.e('seed')})",
                      "rng, init_rng, dropout_rng = jax.random.split(rng, 3)",
                      f"model = {m.ctor}", f"tx = {opt_call}"]
    ck = c.rng.choices(["orbax", "flax", "pickle", "none"], weights=[45, 20, 15, 20])[0]
    hyper_base = "state.opt_state" if steps.state_style else "opt_state"
    if steps.state_style:
        pre.append(f"state = {c.init_fn}(init_rng, model, tx)")
        setup, save, after = ckpt_setup(c, ck, "state")
        call = "state, metrics = p_step(state, batch, dropout_rngs)" if steps.pmap else "state, metrics = p_step(state, batch, dropout_rng)"
        saved = "state"
    else:
        pre += [f"params = model.init(init_rng, jnp.ones({m.shape}, {m.dtype}), train=False)[\"params\"]",
                "opt_state = tx.init(params)"]
        saved = "{\"params\": params, \"opt_state\": opt_state}" if c.chance(0.85) else "params"
        if saved == "params" and ck in ("orbax", "flax"):
            c.patterns.append("bug:checkpoint_without_opt_state")
        setup, save, after = ckpt_setup(c, ck, "ckpt_state" if ck in ("orbax", "flax") else "params")
        if ck in ("orbax", "flax"):
            pre.append(f"ckpt_state = {saved}")
            setup += "\n" + ("params, opt_state = ckpt_state[\"params\"], ckpt_state[\"opt_state\"]" if saved != "params"
                             else "params = ckpt_state")
            save = save.replace("ckpt_state", saved)
        call = "params, opt_state, metrics = p_step(params, opt_state, batch, dropout_rngs)" if steps.pmap \
            else "params, opt_state, metrics = p_step(params, opt_state, batch, dropout_rng)"
        pre.append(f"step_fn = {steps.train}(model, tx)")
    pre.append(setup)
    if steps.pmap:
        c.imp("from flax import jax_utils")
        if steps.state_style:
            pre.append("state = jax_utils.replicate(state)")
        else:
            pre.append("params, opt_state = jax_utils.replicate(params), jax_utils.replicate(opt_state)")
        if steps.state_style and not steps.decorated:
            pre.append(f'p_step = jax.pmap({steps.train}, axis_name="{c.axis}", donate_argnums=(0,))')
        else:
            pre.append(f"p_step = {steps.train if steps.state_style else 'step_fn'}")
        pre.append("dropout_rngs = jax.random.split(dropout_rng, jax.local_device_count())")
        shard = c.fresh("shard_batch", "shard")
        c.add(T('''
        def $shard(batch):
            n = jax.local_device_count()
            return jax.tree_util.tree_map(lambda x: x.reshape((n, -1) + x.shape[1:]), batch)
        ''', shard=shard))
        shard_line = f"batch = {shard}(batch)"
        if save:
            unrep = "jax_utils.unreplicate(state)" if steps.state_style else "jax_utils.unreplicate(params)"
            save = save.replace(f"StandardSave(state)", f"StandardSave({unrep})") \
                .replace(", state, step + 1", f", {unrep}, step + 1")
    else:
        if steps.state_style:
            pre.append(f"p_step = {steps.train}" if steps.decorated else f"p_step = jax.jit({steps.train})")
        else:
            pre.append("p_step = step_fn")
        shard_line = ""
    log_every = c.e("log_every")
    hyper = getattr(c, "hyper", None)
    lr_line = ""
    if hyper:
        expr = hyper.replace("opt_state", hyper_base, 1)
        lr_line = f"summary[\"learning_rate\"] = float(jnp.mean({expr}[\"learning_rate\"]))"
        c.patterns.append(f"log_lr:{expr}")
    loop = T('''
    history = []
    tick = time.time()
    for step, batch in enumerate($data($seed, $bs, $total - start_step), start=start_step):
        $shard
        $call
        history.append(metrics)
        if (step + 1) % $log_every == 0:
            summary = jax.tree_util.tree_map(lambda *xs: float(np.mean(np.stack(xs))), *history)
            $lr_line
            $logl
            history, tick = [], time.time()
        $save
    $after
    ''', data=data_fn, seed=c.e("seed"), bs=c.e("bs"), total=c.e("steps"), shard=shard_line, call=call,
             log_every=log_every, lr_line=lr_line, save=save, after=after,
             logl=c.logline("step %d: %s (%.2f steps/s)", "step + 1", "summary", f"{log_every} / (time.time() - tick)"))
    ret = "state" if steps.state_style else "params"
    return T('''
    def $fn($sig):
        """Trains $model and writes checkpoints and metrics under the work directory."""
        $pre
        $loop
        return $ret
    ''', fn=fn, sig=c.param, model=m.cls, pre="\n".join(p for p in pre if p), loop=loop, ret=ret), fn


def entry_point(c: Train, train_fn: str) -> str:
    if c.style in ("mlc_flags", "mlc_inline", "absl"):
        c.imp("from absl import app")
        if c.style != "mlc_inline":
            c.imp("from absl import flags")
        c.typ("Sequence")
        get = {"mlc_flags": "config = _CONFIG.value\n", "mlc_inline": "config = get_config()\n", "absl": ""}[c.style]
        return T('''
        def main(argv: Sequence[str]) -> None:
            if len(argv) > 1:
                raise app.UsageError("Too many command-line arguments.")
            $get
            $info
            $train_fn($arg)


        if __name__ == "__main__":
            $mark
            app.run(main)
        ''', get=get.strip(), train_fn=train_fn, arg=c.arg,
                 info=c.logline("JAX devices: %s", "jax.devices()"),
                 mark='flags.mark_flags_as_required(["config", "workdir"])' if c.style == "mlc_flags" else "")
    if c.style == "argparse":
        return T('''
        def main() -> None:
            args = parse_args()
            $log
            $train_fn(args)


        if __name__ == "__main__":
            main()
        ''', train_fn=train_fn, log="logging.basicConfig(level=logging.INFO)" if c.log == "logger.info" else "")
    return T('''
    if __name__ == "__main__":
        $cfg = TrainConfig()
        $train_fn($cfg)
    ''', cfg=c.cfg, train_fn=train_fn)


# --------------------------------------------------------------------------------------
# File kinds that use optax
# --------------------------------------------------------------------------------------


def k_train_script(c: Train) -> str:
    m = c.rng.choice(LINEN_MODELS)(c)
    for code in m.code:
        c.add(code)
    c.typ("Any")
    c.imp("import numpy as np")
    data = dataset_fn(c, m)
    _, call = optimizer_fn(c)
    pmap = c.chance(0.3)
    steps = state_steps(c, m, pmap, decorate=c.chance(0.6)) if (m.bn or c.chance(0.6)) else functional_steps(c, m, pmap)
    loop, fn = train_loop(c, m, steps, call, data)
    c.add(loop)
    c.blocks.insert(1 if c.log == "logger.info" else 0, config_block(c))
    c.tail = entry_point(c, fn)
    return c.pick([f"Trains {m.cls} on {c.pick(DATASETS)}.", f"Training script for the {m.cls} baseline.",
                   "Single-host training loop with periodic checkpoints.", "Main training entry point."])


def k_trainer(c: Train) -> str:
    m = c.rng.choice(LINEN_MODELS)(c)
    for code in m.code:
        c.add(code)
    c.imp("import numpy as np")
    c.typ("Dict")
    data = dataset_fn(c, m)
    _, call = optimizer_fn(c)
    steps = state_steps(c, m, pmap=False, decorate=False)
    ck = c.rng.choices(["orbax", "flax", "none"], weights=[50, 25, 25])[0]
    c.patterns.append(f"ckpt:{ck}")
    wd = c.e("workdir") if c.style != "mlc_flags" else "workdir"
    keep_wd = f"self.workdir = {wd}"
    wd = "self.workdir"
    if ck == "orbax":
        c.imp("import orbax.checkpoint as ocp")
        ck_init = f"self.manager = ocp.CheckpointManager(\n    {wd}, options=ocp.CheckpointManagerOptions(max_to_keep={c.pick([2, 3, 5])})\n)"
        ck_save = "self.manager.save(int(self.state.step), args=ocp.args.StandardSave(self.state))"
        ck_restore = T('''
        latest = self.manager.latest_step()
        if latest is not None:
            self.state = self.manager.restore(latest, args=ocp.args.StandardRestore(self.state))
        return latest
        ''')
    elif ck == "flax":
        c.imp("from flax.training import checkpoints")
        ck_init = ""
        ck_save = f"checkpoints.save_checkpoint({wd}, self.state, int(self.state.step), keep=3)"
        ck_restore = f"self.state = checkpoints.restore_checkpoint({wd}, self.state)\nreturn int(self.state.step)"
    else:
        ck_init, ck_save, ck_restore = "", "pass", "return None"
    ck_init = keep_wd + ("\n" + ck_init if ck_init else "")
    ev = steps.eval or "None"
    cls = c.fresh("Trainer", "ClassifierTrainer", "LMTrainer", "Experiment")
    sig = ", ".join(x for x in ("self", c.param, "workdir: str = '/tmp/run'" if c.style == "mlc_flags" else "") if x)
    c.add(T('''
    class $cls:
        """Owns the model, the optimizer and the train state; runs epochs and checkpoints."""

        def __init__($sig) -> None:
            rng = jax.random.PRNGKey($seed)
            self.rng, init_rng = jax.random.split(rng)
            self.model = $ctor
            self.tx = $call
            self.state = $init(init_rng, self.model, self.tx)
            self._train_step = jax.jit($step, donate_argnums=(0,))
            self._eval_step = $ev
            self.step_metrics: list = []
            $ck_init

        def train_epoch(self, batches) -> Dict[str, float]:
            losses, accs = [], []
            for batch in batches:
                self.rng, step_rng = jax.random.split(self.rng)
                self.state, metrics = self._train_step(self.state, batch, step_rng)
                losses.append(metrics["loss"])
                accs.append(metrics["accuracy"])
            return {"loss": float(np.mean(jax.device_get(losses))), "accuracy": float(np.mean(jax.device_get(accs)))}

        def evaluate(self, batches) -> Dict[str, float]:
            if self._eval_step is None:
                return {}
            totals: Dict[str, float] = {}
            count = 0
            for batch in batches:
                for key, value in self._eval_step(self.state, batch).items():
                    totals[key] = totals.get(key, 0.0) + float(value)
                count += 1
            return {key: value / max(count, 1) for key, value in totals.items()}

        def save(self) -> None:
            $ck_save

        def restore(self):
            $ck_restore

        def fit(self, num_epochs: int, steps_per_epoch: int) -> None:
            for epoch in range(num_epochs):
                train_metrics = self.train_epoch($data(epoch, $bs, steps_per_epoch))
                eval_metrics = self.evaluate($data(10_000 + epoch, $bs, 10))
                $log
                self.save()
    ''', cls=cls, sig=sig, seed=c.e("seed"), ctor=m.ctor, call=call,
             init=c.init_fn, step=steps.train, ev=ev, ck_init=ck_init, ck_save=ck_save, ck_restore=ck_restore,
             data=data, bs=c.e("bs"),
             log=c.logline("epoch %d: train %s eval %s", "epoch", "train_metrics", "eval_metrics")))
    c.blocks.insert(1 if c.log == "logger.info" else 0, config_block(c))
    if c.style in ("mlc_flags", "absl", "mlc_inline"):
        c.imp("from absl import app")
        if c.style != "mlc_inline":
            c.imp("from absl import flags")
        get = {"mlc_flags": "config = _CONFIG.value", "mlc_inline": "config = get_config()", "absl": ""}[c.style]
        args = {"mlc_flags": "config, _WORKDIR.value", "mlc_inline": "config", "absl": ""}[c.style]
        c.tail = (T('''
        def main(argv) -> None:
            del argv
            $get
            trainer = $cls($args)
            trainer.restore()
            trainer.fit(num_epochs=$ep, steps_per_epoch=$spe)


        if __name__ == "__main__":
            app.run(main)
        ''', get=get, cls=cls, args=args, ep=c.pick([10, 90, 300]), spe=c.pick([100, 500, 1000])))
    elif c.style == "argparse":
        c.tail = (T('''
        if __name__ == "__main__":
            trainer = $cls(parse_args())
            trainer.fit(num_epochs=$ep, steps_per_epoch=$spe)
        ''', cls=cls, ep=c.pick([10, 90]), spe=c.pick([100, 500])))
    else:
        c.tail = (T('''
        if __name__ == "__main__":
            $cls(TrainConfig()).fit(num_epochs=$ep, steps_per_epoch=$spe)
        ''', cls=cls, ep=c.pick([10, 90]), spe=c.pick([100, 500])))
    return c.pick([f"Trainer class for {m.cls}.", "Training loop wrapped in a reusable Trainer.",
                   "Experiment harness: train, evaluate, checkpoint."])


def k_rl(c: Train) -> str:
    ox = c.ox
    c.imp("import jax", "import jax.numpy as jnp", "import flax.linen as nn", "import numpy as np",
          "from flax.training.train_state import TrainState", "import distrax", "import gymnax",
          "from flax.linen.initializers import constant, orthogonal")
    c.typ("NamedTuple", "Sequence")
    env = c.pick(["CartPole-v1", "Acrobot-v1", "MountainCar-v0", "Breakout-MinAtar", "SpaceInvaders-MinAtar"])
    hidden = c.pick([64, 128, 256])
    parts = [f'{ox}.clip_by_global_norm(config["MAX_GRAD_NORM"])', f"{ox}.adam(learning_rate=linear_schedule, eps=1e-5)"]
    if c.chance(0.12):
        parts.reverse()
        c.patterns.append("bug:clip_after_adam")
    c.patterns.append("opt:rl_chain")
    c.add(T('''
    class ActorCritic(nn.Module):
        """Separate actor and critic MLPs with orthogonal init, as in PPO reference code."""

        action_dim: Sequence[int]
        activation: str = "tanh"

        @nn.compact
        def __call__(self, x):
            activation = nn.relu if self.activation == "relu" else nn.tanh
            actor_mean = nn.Dense($h, kernel_init=orthogonal(np.sqrt(2)), bias_init=constant(0.0))(x)
            actor_mean = activation(actor_mean)
            actor_mean = nn.Dense($h, kernel_init=orthogonal(np.sqrt(2)), bias_init=constant(0.0))(actor_mean)
            actor_mean = activation(actor_mean)
            actor_mean = nn.Dense(self.action_dim, kernel_init=orthogonal(0.01), bias_init=constant(0.0))(actor_mean)
            pi = distrax.Categorical(logits=actor_mean)

            critic = nn.Dense($h, kernel_init=orthogonal(np.sqrt(2)), bias_init=constant(0.0))(x)
            critic = activation(critic)
            critic = nn.Dense($h, kernel_init=orthogonal(np.sqrt(2)), bias_init=constant(0.0))(critic)
            critic = activation(critic)
            critic = nn.Dense(1, kernel_init=orthogonal(1.0), bias_init=constant(0.0))(critic)
            return pi, jnp.squeeze(critic, axis=-1)
    ''', h=hidden))
    c.add(T('''
    class Transition(NamedTuple):
        done: jnp.ndarray
        action: jnp.ndarray
        value: jnp.ndarray
        reward: jnp.ndarray
        log_prob: jnp.ndarray
        obs: jnp.ndarray
        info: jnp.ndarray
    '''))
    c.add(T('''
    def make_train(config):
        config["NUM_UPDATES"] = config["TOTAL_TIMESTEPS"] // config["NUM_STEPS"] // config["NUM_ENVS"]
        config["MINIBATCH_SIZE"] = config["NUM_ENVS"] * config["NUM_STEPS"] // config["NUM_MINIBATCHES"]
        env, env_params = gymnax.make(config["ENV_NAME"])

        def linear_schedule(count):
            frac = 1.0 - (count // (config["NUM_MINIBATCHES"] * config["UPDATE_EPOCHS"])) / config["NUM_UPDATES"]
            return config["LR"] * frac

        def train(rng):
            network = ActorCritic(env.action_space(env_params).n, activation=config["ACTIVATION"])
            rng, _rng = jax.random.split(rng)
            init_x = jnp.zeros(env.observation_space(env_params).shape)
            network_params = network.init(_rng, init_x)
            if config["ANNEAL_LR"]:
                tx = $ox.chain(
                    $p0,
                    $p1,
                )
            else:
                tx = $ox.chain(
                    $ox.clip_by_global_norm(config["MAX_GRAD_NORM"]),
                    $ox.adam(config["LR"], eps=1e-5),
                )
            train_state = TrainState.create(apply_fn=network.apply, params=network_params, tx=tx)
            rng, _rng = jax.random.split(rng)
            reset_rng = jax.random.split(_rng, config["NUM_ENVS"])
            obsv, env_state = jax.vmap(env.reset, in_axes=(0, None))(reset_rng, env_params)

            def _update_step(runner_state, unused):
                def _env_step(runner_state, unused):
                    train_state, env_state, last_obs, rng = runner_state
                    rng, _rng = jax.random.split(rng)
                    pi, value = network.apply(train_state.params, last_obs)
                    action = pi.sample(seed=_rng)
                    log_prob = pi.log_prob(action)
                    rng, _rng = jax.random.split(rng)
                    rng_step = jax.random.split(_rng, config["NUM_ENVS"])
                    obsv, env_state, reward, done, info = jax.vmap(env.step, in_axes=(0, 0, 0, None))(
                        rng_step, env_state, action, env_params
                    )
                    transition = Transition(done, action, value, reward, log_prob, last_obs, info)
                    runner_state = (train_state, env_state, obsv, rng)
                    return runner_state, transition

                runner_state, traj_batch = jax.lax.scan(_env_step, runner_state, None, config["NUM_STEPS"])
                train_state, env_state, last_obs, rng = runner_state
                _, last_val = network.apply(train_state.params, last_obs)

                def _calculate_gae(traj_batch, last_val):
                    def _get_advantages(gae_and_next_value, transition):
                        gae, next_value = gae_and_next_value
                        done, value, reward = transition.done, transition.value, transition.reward
                        delta = reward + config["GAMMA"] * next_value * (1 - done) - value
                        gae = delta + config["GAMMA"] * config["GAE_LAMBDA"] * (1 - done) * gae
                        return (gae, value), gae

                    _, advantages = jax.lax.scan(
                        _get_advantages, (jnp.zeros_like(last_val), last_val), traj_batch, reverse=True, unroll=16
                    )
                    return advantages, advantages + traj_batch.value

                advantages, targets = _calculate_gae(traj_batch, last_val)

                def _update_epoch(update_state, unused):
                    def _update_minbatch(train_state, batch_info):
                        traj_batch, advantages, targets = batch_info

                        def _loss_fn(params, traj_batch, gae, targets):
                            pi, value = network.apply(params, traj_batch.obs)
                            log_prob = pi.log_prob(traj_batch.action)
                            value_pred_clipped = traj_batch.value + (value - traj_batch.value).clip(
                                -config["CLIP_EPS"], config["CLIP_EPS"]
                            )
                            value_losses = jnp.square(value - targets)
                            value_losses_clipped = jnp.square(value_pred_clipped - targets)
                            value_loss = 0.5 * jnp.maximum(value_losses, value_losses_clipped).mean()
                            ratio = jnp.exp(log_prob - traj_batch.log_prob)
                            gae = (gae - gae.mean()) / (gae.std() + 1e-8)
                            loss_actor1 = ratio * gae
                            loss_actor2 = jnp.clip(ratio, 1.0 - config["CLIP_EPS"], 1.0 + config["CLIP_EPS"]) * gae
                            loss_actor = -jnp.minimum(loss_actor1, loss_actor2).mean()
                            entropy = pi.entropy().mean()
                            total_loss = loss_actor + config["VF_COEF"] * value_loss - config["ENT_COEF"] * entropy
                            return total_loss, (value_loss, loss_actor, entropy)

                        grad_fn = jax.value_and_grad(_loss_fn, has_aux=True)
                        total_loss, grads = grad_fn(train_state.params, traj_batch, advantages, targets)
                        train_state = train_state.apply_gradients(grads=grads)
                        return train_state, total_loss

                    train_state, traj_batch, advantages, targets, rng = update_state
                    rng, _rng = jax.random.split(rng)
                    batch_size = config["MINIBATCH_SIZE"] * config["NUM_MINIBATCHES"]
                    permutation = jax.random.permutation(_rng, batch_size)
                    batch = (traj_batch, advantages, targets)
                    batch = jax.tree_util.tree_map(lambda x: x.reshape((batch_size,) + x.shape[2:]), batch)
                    shuffled_batch = jax.tree_util.tree_map(lambda x: jnp.take(x, permutation, axis=0), batch)
                    minibatches = jax.tree_util.tree_map(
                        lambda x: jnp.reshape(x, [config["NUM_MINIBATCHES"], -1] + list(x.shape[1:])), shuffled_batch
                    )
                    train_state, total_loss = jax.lax.scan(_update_minbatch, train_state, minibatches)
                    update_state = (train_state, traj_batch, advantages, targets, rng)
                    return update_state, total_loss

                update_state = (train_state, traj_batch, advantages, targets, rng)
                update_state, loss_info = jax.lax.scan(_update_epoch, update_state, None, config["UPDATE_EPOCHS"])
                train_state = update_state[0]
                metric = traj_batch.info
                rng = update_state[-1]
                runner_state = (train_state, env_state, last_obs, rng)
                return runner_state, metric

            rng, _rng = jax.random.split(rng)
            runner_state = (train_state, env_state, obsv, _rng)
            runner_state, metric = jax.lax.scan(_update_step, runner_state, None, config["NUM_UPDATES"])
            return {"runner_state": runner_state, "metrics": metric}

        return train
    ''', ox=ox, p0=parts[0], p1=parts[1]))
    c.tail = (T('''
    if __name__ == "__main__":
        config = {
            "LR": $lr,
            "NUM_ENVS": $envs,
            "NUM_STEPS": $steps,
            "TOTAL_TIMESTEPS": $total,
            "UPDATE_EPOCHS": $epochs,
            "NUM_MINIBATCHES": $mb,
            "GAMMA": 0.99,
            "GAE_LAMBDA": 0.95,
            "CLIP_EPS": 0.2,
            "ENT_COEF": 0.01,
            "VF_COEF": 0.5,
            "MAX_GRAD_NORM": 0.5,
            "ACTIVATION": "$act",
            "ENV_NAME": "$env",
            "ANNEAL_LR": $anneal,
        }
        rng = jax.random.PRNGKey($seed)
        train_jit = jax.jit(make_train(config))
        out = train_jit(rng)
    ''', lr=c.pick(["2.5e-4", "3e-4", "5e-3"]), envs=c.pick([4, 16, 64]), steps=c.pick([128, 256, 500]),
          total=c.pick(["5e5", "1e7", "5e7"]), epochs=c.pick([4, 10]), mb=c.pick([4, 8, 32]),
          act=c.pick(["tanh", "relu"]), env=env, anneal=c.pick(["True", "False"]), seed=c.pick([30, 42, 0])))
    return c.pick([f"PPO on {env}, fully jitted (rollouts and updates in one scan).",
                   f"Proximal policy optimization for {env}."])


def k_nnx(c: Train) -> str:
    m = m_nnx(c)
    for code in m.code:
        c.add(code)
    c.imp("import numpy as np")
    data = dataset_fn(c, m)
    _, call = optimizer_fn(c, style=c.pick(["clip_adamw", "clip_adamw", "inject", "sgd", "multisteps", "append"]))
    c.patterns.append("nnx")
    step = c.fresh("train_step", "nnx_train_step")
    c.add(T('''
    def loss_fn(model: $cls, batch):
        logits = model(batch["$x"])
        loss = $ox.softmax_cross_entropy_with_integer_labels(logits=logits, labels=batch["$y"]).mean()
        return loss, logits


    @nnx.jit
    def $step(model: $cls, optimizer: nnx.Optimizer, metrics: nnx.MultiMetric, batch) -> None:
        """Updates the model in place: nnx modules and optimizers are mutable."""
        grad_fn = nnx.value_and_grad(loss_fn, has_aux=True)
        (loss, logits), grads = grad_fn(model, batch)
        metrics.update(loss=loss, logits=logits, labels=batch["$y"])
        optimizer.update(model, grads)


    @nnx.jit
    def eval_step(model: $cls, metrics: nnx.MultiMetric, batch) -> None:
        loss, logits = loss_fn(model, batch)
        metrics.update(loss=loss, logits=logits, labels=batch["$y"])
    ''', cls=m.cls, x=m.x_key, y=m.y_key, ox=c.ox, step=step))
    ck = c.pick(["orbax", "none"])
    c.patterns.append(f"ckpt:{ck}")
    save = ""
    if ck == "orbax":
        c.imp("import orbax.checkpoint as ocp", "import os")
        save = T('''
        checkpointer = ocp.StandardCheckpointer()
        checkpointer.save(os.path.abspath(os.path.join($wd, f"step_{step}")), nnx.state(model))
        checkpointer.wait_until_finished()
        ''', wd=c.e("workdir") if c.style != "mlc_flags" else "_WORKDIR.value")
    fn = c.fresh("train", "run", "train_and_evaluate")
    c.add(T('''
    def $fn($sig) -> None:
        model = $ctor
        optimizer = nnx.Optimizer(model, $call, wrt=nnx.Param)
        metrics = nnx.MultiMetric(accuracy=nnx.metrics.Accuracy(), loss=nnx.metrics.Average("loss"))
        history = {"train_loss": [], "train_accuracy": []}
        for step, batch in enumerate($data($seed, $bs, $total)):
            model.train()
            $step(model, optimizer, metrics, batch)
            if (step + 1) % $log_every == 0:
                for metric, value in metrics.compute().items():
                    history[f"train_{metric}"].append(float(value))
                metrics.reset()
                $logl
        $save
    ''', fn=fn, sig=c.param, ctor=m.ctor, call=call, data=data, seed=c.e("seed"), bs=c.e("bs"), total=c.e("steps"),
             step=step, log_every=c.e("log_every"), save=save,
             logl=c.logline("step %d: loss %.4f", "step + 1", 'history["train_loss"][-1]')))
    c.blocks.insert(1 if c.log == "logger.info" else 0, config_block(c))
    c.tail = entry_point(c, fn)
    return c.pick(["nnx training loop.", f"Train {m.cls} with flax.nnx and optax.", "Minimal nnx trainer."])


def k_optim_lib(c: Train) -> str:
    c.style, c.cfg = "mlc_inline", "config"  # factories take a ConfigDict
    c.imp("import ml_collections", "import jax", "import jax.numpy as jnp")
    c.typ("Any", "Callable", "Dict")
    if c.chance(0.2):  # a project-local module named optax (resolve imports, never match the word)
        c.imp(f"from {c.project}.lib import optax as {c.project}_optax")
        c.patterns.append("local_optax_module")
        c.add(T('''
        def $fn(params, learning_rate: float):
            """Project helper that only shares a name with optax."""
            return ${p}_optax.chain(${p}_optax.clip(1.0), ${p}_optax.adamw(learning_rate))(params)
        ''', fn=c.fresh("legacy_optimizer", "bv_optimizer"), p=c.project))
    n = c.rng.randint(2, 4)
    made = [optimizer_fn(c)[0] for _ in range(n)]
    reg = c.fresh("OPTIMIZERS", "_OPTIMIZER_BUILDERS")
    c.add(f"{reg}: Dict[str, Callable[..., {c.ox}.GradientTransformation]] = {{\n"
          + "".join(f'    "{f}": {f},\n' for f in made) + "}\n")
    c.add(T('''
    def create_learning_rate_fn(config: ml_collections.ConfigDict) -> Callable[[int], jnp.ndarray]:
        """Product of named factors, e.g. "constant * linear_warmup * rsqrt_decay"."""
        factors = [n.strip() for n in config.lr_factors.split("*")]

        def step_fn(step):
            ret = 1.0
            for name in factors:
                if name == "constant":
                    ret *= config.$lr
                elif name == "linear_warmup":
                    ret *= jnp.minimum(1.0, step / config.$warm)
                elif name == "rsqrt_decay":
                    ret /= jnp.sqrt(jnp.maximum(step, config.$warm))
                elif name == "cosine_decay":
                    progress = jnp.clip((step - config.$warm) / (config.$steps - config.$warm), 0.0, 1.0)
                    ret *= 0.5 * (1.0 + jnp.cos(jnp.pi * progress))
                else:
                    raise ValueError(f"Unknown factor {name}.")
            return jnp.asarray(ret, dtype=jnp.float32)

        return step_fn
    ''', lr=c.names["lr"], warm=c.names["warmup"], steps=c.names["steps"]))
    c.add(T('''
    def scale_by_$name(eps: float = $eps) -> $ox.GradientTransformation:
        """Custom transform: divides each leaf by its RMS (a normalized update)."""

        def init_fn(params):
            del params
            return $ox.EmptyState()

        def update_fn(updates, state, params=None):
            del params
            updates = jax.tree_util.tree_map(lambda g: g / (jnp.sqrt(jnp.mean(jnp.square(g))) + eps), updates)
            return updates, state

        return $ox.GradientTransformation(init_fn, update_fn)
    ''', name=c.fresh("rms", "leaf_rms", "block_rms"), eps=c.pick(["1e-8", "1e-6"]), ox=c.ox))
    c.add(T('''
    def $fn(config: ml_collections.ConfigDict) -> $ox.GradientTransformation:
        """Looks the optimizer up by name; unknown names fail early with the choices."""
        try:
            builder = $reg[config.$opt]
        except KeyError:
            raise ValueError(f"unknown optimizer {config.$opt!r}; choose from {sorted($reg)}") from None
        return builder(config)
    ''', fn=c.fresh("optimizer_from_config", "create_tx_from_config"), reg=reg, ox=c.ox, opt=c.names["optimizer"]))
    return c.pick(["Optimizer and learning-rate factories.", "Optimizer construction shared by all experiments.",
                   "optax helpers: schedules, masks, custom transforms."])


def k_test_optim(c: Train) -> str:
    ox = c.ox
    c.imp("import pytest", "import jax", "import jax.numpy as jnp", "import numpy as np")
    c.patterns.append("tests")
    chains = [f"{ox}.chain({ox}.clip_by_global_norm(1.0), {ox}.adamw(1e-3, weight_decay=1e-4))",
              f"{ox}.adam(3e-4)", f"{ox}.sgd(0.1, momentum=0.9)",
              f"{ox}.chain({ox}.clip_by_global_norm(1.0), {ox}.adam({ox}.warmup_cosine_decay_schedule(0.0, 1e-3, 10, 100)))",
              f"{ox}.lamb(1e-3)", f"{ox}.MultiSteps({ox}.adam(1e-3), every_k_schedule=2)"]
    if c.chance(0.2):
        chains.append(f"{ox}.chain({ox}.adamw(1e-3), {ox}.clip_by_global_norm(1.0))")
        c.patterns.append("bug:clip_after_adamw")
    body = ",\n".join(f"    pytest.param(lambda: {x}, id=\"{i}\")" for i, x in enumerate(c.rng.sample(chains, 4)))
    c.add(T('''
    def quadratic(params):
        return sum(jnp.sum(jnp.square(p - 3.0)) for p in jax.tree_util.tree_leaves(params))


    @pytest.fixture
    def params():
        return {"w": jnp.zeros(($n,)), "b": jnp.zeros(())}
    '''.replace("$n", str(c.pick([3, 8, 16])))))
    c.add(f"OPTIMIZERS = [\n{body},\n]\n")
    c.add(T('''
    @pytest.mark.parametrize("make_tx", OPTIMIZERS)
    def test_loss_decreases(make_tx, params):
        tx = make_tx()
        opt_state = tx.init(params)
        start = quadratic(params)
        for _ in range($steps):
            grads = jax.grad(quadratic)(params)
            updates, opt_state = tx.update(grads, opt_state, params)
            params = $ox.apply_updates(params, updates)
        assert quadratic(params) < start


    def test_schedule_endpoints():
        schedule = $ox.warmup_cosine_decay_schedule(0.0, $lr, warmup_steps=$w, decay_steps=$d)
        np.testing.assert_allclose(schedule(0), 0.0)
        np.testing.assert_allclose(schedule($w), $lr, rtol=1e-6)
        assert schedule($d) < schedule($w)


    def test_clip_bounds_update_norm(params):
        tx = $ox.clip_by_global_norm(1.0)
        grads = jax.tree_util.tree_map(lambda p: jnp.full_like(p, 100.0), params)
        updates, _ = tx.update(grads, tx.init(params))
        assert float($ox.global_norm(updates)) <= 1.0 + 1e-5


    def test_update_is_jittable(params):
        tx = $ox.adamw(1e-3)
        opt_state = tx.init(params)

        @jax.jit
        def step(params, opt_state):
            grads = jax.grad(quadratic)(params)
            updates, opt_state = tx.update(grads, opt_state, params)
            return $ox.apply_updates(params, updates), opt_state

        new_params, _ = step(params, opt_state)
        assert jax.tree_util.tree_structure(new_params) == jax.tree_util.tree_structure(params)
    ''', ox=ox, steps=c.pick([20, 50, 100]), lr=c.pick(["1e-3", "3e-4"]), w=c.pick([10, 100]), d=c.pick([1000, 500])))
    return c.pick(["Tests for the optimizer setup.", "Optimizer sanity tests.", "Unit tests for optax chains and schedules."])


OPTAX_KINDS: dict[str, tuple[Callable[[Train], str], int, list[str]]] = {
    # kind: (builder, weight, path templates; the first is used for a project's first file of the kind)
    "train_script": (k_train_script, 40, ["train.py", "main.py", "train_{ds}.py", "experiments/{ds}/train.py",
                                          "scripts/finetune_{ds}.py", "{pkg}/train.py"]),
    "trainer": (k_trainer, 15, ["trainer.py", "trainers/{name}_trainer.py", "{pkg}/training/trainer.py"]),
    "rl": (k_rl, 10, ["agents/ppo.py", "agents/ppo_{env}.py", "rl/train_{env}.py"]),
    "nnx": (k_nnx, 10, ["train_nnx.py", "nnx/train_{ds}.py", "examples/nnx_{ds}.py"]),
    "optim_lib": (k_optim_lib, 15, ["optim.py", "{pkg}/optimizers.py", "utils/optim_utils.py", "lib/optimizer_factory.py"]),
    "test_optim": (k_test_optim, 10, ["tests/test_optimizer.py", "tests/test_{name}_schedule.py", "tests/test_train_{name}.py"]),
}


# --------------------------------------------------------------------------------------
# File kinds that never mention optax
# --------------------------------------------------------------------------------------


def p_model(s: Src) -> str:
    fns = s.rng.sample(LINEN_MODELS, s.rng.randint(1, 3))
    names = []
    for gen in fns:
        m = gen(s)
        names.append(m.cls)
        for code in m.code:
            s.add(code)
    return f"Flax modules: {', '.join(names)}."


def p_config(s: Src) -> str:
    s.imp("import ml_collections")
    lines = []
    sections = s.rng.sample(["model", "data", "training", "eval", "logging", "checkpoint"], s.rng.randint(3, 6))
    for sec in sections:
        lines.append(f"\n# {sec.capitalize()}.")
        if sec == "training":
            for r in ("lr", "wd", "warmup", "steps", "clip", "bs", "seed", "optimizer"):
                lines.append(f"config.{s.pick(ROLES[r][0])} = {s.pick(ROLES[r][1])}")
            lines.append(f'config.lr_schedule = "{s.pick(["cosine", "linear", "rsqrt", "constant"])}"')
        elif sec == "model":
            lines += ["config.model = ml_collections.ConfigDict()",
                      f'config.model.name = "{s.pick(["vit_b16", "resnet50", "gpt_small", "t5_base"])}"',
                      f"config.model.num_layers = {s.pick([6, 12, 24])}",
                      f"config.model.hidden_size = {s.pick([512, 768, 1024])}",
                      f"config.model.num_heads = {s.pick([8, 12, 16])}",
                      f"config.model.dropout_rate = {s.pick(['0.0', '0.1'])}",
                      f"config.model.dtype = \"{s.pick(['bfloat16', 'float32'])}\""]
        elif sec == "data":
            lines += [f'config.dataset = "{s.pick(DATASETS)}"', f'config.train_split = "train[:{s.pick([90, 95, 98])}%]"',
                      f'config.eval_split = "train[{s.pick([90, 95, 98])}%:]"',
                      f"config.shuffle_buffer_size = {s.pick(['10_000', '50_000'])}",
                      f"config.image_size = {s.pick([32, 224, 384])}", "config.cache = False",
                      f"config.num_parallel_calls = {s.pick([8, 16, -1])}"]
        elif sec == "eval":
            lines += [f"config.eval_every_steps = {s.pick(['1000', '5000'])}", "config.eval_batch_size = 256",
                      f"config.num_eval_steps = {s.pick([-1, 100])}"]
        elif sec == "logging":
            lines += [f"config.log_every_steps = {s.pick([50, 100])}", "config.write_summaries = True",
                      f'config.wandb_project = "{s.project}"']
        else:
            lines += [f"config.checkpoint_every_steps = {s.pick(['1000', '10_000'])}", "config.keep_checkpoints = 3",
                      "config.restore_from = None"]
    body = "\n".join(lines).strip("\n")
    s.add(T('''
    def get_config() -> ml_collections.ConfigDict:
        """$doc"""
        config = ml_collections.ConfigDict()
        $body
        return config
    ''', doc=s.pick(["Default configuration.", "Base configuration shared by all experiments.",
                     f"Hyperparameters for {s.pick(DATASETS)}."]), body=body))
    s.add(T('''
    def get_hyper(hyper):
        """Sweep definition for the launcher."""
        return hyper.product([
            hyper.sweep("config.seed", [0, 1, 2]),
            hyper.sweep("config.$lr", [$sweep]),
        ])
    ''', lr=s.pick(ROLES["lr"][0]), sweep=s.pick(["1e-4, 3e-4, 1e-3", "1e-3, 3e-3", "5e-5, 1e-4"])))
    return "Experiment configuration."


def p_cli(s: Src) -> str:
    s.imp("import argparse", "import sys", "import os")
    s.typ("List", "Optional")
    prog = s.fresh("convert_checkpoints", "export_dataset", "inspect_shards", "make_splits", "summarize_runs")
    s.tail = (T('''
    def build_parser() -> argparse.ArgumentParser:
        parser = argparse.ArgumentParser(prog="$prog", description=__doc__)
        sub = parser.add_subparsers(dest="command", required=True)
        run = sub.add_parser("run", help="Process the inputs.")
        run.add_argument("inputs", nargs="+", help="Files or directories.")
        run.add_argument("--output", "-o", default="$out", help="Output directory.")
        run.add_argument("--workers", type=int, default=$workers)
        run.add_argument("--dry-run", action="store_true")
        ls = sub.add_parser("list", help="List what would be processed.")
        ls.add_argument("root")
        ls.add_argument("--pattern", default="$pat")
        return parser


    def main(argv: Optional[List[str]] = None) -> int:
        args = build_parser().parse_args(argv)
        if args.command == "list":
            for dirpath, _, files in os.walk(args.root):
                for name in sorted(files):
                    print(os.path.join(dirpath, name))
            return 0
        os.makedirs(args.output, exist_ok=True)
        failures = 0
        for path in args.inputs:
            if not os.path.exists(path):
                print(f"missing: {path}", file=sys.stderr)
                failures += 1
                continue
            if args.dry_run:
                print(f"would process {path} -> {args.output}")
        return 1 if failures else 0


    if __name__ == "__main__":
        sys.exit(main())
    ''', prog=prog, out=s.pick(["out", "/tmp/export", "./converted"]), workers=s.pick([1, 4, 8]),
             pat=s.pick(["*.json", "*.npz", "*"])))
    return f"Command-line tool: {prog.replace('_', ' ')}."


def p_tests(s: Src) -> str:
    s.imp("import pytest", "import numpy as np")
    mod = s.pick(["array_ops", "input_pipeline", "metrics", "utils", "tokenizer"])
    s.imp(f"from {s.project}.utils import {mod}")
    for _ in range(s.rng.randint(3, 6)):
        fn = s.fresh("test_shapes", "test_roundtrip", "test_empty_input", "test_dtype_preserved",
                     "test_matches_reference", "test_deterministic", "test_raises_on_bad_input")
        s.add(T('''
        @pytest.mark.parametrize("n", [$a, $b, $c])
        def $fn(n):
            rng = np.random.default_rng(n)
            x = rng.normal(size=(n, $d)).astype(np.float32)
            out = $mod.$call(x)
            assert out.shape[0] == x.shape[0]
            assert np.all(np.isfinite(out))
            np.testing.assert_allclose(out, $mod.$call(x.copy()), rtol=1e-6)
        ''', fn=fn, a=s.pick([0, 1]), b=s.pick([7, 16]), c=s.pick([128, 1000]), d=s.pick([3, 8, 32]), mod=mod,
                 call=s.pick(["normalize", "process", "transform", "apply"])))
    s.add(T('''
    def test_rejects_wrong_rank():
        with pytest.raises(ValueError):
            $mod.validate(np.zeros(($n,)))
    ''', mod=mod, n=s.pick([3, 5])))
    return f"Tests for {mod}."


PLAIN_KINDS: dict[str, tuple[Optional[Callable[[Src], str]], int, list, list[str]]] = {
    # kind: (builder or None, weight, filler pools, path templates)
    "model": (p_model, 15, JAXF + [model_extras], ["models/transformer.py", "models/{name}.py", "{pkg}/models/{name}.py",
                                                    "models/layers.py"]),
    "config": (p_config, 12, DATACLASSES, ["configs/base.py", "configs/{ds}.py", "configs/{ds}_{name}.py"]),
    "data": (None, 18, DATA + NUMPY, ["data/input_pipeline.py", "data/{ds}.py", "{pkg}/data/{name}_loader.py",
                                      "input_pipeline.py"]),
    "np_utils": (None, 15, NUMPY + JAXF, ["utils/array_ops.py", "utils/{name}_utils.py", "{pkg}/ops.py"]),
    "cli": (p_cli, 10, GENERIC, ["tools/{name}.py", "scripts/{name}.py"]),
    "dataclass": (None, 10, DATACLASSES + GENERIC, ["{pkg}/types.py", "schemas/{name}.py", "{pkg}/config_types.py"]),
    "logging": (None, 8, LOGGING, ["utils/logging_utils.py", "utils/metric_writers.py", "{pkg}/monitoring.py"]),
    "tests": (p_tests, 12, NUMPY + GENERIC, ["tests/test_{name}.py", "tests/test_utils.py", "tests/test_{ds}.py"]),
}
PLAIN_LINES = {"model": (80, 450), "config": (60, 160), "data": (80, 420), "np_utils": (80, 400),
               "cli": (80, 300), "dataclass": (60, 300), "logging": (60, 300), "tests": (60, 250)}
PLAIN_DOCS = {"data": "Input pipeline helpers.", "np_utils": "Array utilities.", "dataclass": "Typed records.",
              "logging": "Logging and metric writers."}


# --------------------------------------------------------------------------------------
# Layout and driver
# --------------------------------------------------------------------------------------


def _two_space(text: str) -> str:
    """Google-style 2-space indentation (as many JAX codebases use)."""
    return re.sub(r"(?m)^((?:    )+)", lambda m: "  " * (len(m.group(1)) // 4), text)


def _plan(files: int, seed: int, share: float = OPTAX_SHARE) -> list[tuple[str, str, bool]]:
    """(project, kind, is_optax) for every file, deterministic in (files, seed, share)."""
    rng = random.Random(f"optax-lint-corpus:{seed}:layout")
    n_opt = round(files * share)
    ok, ow = list(OPTAX_KINDS), [v[1] for v in OPTAX_KINDS.values()]
    pk, pw = list(PLAIN_KINDS), [v[1] for v in PLAIN_KINDS.values()]
    kinds = [(k, True) for k in rng.choices(ok, ow, k=n_opt)] + [(k, False) for k in rng.choices(pk, pw, k=files - n_opt)]
    rng.shuffle(kinds)
    nproj = max(3, round(files / 40))
    projects = [f"proj_{chr(ord('a') + i % 26)}{'' if i < 26 else i // 26}" for i in range(nproj)]
    return [(projects[i * nproj // files], k, o) for i, (k, o) in enumerate(kinds)]


def _path(rng: random.Random, templates: list[str], first: bool, project: str, taken: set[str]) -> str:
    tpl = templates[0] if first else rng.choice(templates[1:] or templates)
    rel = tpl.format(ds=rng.choice(DATASETS), name=rng.choice(WORDS + ["vit", "bert", "unet", "mixer", "gpt"]),
                     env=rng.choice(["cartpole", "breakout", "acrobot", "minatar"]), pkg=project.replace("proj_", "lib"))
    base, k = rel[:-3], 2
    while f"{project}/{rel}" in taken:
        rel, k = f"{base}_{k}.py", k + 1
    taken.add(f"{project}/{rel}")
    return f"{project}/{rel}"


def generate(out_dir: str | Path, files: int = 240, seed: int = 0, share: float = OPTAX_SHARE) -> dict:
    """Write the corpus under out_dir and return its manifest."""
    out = Path(out_dir)
    if out.exists() and any(out.iterdir()):
        if not (out / MANIFEST).exists():
            raise SystemExit(f"error: {out} is not empty and holds no {MANIFEST}; refusing to overwrite it")
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    taken: set[str] = set()
    seen_kind: set[tuple[str, str]] = set()
    plan = _plan(files, seed, share)
    two_space = {p: random.Random(f"optax-lint-corpus:{seed}:{p}").random() < 0.35 for p, _, _ in plan}
    entries = []
    total_lines = 0
    for i, (project, kind, is_optax) in enumerate(plan):
        rng = random.Random(f"optax-lint-corpus:{seed}:{i}")
        first = (project, kind) not in seen_kind
        seen_kind.add((project, kind))
        if is_optax:
            builder, _, templates = OPTAX_KINDS[kind]
            src: Src = Train(rng, project)
            doc = builder(src)  # type: ignore[arg-type]
            pools, lo, hi = TRAIN_FILL + [model_extras], 150, 500
        else:
            builder, _, pools, templates = PLAIN_KINDS[kind]
            src = Src(rng, project)
            doc = builder(src) if builder else PLAIN_DOCS[kind]
            lo, hi = PLAIN_LINES[kind]
        path = _path(rng, templates, first, project, taken)
        fill(src, pools, rng.randint(max(lo, min(src.n_lines() + 20, hi - 50)), hi - 20) if is_optax
             else rng.randint(lo, hi - 20), hi)
        text = src.render(doc)
        if two_space[project]:
            text = _two_space(text)
        try:
            ast.parse(text, filename=path)
        except SyntaxError as e:
            dump = out / (path + ".broken")
            dump.parent.mkdir(parents=True, exist_ok=True)
            dump.write_text(text)
            raise SystemExit(f"error: generated {path} does not parse: {e} (text written to {dump})") from e
        mentions = "optax" in text
        if mentions != is_optax:
            raise SystemExit(f"error: {path} ({kind}) {'mentions' if mentions else 'does not mention'} optax")
        n = text.count("\n")
        if is_optax and not lo <= n <= hi:
            raise SystemExit(f"error: {path} ({kind}) has {n} lines, outside {lo}-{hi}")
        dest = out / path
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(text, encoding="utf-8")
        total_lines += n
        entries.append({"path": path, "kind": kind, "optax": is_optax, "lines": n, "patterns": src.patterns})
    kinds: dict[str, int] = {}
    for e in entries:
        kinds[e["kind"]] = kinds.get(e["kind"], 0) + 1
    manifest = {"seed": seed, "n_files": len(entries), "n_lines": total_lines,
                "n_optax_files": sum(e["optax"] for e in entries),
                "optax_lines": sum(e["lines"] for e in entries if e["optax"]),
                "kinds": dict(sorted(kinds.items())), "files": entries}
    (out / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    return manifest


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--files", type=int, default=240)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--optax-share", type=float, default=OPTAX_SHARE, help="fraction of files that use optax")
    args = ap.parse_args(argv)
    m = generate(args.out_dir, args.files, args.seed, args.optax_share)
    bugs = sum(any(p.startswith("bug:") for p in e["patterns"]) for e in m["files"])
    print(f"wrote {m['n_files']} files, {m['n_lines']} lines to {args.out_dir} "
          f"({m['n_optax_files']} use optax: {m['optax_lines']} lines, {bugs} with a seeded bug)")
    print("kinds: " + ", ".join(f"{k}={v}" for k, v in m["kinds"].items()))
    if m["n_files"] < MIN_FILES or m["n_lines"] < MIN_LINES:
        print(f"note: below the benchmark's intended size ({MIN_FILES} files, {MIN_LINES} lines)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
