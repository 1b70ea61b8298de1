"""The embedding engine (anamnesis.search.embed) against the real all-MiniLM-L6-v2 weights.

The model comes from scripts/test-model into the test cache (or ANAMNESIS_TEST_MODEL_DIR),
loaded once per session. Its vectors are checked against reference vectors that
sentence-transformers over torch computed once from the same folder
(tests/data/minilm_reference.json). When the model cannot be had, these tests fail: they
never skip.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from anamnesis.search import embed
from anamnesis.search.embed import (
    Embedder,
    SemanticUnavailable,
    check_model_dir,
    load_embedder,
    missing_dependencies,
    model_fingerprint,
)

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = Path(__file__).resolve().parents[1] / "data" / "minilm_reference.json"


def _cosine(a: Any, b: Any) -> float:
    import numpy as np

    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


# The session-scoped model is loaded once: the file runs on one xdist worker.
pytestmark = pytest.mark.xdist_group("embed-model")


@pytest.fixture(scope="session")
def model_dir() -> Path:
    """The real model folder: ANAMNESIS_TEST_MODEL_DIR, else scripts/test-model into the cache."""
    given = os.environ.get("ANAMNESIS_TEST_MODEL_DIR")
    if given:
        return Path(given)
    cache = Path(os.environ.get("ANAMNESIS_TEST_CACHE") or Path.home() / ".cache" / "anamnesis-test")
    proc = subprocess.run(
        [str(ROOT / "scripts" / "test-model"), str(cache / "model")],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if proc.returncode != 0:
        pytest.fail(f"scripts/test-model failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return Path(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="session")
def embedder(model_dir: Path) -> Embedder:
    """The model chunking long texts into up to four windows."""
    return load_embedder(model_dir, max_chunks=4)


@pytest.fixture(scope="session")
def truncating(model_dir: Path) -> Embedder:
    """The model as the index uses it: every text cut at 256 tokens, as sentence-transformers does."""
    return load_embedder(model_dir)


@pytest.fixture(scope="session")
def reference() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(REFERENCE.read_text(encoding="utf-8"))
    return data


def _copy_model(model_dir: Path, dest: Path, *, weights: str = "link", skip: tuple[str, ...] = ()) -> Path:
    """A copy of the model folder: small files copied, the weights linked or copied."""
    dest.mkdir(parents=True)
    for name in ("config.json", "tokenizer.json", "1_Pooling/config.json"):
        if name in skip or not (model_dir / name).exists():
            continue
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(model_dir / name, dest / name)
    if embed.WEIGHTS_FILE not in skip:
        if weights == "link":
            (dest / embed.WEIGHTS_FILE).symlink_to(model_dir / embed.WEIGHTS_FILE)
        else:
            shutil.copy2(model_dir / embed.WEIGHTS_FILE, dest / embed.WEIGHTS_FILE)
    return dest


# --- the extra and the import ----------------------------------------------------------


def test_the_extra_is_installed_in_the_test_environment() -> None:
    assert missing_dependencies() == []


def test_importing_the_module_loads_no_numerics() -> None:
    code = (
        "import sys, anamnesis.search.embed as e\n"
        "heavy = [m for m in ('numpy', 'tokenizers', 'huggingface_hub', 'threadpoolctl', 'onnxruntime') if m in sys.modules]\n"
        "print(heavy, e.missing_dependencies())\n"
        "assert not heavy, heavy\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_missing_dependencies_names_absent_packages(monkeypatch: pytest.MonkeyPatch) -> None:
    real_find_spec = importlib.util.find_spec

    def find_spec(name: str, *args: Any) -> Any:
        return None if name == "tokenizers" else real_find_spec(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    assert missing_dependencies() == ["tokenizers"]
    with pytest.raises(
        SemanticUnavailable, match=r"tokenizers missing.*scripts/install --semantic"
    ):
        load_embedder(Path("/nonexistent"))


# --- vectors -------------------------------------------------------------------------------


def test_vectors_match_sentence_transformers(truncating: Embedder, reference: dict[str, Any]) -> None:
    """Cut at 256 tokens, our vectors are sentence-transformers' vectors."""
    items = reference["items"]
    assert truncating.dim == reference["dim"] == 384
    vectors = truncating.embed([item["text"] for item in items])
    for item, vector in zip(items, vectors, strict=True):
        cos = _cosine(vector, item["vector"])
        assert cos >= 0.999, (item["text"][:40], cos)
        # In fact they agree to the reference's rounding.
        assert max(abs(float(a) - b) for a, b in zip(vector, item["vector"], strict=True)) < 1e-5, item[
            "text"
        ][:40]


def test_long_texts_are_chunked_as_the_reference(embedder: Embedder, reference: dict[str, Any]) -> None:
    items = reference["items"]
    assert any("chunked_vector" in item for item in items)
    vectors = embedder.embed([item["text"] for item in items])
    for item, vector in zip(items, vectors, strict=True):
        expected = item.get("chunked_vector", item["vector"])
        assert _cosine(vector, expected) >= 0.999, (item["text"][:40], _cosine(vector, expected))
    long_item = next(item for item in items if "chunked_vector" in item)
    # Chunking changes the vector of a long text (it sees its second half too)...
    assert _cosine(long_item["vector"], long_item["chunked_vector"]) < 0.999
    # ...and leaves texts that fit in one window alone.
    short = [i for i, item in enumerate(items) if "chunked_vector" not in item]
    truncated = embedder.embed([items[i]["text"] for i in short])
    for row, i in enumerate(short):
        assert _cosine(truncated[row], items[i]["vector"]) >= 0.999


def test_vectors_are_normalised_float32(embedder: Embedder) -> None:
    import numpy as np

    vectors = embedder.embed(["a", "a longer sentence about databases", "x " * 2000, "🚀", "   "])
    assert vectors.dtype == np.float32
    assert vectors.shape == (5, 384)
    assert np.all(np.isfinite(vectors))
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    query = embedder.embed_query("where is the deploy runbook")
    assert query.shape == (384,) and query.dtype == np.float32
    assert abs(float(np.linalg.norm(query)) - 1.0) < 1e-5


def test_batches_match_one_by_one(embedder: Embedder, reference: dict[str, Any]) -> None:
    import numpy as np

    texts = [item["text"] for item in reference["items"]] + ["deploy", "rollback the deploy", "pool size 20"]
    together = embedder.embed(texts)
    small_batches = embedder.embed(texts, batch_size=3)
    alone = np.stack([embedder.embed_query(text) for text in texts])
    assert np.allclose(together, alone, atol=1e-5)
    assert np.allclose(together, small_batches, atol=1e-5)
    # Order of the inputs does not matter.
    backwards = embedder.embed(texts[::-1])[::-1]
    assert np.allclose(together, backwards, atol=1e-5)


def _attention_float64(qkv: Any, heads: int) -> Any:
    """Textbook self-attention in float64: the softmax with its row maximum subtracted."""
    import numpy as np

    n, dim = qkv.shape[0], qkv.shape[1] // 3
    part = qkv.astype(np.float64).reshape(n, 3, heads, dim // heads)
    q, k, v = (part[:, i].transpose(1, 0, 2) for i in range(3))
    scores = q @ k.transpose(0, 2, 1)
    scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
    scores /= scores.sum(axis=-1, keepdims=True)
    return (scores @ v).transpose(1, 0, 2).reshape(n, dim)


@pytest.mark.parametrize("scale", [1.0, 25.0, -25.0])
def test_attention_is_exact_when_scores_overflow_or_vanish(scale: float) -> None:
    """The softmax skips subtracting the row maximum only when that cannot matter: scores
    whose exponentials overflow float32 (or all vanish) take the careful way, same result."""
    import numpy as np

    rng = np.random.default_rng(5)
    heads, size, n = 4, 8, 30
    qkv = rng.standard_normal((n, 3 * heads * size)).astype(np.float32)
    # Keys all alike, so with a large query scale a row's scores are all far above (or,
    # negated, all far below) what float32's exp can hold.
    qkv[:, heads * size : 2 * heads * size] = np.abs(qkv[0, heads * size : 2 * heads * size]) + 1
    qkv[:, : heads * size] = np.abs(qkv[:, : heads * size]) * scale
    q = qkv[:, : heads * size].reshape(n, heads, size)
    k = qkv[:, heads * size : 2 * heads * size].reshape(n, heads, size)
    extreme = np.abs(np.einsum("ihs,jhs->hij", q, k)).min()
    assert (extreme > 100) == (scale != 1.0)  # e**100 is past float32, e**-100 below it
    out = np.empty((n, heads * size), dtype=np.float32)
    with np.errstate(all="raise"):  # not even a warning escapes
        embed._attend(qkv, out, heads)
    assert np.all(np.isfinite(out))
    # float32 rounding of scores in the hundreds moves the weights by ~1e-5 of themselves
    assert np.abs(out - _attention_float64(qkv, heads)).max() < 1e-4


def test_batches_share_the_work_evenly_between_threads() -> None:
    """Notes of mixed lengths: each thread's batches cost about the same, so neither waits."""
    import random

    rng = random.Random(3)
    flat = [(i, [0] * rng.choice([20, 60, 120, 256])) for i in range(32)]
    batches = embed._balanced_batches(flat, 2, 16)
    assert len(batches) == 2 and all(len(b) <= 16 for b in batches)
    assert sorted(i for b in batches for i, _ in b) == list(range(32))
    costs = [sum(embed._window_cost(len(w)) for _, w in b) for b in batches]
    assert max(costs) < 1.1 * min(costs), costs
    # more windows than two batches hold: a multiple of the threads, longest-cost first
    many = embed._balanced_batches(flat * 3, 2, 16)
    assert len(many) % 2 == 0 and all(len(b) <= 16 for b in many)
    costs = [sum(embed._window_cost(len(w)) for _, w in b) for b in many]
    assert costs == sorted(costs, reverse=True) and max(costs) < 1.1 * min(costs), costs
    assert [len(b) for b in embed._balanced_batches(flat[:1], 2, 16)] == [1]


def _bulk_texts(reference: dict[str, Any]) -> list[str]:
    """The reference texts, repeated past the windows after which bulk calls go to onnxruntime."""
    texts = [item["text"] for item in reference["items"]]
    return texts * (-(-embed._ONNX_AFTER_WINDOWS // len(texts)) + 1)


@pytest.mark.parametrize("chunks", [1, 4])
def test_onnxruntime_gives_the_reference_vectors(
    model_dir: Path, reference: dict[str, Any], chunks: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bulk embedding through onnxruntime (the graph written by embed.py itself) gives the
    same vectors as numpy and the reference, to the same tolerance."""
    import numpy as np

    monkeypatch.delenv(embed.RUNTIME_ENV, raising=False)
    assert embed.onnx_runtime_available(), "onnxruntime belongs in the test environment (pyproject's test extra)"
    model = load_embedder(model_dir, max_chunks=chunks)
    items = reference["items"]
    key = "vector" if chunks == 1 else "chunked_vector"
    expected = np.asarray([item.get(key, item["vector"]) for item in items], dtype=np.float32)
    numpy_vectors = model.embed([item["text"] for item in items])  # a short call: numpy
    assert model._onnx is None
    texts = _bulk_texts(reference)
    vectors = model.embed(texts)
    assert model._onnx is not None  # the session was made: this call ran through it
    bulk = model.embed([item["text"] for item in items] * 2)[: len(items)]
    for got in (vectors[: len(items)], bulk):
        assert np.abs(got - expected).max() < 1e-5
        assert np.abs(got - numpy_vectors).max() < 1e-5
    # A query stays on numpy's path (no per-call session overhead): same vector still.
    assert np.abs(model.embed_query(items[0]["text"]) - expected[0]).max() < 1e-5


def test_onnxruntime_can_be_switched_off_and_queries_never_start_it(
    model_dir: Path, reference: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(embed.RUNTIME_ENV, "numpy")
    assert not embed.onnx_runtime_available()
    off = load_embedder(model_dir)
    off.embed(_bulk_texts(reference))
    assert off._onnx is None and off._onnx_tried
    monkeypatch.delenv(embed.RUNTIME_ENV)
    queries = load_embedder(model_dir)
    for _ in range(embed._ONNX_AFTER_WINDOWS + 1):
        queries.embed_query("where is the deploy runbook")
    assert queries._onnx is None and not queries._onnx_tried


def test_a_failing_onnxruntime_leaves_the_work_to_numpy(
    model_dir: Path, reference: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    import numpy as np

    def broken(embedder: Embedder) -> Any:
        raise RuntimeError("onnxruntime cannot load this graph")

    monkeypatch.delenv(embed.RUNTIME_ENV, raising=False)
    monkeypatch.setattr(embed, "_onnx_session", broken)
    model = load_embedder(model_dir)
    texts = _bulk_texts(reference)
    vectors = model.embed(texts)
    assert model._onnx is None and model._onnx_tried
    expected = np.asarray([item["vector"] for item in reference["items"]], dtype=np.float32)
    assert np.abs(vectors[: len(expected)] - expected).max() < 1e-5


def test_concurrent_calls_agree_and_blas_runs_one_thread(embedder: Embedder) -> None:
    import numpy as np
    from threadpoolctl import threadpool_info

    texts = [f"note {i}: the worker pool drains the queue after a deploy" * (1 + i % 3) for i in range(12)]
    expected = embedder.embed(texts, batch_size=4)
    results: list[Any] = [None] * 4

    def work(slot: int) -> None:
        results[slot] = embedder.embed(texts, batch_size=4)

    workers = [threading.Thread(target=work, args=(slot,)) for slot in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
    for result in results:
        assert result is not None and np.allclose(result, expected, atol=1e-5)
    # The embedder spreads work over the cores itself; BLAS stays on one thread.
    assert {int(i["num_threads"]) for i in threadpool_info() if i["user_api"] == "blas"} <= {1}


def test_empty_input(embedder: Embedder) -> None:
    import numpy as np

    out = embedder.embed([])
    assert out.shape == (0, 384) and out.dtype == np.float32
    with pytest.raises(TypeError):
        embedder.embed("a string is not a list of texts")


def test_paraphrases_are_closer_than_unrelated_texts(embedder: Embedder) -> None:
    query = embedder.embed_query("How do I roll back a failed deployment?")
    paraphrase, unrelated, near_unrelated = embedder.embed(
        [
            "Steps to revert a broken release to the previous version",
            "My grandmother bakes bread every Sunday morning.",
            "The database stores invoices in monthly partitions.",
        ]
    )
    assert float(query @ paraphrase) > float(query @ unrelated) + 0.2
    assert float(query @ paraphrase) > float(query @ near_unrelated)


# --- the model folder and its fingerprint --------------------------------------------------


def test_fingerprint_is_stable_and_names_the_settings(
    model_dir: Path, embedder: Embedder, truncating: Embedder
) -> None:
    first = model_fingerprint(model_dir)
    assert first == model_fingerprint(model_dir) == truncating.fingerprint
    assert re.fullmatch(r"minilm-l6-v2:[0-9a-f]{12}:fp32:256x1", first), first
    assert model_fingerprint(model_dir, max_chunks=4) == embedder.fingerprint
    assert embedder.fingerprint.endswith(":fp32:256x4")


def test_fingerprint_hash_is_cached_beside_the_weights(model_dir: Path, tmp_path: Path) -> None:
    copy = _copy_model(model_dir, tmp_path / "model", weights="copy")
    real = model_fingerprint(copy)
    sidecar = copy / embed._HASH_SIDECAR
    cached = json.loads(sidecar.read_text())
    assert real.split(":")[1] == cached["sha256"][:12]
    # The cached hash is used while size and times match: nothing is re-read...
    sidecar.write_text(json.dumps({**cached, "sha256": "ab" * 32}))
    assert model_fingerprint(copy).split(":")[1] == "ab" * 6
    # ...and a sidecar that does not match the file is ignored.
    sidecar.write_text(json.dumps({**cached, "size": 1, "sha256": "cd" * 32}))
    assert model_fingerprint(copy) == real


def test_prepared_weights_are_written_once_then_mapped_and_give_the_same_vectors(
    model_dir: Path, tmp_path: Path, reference: dict[str, Any]
) -> None:
    import numpy as np

    copy = _copy_model(model_dir, tmp_path / "model")
    texts = [item["text"] for item in reference["items"]]
    expected = np.asarray([item["vector"] for item in reference["items"]], dtype=np.float32)

    def prepared() -> list[Path]:
        return sorted(copy.glob(f"{embed._PREPARED_PREFIX}*"))

    assert prepared() == []
    first = load_embedder(copy)  # builds the layer matrices and writes them beside the weights
    [written] = prepared()
    assert not any(isinstance(layer.up_w.base, np.memmap) for layer in first._layers)
    second = load_embedder(copy)  # maps them: nothing is built
    assert all(isinstance(layer.up_w.base, np.memmap) for layer in second._layers)
    for model in (first, second):
        assert np.abs(model.embed(texts) - expected).max() < 1e-5
    # a cut-off file is not used (and is written again)
    written.write_bytes(written.read_bytes()[:1000])
    third = load_embedder(copy)
    assert not any(isinstance(layer.up_w.base, np.memmap) for layer in third._layers)
    assert np.abs(third.embed(texts) - expected).max() < 1e-5
    assert prepared() == [written] and written.stat().st_size > 1000
    # a folder that cannot be written to still loads
    written.unlink()
    copy.chmod(0o555)
    try:
        if os.access(copy, os.W_OK):  # root writes anyway: nothing more to check here
            return
        assert np.abs(load_embedder(copy).embed(texts) - expected).max() < 1e-5
        assert prepared() == []
    finally:
        copy.chmod(0o755)


def test_fingerprint_changes_when_the_weights_change(model_dir: Path, tmp_path: Path) -> None:
    copy = _copy_model(model_dir, tmp_path / "model", weights="copy")
    before = model_fingerprint(copy)
    assert before == model_fingerprint(model_dir)
    weights = copy / embed.WEIGHTS_FILE
    with weights.open("r+b") as fh:  # one byte of the last tensor's data
        fh.seek(-1, os.SEEK_END)
        byte = fh.read(1)
        fh.seek(-1, os.SEEK_END)
        fh.write(bytes([byte[0] ^ 0x01]))
    after = model_fingerprint(copy)
    assert after != before
    assert after.split(":")[0] == before.split(":")[0] and after.split(":")[2:] == before.split(":")[2:]


@pytest.mark.parametrize("missing", ["config.json", "tokenizer.json", "model.safetensors"])
def test_a_missing_file_is_named(model_dir: Path, tmp_path: Path, missing: str) -> None:
    copy = _copy_model(model_dir, tmp_path / "model", skip=(missing,))
    with pytest.raises(SemanticUnavailable, match=f"no model in .*: missing {re.escape(missing)}$"):
        check_model_dir(copy)
    with pytest.raises(SemanticUnavailable, match=f"missing {re.escape(missing)}"):
        load_embedder(copy)
    with pytest.raises(SemanticUnavailable, match=f"missing {re.escape(missing)}"):
        model_fingerprint(copy)


def test_bad_model_folders_are_explained(model_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(SemanticUnavailable, match="folder does not exist"):
        check_model_dir(tmp_path / "nowhere")

    truncated = _copy_model(model_dir, tmp_path / "truncated", skip=(embed.WEIGHTS_FILE,))
    with (model_dir / embed.WEIGHTS_FILE).open("rb") as src:
        (truncated / embed.WEIGHTS_FILE).write_bytes(src.read(1_000_000))
    with pytest.raises(SemanticUnavailable, match="truncated"):
        load_embedder(truncated)

    garbage = _copy_model(model_dir, tmp_path / "garbage", skip=(embed.WEIGHTS_FILE,))
    (garbage / embed.WEIGHTS_FILE).write_bytes(b"<html>not found</html>")
    with pytest.raises(SemanticUnavailable, match="not a safetensors file"):
        check_model_dir(garbage)

    cls_pooling = _copy_model(model_dir, tmp_path / "cls")
    (cls_pooling / "1_Pooling").mkdir(exist_ok=True)
    (cls_pooling / "1_Pooling" / "config.json").write_text(
        json.dumps({"pooling_mode_cls_token": True, "pooling_mode_mean_tokens": False})
    )
    with pytest.raises(SemanticUnavailable, match="not mean pooling"):
        check_model_dir(cls_pooling)

    not_bert = _copy_model(model_dir, tmp_path / "gpt")
    config = json.loads((not_bert / "config.json").read_text())
    (not_bert / "config.json").write_text(json.dumps({**config, "model_type": "gpt2"}))
    with pytest.raises(SemanticUnavailable, match="expected a BERT encoder"):
        check_model_dir(not_bert)

    with pytest.raises(SemanticUnavailable) as caught:
        check_model_dir(garbage)
    assert "\n" not in str(caught.value)


# --- downloading ----------------------------------------------------------------------------


DOWNLOAD_CHILD = """
import json, sys
from pathlib import Path
from anamnesis.search.embed import SemanticUnavailable, download_model
calls = []
try:
    download_model(Path(sys.argv[1]), progress=lambda done, total: calls.append((done, total)))
except SemanticUnavailable as exc:
    print("UNAVAILABLE", exc)
else:
    print("DOWNLOADED", json.dumps(calls))
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _download_in_child(dest: Path, **env: str) -> str:
    full = {**os.environ, "HF_HUB_DISABLE_TELEMETRY": "1", "HF_HOME": str(dest.parent / "hf-home"), **env}
    proc = subprocess.run(
        [sys.executable, "-c", DOWNLOAD_CHILD, str(dest)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=full,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout.strip()


def test_download_when_offline_says_so(tmp_path: Path) -> None:
    out = _download_in_child(tmp_path / "model", HF_HUB_OFFLINE="1")
    assert out.startswith("UNAVAILABLE cannot download the model from the model hub")
    assert "HF_HUB_OFFLINE" in out and "\n" not in out


def test_download_when_the_hub_is_unreachable_says_so(tmp_path: Path) -> None:
    # Nothing listens on this loopback port: the connection is refused at once.
    out = _download_in_child(tmp_path / "model", HF_ENDPOINT=f"http://127.0.0.1:{_free_port()}")
    assert out.startswith("UNAVAILABLE cannot download the model from the model hub (")
    assert "check the network" in out and "\n" not in out


class _FakeHub(BaseHTTPRequestHandler):
    """Serves a model folder the way the model hub's resolve URLs do (loopback only)."""

    root: Path
    commit = "0123456789abcdef0123456789abcdef01234567"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _file(self) -> Path | None:
        match = re.fullmatch(
            r"/sentence-transformers/all-MiniLM-L6-v2/resolve/[^/]+/(.+)", self.path.split("?")[0]
        )
        if not match:
            return None
        path = self.root / match.group(1)
        return path if path.is_file() else None

    def _headers(self, path: Path | None) -> bool:
        if path is None:
            self.send_response(404)
            self.send_header("X-Error-Code", "EntryNotFound")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return False
        self.send_response(200)
        self.send_header("Content-Length", str(path.stat().st_size))
        self.send_header("ETag", f'"{path.stat().st_size}-{path.name}"')
        self.send_header("X-Repo-Commit", self.commit)
        self.send_header("Content-Type", "application/octet-stream")
        self.end_headers()
        return True

    def do_HEAD(self) -> None:
        self._headers(self._file())

    def do_GET(self) -> None:
        path = self._file()
        if self._headers(path) and path is not None:
            with path.open("rb") as fh:
                shutil.copyfileobj(fh, self.wfile, 1 << 20)


@pytest.fixture
def fake_hub(model_dir: Path) -> Iterator[str]:
    handler = type("Hub", (_FakeHub,), {"root": model_dir})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_download_fetches_a_loadable_model_with_progress(
    fake_hub: str, model_dir: Path, tmp_path: Path
) -> None:
    """The whole download path, against a stand-in for the model hub on loopback."""
    dest = tmp_path / "model"
    out = _download_in_child(dest, HF_ENDPOINT=fake_hub)
    assert out.startswith("DOWNLOADED "), out
    calls = [tuple(c) for c in json.loads(out.split(" ", 1)[1])]
    check_model_dir(dest)
    assert model_fingerprint(dest) == model_fingerprint(model_dir)
    for name in embed.HUB_FILES:
        assert (dest / name).read_bytes() == (model_dir / name).read_bytes(), name
    total = sum((model_dir / name).stat().st_size for name in embed.HUB_FILES)
    assert calls[0] == (0, total) and calls[-1] == (total, total)
    done = [c[0] for c in calls]
    assert done == sorted(done)
    # Bytes are reported while the weights arrive, not only when a file is complete.
    boundaries, running = {0}, 0
    for name in embed.HUB_FILES:
        running += (model_dir / name).stat().st_size
        boundaries.add(running)
    assert set(done) - boundaries, calls
