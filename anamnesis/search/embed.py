"""Local sentence embeddings for semantic search (optional: the `semantic` extra).

The model is all-MiniLM-L6-v2 (a 6-layer BERT encoder, 384 dimensions), read from a
model folder in the standard layout: config.json, tokenizer.json, model.safetensors
(plus sentence-transformers' small config files, which are not needed here).

The forward pass is plain numpy in float32 (no torch); when onnxruntime happens to be
installed, long runs of bulk embedding go through it instead, with the same vectors (see
"the optional faster runtime" below). The weights are
memory-mapped straight from the safetensors file (the format is an 8-byte header length,
a JSON header and raw little-endian tensors), and the matrices built from them once are
memory-mapped from a prepared-weights file beside it (see _load_layers); tokenisation is
HF `tokenizers`. A text's
vector is the mean of its token vectors over the attention mask, L2-normalised, exactly
what sentence-transformers computes for this model; inputs are cut at 256 tokens, its
max_seq_length. With `max_chunks` above 1, a longer text is instead cut into 256-token
windows (at most `max_chunks`), each window embedded on its own, and the window vectors
averaged (weighted by their length in tokens) and normalised again.

The index embeds one window a note (MAX_CHUNKS = 1): the cost is in proportion to the
tokens embedded (the matrix products already run near the processor's peak), and on our
recall sets four windows ranked no better than one (docs/search.md) while costing three
times as much on long notes; a window shorter than the model's 256 tokens lost recall on
some set at every length tried (bench_embed.py --recall-caps).

The windows of a call are packed without padding and run in batches of about equal cost
spread over the cores by threads of our own, BLAS held to one thread (see Embedder).
Figures (notes per CPU-second, start-up, a query's time) are in docs/search.md and come
from bench/bench_embed.py.

numpy, tokenizers, threadpoolctl and onnxruntime are imported inside functions: importing this module
is free, so the CLI's start, the hooks and keyword-only search never pay for them.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import inspect
import itertools
import json
import math
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    FloatArray = npt.NDArray[np.float32]

HUB_REPO = "sentence-transformers/all-MiniLM-L6-v2"
MODEL_LABEL = "minilm-l6-v2"
# The extra, installed into the environment anamnesis runs in (not the other program of this name
# on the public index): scripts/install's venv, or a venv / pipx install of the person's own.
INSTALL_HINT = "run `./scripts/install --semantic` in your clone (or pip install '.[semantic]' into anamnesis's venv)"

WEIGHTS_FILE = "model.safetensors"
REQUIRED_FILES = ("config.json", "tokenizer.json", WEIGHTS_FILE)
# What download_model fetches: the files we need, then sentence-transformers' own small
# config files, so the folder also loads in sentence-transformers.
HUB_FILES = (
    *REQUIRED_FILES,
    "modules.json",
    "sentence_bert_config.json",
    "config_sentence_transformers.json",
    "1_Pooling/config.json",
    "special_tokens_map.json",
    "tokenizer_config.json",
    "vocab.txt",
)

MAX_TOKENS = 256  # the model's max_seq_length, [CLS] and [SEP] included
MAX_CHUNKS = 1  # windows of MAX_TOKENS averaged for a long text; 1 = plain truncation
PRECISION = "fp32"

# The packages the extra brings, as (distribution name, module name).
_DEPENDENCIES = (
    ("numpy", "numpy"),
    ("tokenizers", "tokenizers"),
    ("threadpoolctl", "threadpoolctl"),
    ("huggingface_hub", "huggingface_hub"),
)
_HASH_SIDECAR = ".model.safetensors.sha256.json"
_PREPARED_PREFIX = (
    ".model.prepared-"  # + weights hash and shapes: the built layer matrices (see _load_layers)
)
_ROW_BLOCK = 256  # tokens per feed-forward block: its 256 x 1536 hidden matrix fits in cache
_HEADER_LIMIT = 100 * 1024 * 1024  # a safetensors header larger than this is not one


class SemanticUnavailable(Exception):
    """Semantic search cannot run here; the message is one line a person can act on."""


def missing_dependencies() -> list[str]:
    """Names of the semantic extra's packages that are not installed ([] when all are).

    Looks them up without importing them."""
    return [dist for dist, module in _DEPENDENCIES if not _installed(module)]


def _installed(module: str) -> bool:
    """Whether `module` can be imported, found without importing it."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _require_dependencies(*, download: bool = False) -> None:
    missing = [d for d in missing_dependencies() if download or d != "huggingface_hub"]
    if missing:
        raise SemanticUnavailable(
            f"semantic search needs the extra ({', '.join(missing)} missing): {INSTALL_HINT}"
        )


# --- the model folder ---------------------------------------------------------------


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SemanticUnavailable(f"bad model file {path}: {exc}") from None
    if not isinstance(data, dict):
        raise SemanticUnavailable(f"bad model file {path}: not a JSON object")
    return data


def _safetensors_header(path: Path) -> tuple[dict[str, Any], int]:
    """The JSON header of a safetensors file and where its data starts; checks the file
    is long enough for every tensor the header lists (a cut-off download fails here)."""
    try:
        with path.open("rb") as fh:
            raw = fh.read(8)
            size = int.from_bytes(raw, "little") if len(raw) == 8 else -1
            if not 0 < size <= _HEADER_LIMIT:
                raise SemanticUnavailable(f"bad model file {path}: not a safetensors file")
            header = json.loads(fh.read(size))
        file_size = path.stat().st_size
    except OSError as exc:
        raise SemanticUnavailable(f"cannot read {path}: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise SemanticUnavailable(f"bad model file {path}: unreadable safetensors header") from None
    if not isinstance(header, dict):
        raise SemanticUnavailable(f"bad model file {path}: unreadable safetensors header")
    start = 8 + size
    end = max(
        (int(info["data_offsets"][1]) for name, info in header.items() if name != "__metadata__"),
        default=0,
    )
    if start + end > file_size:
        raise SemanticUnavailable(f"bad model file {path}: truncated ({file_size} of {start + end} bytes)")
    return header, start


def check_model_dir(path: Path) -> None:
    """Raise SemanticUnavailable saying what is missing or wrong in the model folder."""
    path = Path(path)
    if not path.is_dir():
        raise SemanticUnavailable(f"no model in {path}: the folder does not exist")
    missing = [name for name in REQUIRED_FILES if not (path / name).is_file()]
    if missing:
        raise SemanticUnavailable(f"no model in {path}: missing {', '.join(missing)}")
    empty = [name for name in REQUIRED_FILES if (path / name).stat().st_size == 0]
    if empty:
        raise SemanticUnavailable(f"bad model in {path}: empty {', '.join(empty)}")
    config = _read_json(path / "config.json")
    if config.get("model_type") != "bert":
        raise SemanticUnavailable(
            f"unsupported model in {path}: model_type {config.get('model_type')!r}, expected a BERT encoder"
        )
    if config.get("position_embedding_type", "absolute") != "absolute":
        raise SemanticUnavailable(f"unsupported model in {path}: position_embedding_type is not absolute")
    if config.get("hidden_act", "gelu") != "gelu":
        raise SemanticUnavailable(f"unsupported model in {path}: hidden_act is not gelu")
    pooling = path / "1_Pooling" / "config.json"
    if pooling.is_file():
        modes = _read_json(pooling)
        if not modes.get("pooling_mode_mean_tokens", False) or any(
            modes.get(key, False)
            for key in (
                "pooling_mode_cls_token",
                "pooling_mode_max_tokens",
                "pooling_mode_mean_sqrt_len_tokens",
            )
        ):
            raise SemanticUnavailable(f"unsupported model in {path}: its pooling is not mean pooling")
    _safetensors_header(path / WEIGHTS_FILE)


def _weights_sha256(weights: Path) -> str:
    """sha256 of the weights file, cached beside it keyed by size and times."""
    st = weights.stat()
    key = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "ctime_ns": st.st_ctime_ns}
    sidecar = weights.parent / _HASH_SIDECAR
    try:
        cached = json.loads(sidecar.read_text(encoding="utf-8"))
        if isinstance(cached, dict) and all(cached.get(k) == v for k, v in key.items()):
            digest = cached.get("sha256")
            if isinstance(digest, str) and len(digest) == 64:
                return digest
    except (OSError, ValueError):
        pass
    h = hashlib.sha256()
    with weights.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
    digest = h.hexdigest()
    tmp = sidecar.with_name(f"{sidecar.name}.{os.getpid()}.tmp")
    try:  # a read-only model folder just means hashing again next time
        tmp.write_text(json.dumps({**key, "sha256": digest}) + "\n", encoding="utf-8")
        tmp.replace(sidecar)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()
    return digest


def _model_label(config: dict[str, Any]) -> str:
    shape = (config.get("num_hidden_layers"), config.get("hidden_size"), config.get("vocab_size"))
    if shape == (6, 384, 30522):
        return MODEL_LABEL
    return f"bert-l{shape[0]}-h{shape[1]}"


def model_fingerprint(path: Path, max_chunks: int = MAX_CHUNKS) -> str:
    """A short stable id of the vectors this model folder makes with our settings:
    model, weights hash, precision, window length and chunk cap, e.g.
    "minilm-l6-v2:1a2b3c4d5e6f:fp32:256x4". Vectors with different fingerprints must
    never be compared. Cheap: the hash of the weights is cached beside them."""
    path = Path(path)
    check_model_dir(path)
    label = _model_label(_read_json(path / "config.json"))
    digest = _weights_sha256(path / WEIGHTS_FILE)
    return f"{label}:{digest[:12]}:{PRECISION}:{MAX_TOKENS}x{max_chunks}"


# --- the encoder ----------------------------------------------------------------------


def _load_tensors(path: Path) -> dict[str, FloatArray]:
    """Every floating-point tensor of a safetensors file as a float32 array (memory-mapped
    when the file is already float32, so untouched rows are never read)."""
    import numpy as np  # lazy: optional extra (numpy), absent on keyword-only installs

    header, start = _safetensors_header(path)
    data = np.memmap(path, dtype=np.uint8, mode="r")
    tensors: dict[str, FloatArray] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        lo, hi = (start + int(x) for x in info["data_offsets"])
        shape = tuple(int(x) for x in info["shape"])
        raw = data[lo:hi]
        kind = info["dtype"]
        if kind == "F32":
            arr = raw.view("<f4")
        elif kind == "F16":
            arr = raw.view("<f2").astype(np.float32)
        elif kind == "BF16":
            arr = (raw.view("<u2").astype(np.uint32) << 16).view(np.float32)
        elif kind == "F64":
            arr = raw.view("<f8").astype(np.float32)
        else:
            continue  # integer buffers such as position_ids
        tensors[name.removeprefix("bert.")] = arr.reshape(shape)
    return tensors


# GELU as BERT defines it, x * Phi(x) with the exact normal CDF. numpy has no erf, so
# Phi comes from Abramowitz & Stegun 7.1.26 (absolute error below 1.5e-7, under float32's
# own rounding here): for z = |x| / sqrt(2), erfc(z) = poly(t) * exp(-z^2) with
# t = 1 / (1 + p z). Then x * Phi(x) = x/2 + |x| * (1/2 - erfc(z)/2) for either sign.
_ERF_P = 0.3275911 / math.sqrt(2)  # p, with the 1/sqrt(2) folded in
_ERF_A = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)


def _gelu(x: FloatArray, scratch: tuple[FloatArray, FloatArray, FloatArray]) -> FloatArray:
    """GELU of `x`, in place; `scratch` is three arrays of x's shape (no allocation: a
    fresh temporary of this size costs more in page faults than the arithmetic)."""
    import numpy as np  # lazy: optional extra (numpy), absent on keyword-only installs

    absx, t, poly = scratch
    np.abs(x, out=absx)
    np.multiply(absx, np.float32(_ERF_P), out=t)
    t += np.float32(1.0)
    np.divide(np.float32(1.0), t, out=t)
    np.multiply(t, np.float32(0.5 * _ERF_A[4]), out=poly)
    for coefficient in _ERF_A[3::-1]:
        poly += np.float32(0.5 * coefficient)
        poly *= t
    np.square(absx, out=t)
    t *= np.float32(-0.5)
    np.exp(t, out=t)
    poly *= t  # erfc(z) / 2
    np.subtract(np.float32(0.5), poly, out=poly)
    poly *= absx
    x *= np.float32(0.5)
    x += poly
    return x


def _layer_norm(x: FloatArray, weight: FloatArray, bias: FloatArray, eps: float) -> FloatArray:
    """Layer norm of the rows of `x`, in place. The row means come from a matrix-vector
    product and the variances from einsum: no temporary the size of `x` (a third less time
    than numpy's mean and square)."""
    import numpy as np  # lazy: optional extra (numpy), absent on keyword-only installs

    width = x.shape[-1]
    x -= x @ np.full((width, 1), 1.0 / width, dtype=np.float32)
    scale = np.einsum("ij,ij->i", x, x)[:, None]
    scale *= np.float32(1.0 / width)
    scale += np.float32(eps)
    np.sqrt(scale, out=scale)
    np.divide(np.float32(1.0), scale, out=scale)
    x *= scale
    x *= weight
    x += bias
    return x


# Attention runs its softmax without first subtracting each row's largest score when the
# sums of the exponentials show that nothing overflowed or vanished (then the result is
# the same up to rounding); otherwise the window is done again the careful way.
_SOFTMAX_SAFE = (1e-30, 1e30)


def _attend(qkv: FloatArray, out: FloatArray, heads: int) -> None:
    """Self-attention of one window: `qkv` (n, 3 * dim) holds its queries (biased and
    scaled), keys and values; the mixed values go to `out` (n, dim). The keys' bias is
    left out (it adds the same number to a query's every score, which softmax ignores) and
    the values' bias is folded into the output projection's (the weights sum to 1)."""
    import numpy as np  # lazy: optional extra (numpy), absent on keyword-only installs

    n, dim = out.shape
    part = qkv.reshape(n, 3, heads, dim // heads)
    q = part[:, 0].transpose(1, 0, 2)  # heads, n, size: views, matmul reads them in place
    k_t = part[:, 1].transpose(1, 2, 0)  # heads, size, n
    v = part[:, 2].transpose(1, 0, 2)  # heads, n, size
    scores = np.matmul(q, k_t)
    with np.errstate(over="ignore", under="ignore"):
        np.exp(scores, out=scores)
        sums = scores.sum(axis=-1, keepdims=True)
        if not _SOFTMAX_SAFE[0] < float(sums.min()) <= float(sums.max()) < _SOFTMAX_SAFE[1]:
            np.matmul(q, k_t, out=scores)
            scores -= scores.max(axis=-1, keepdims=True)
            np.exp(scores, out=scores)
            scores.sum(axis=-1, keepdims=True, out=sums)
    mixed = out.reshape(n, heads, dim // heads).transpose(1, 0, 2)
    np.matmul(scores, v, out=mixed)
    mixed /= sums


class _Layer:
    # The arrays built from the checkpoint's (transposed, concatenated, scaled), in the order
    # the prepared-weights file holds them; the rest are views of the checkpoint itself.
    PREPARED = ("qkv_w", "qkv_b", "out_w", "up_w", "down_w")

    def __init__(
        self,
        t: dict[str, FloatArray],
        prefix: str,
        scale: float,
        prepared: dict[str, FloatArray] | None = None,
    ) -> None:
        import numpy as np  # lazy: optional extra (numpy), absent on keyword-only installs

        def get(name: str) -> FloatArray:
            return t[f"{prefix}.{name}"]

        if prepared is not None:
            self.qkv_w, self.qkv_b = prepared["qkv_w"], prepared["qkv_b"]
            self.out_w, self.up_w, self.down_w = prepared["out_w"], prepared["up_w"], prepared["down_w"]
        else:
            # Query, key and value in one matrix; the 1/sqrt(head size) folded into the query.
            self.qkv_w = np.ascontiguousarray(
                np.concatenate(
                    [
                        get("attention.self.query.weight") * np.float32(scale),
                        get("attention.self.key.weight"),
                        get("attention.self.value.weight"),
                    ]
                ).T
            )
            self.qkv_b = np.concatenate(
                [
                    get("attention.self.query.bias") * np.float32(scale),
                    get("attention.self.key.bias"),
                    get("attention.self.value.bias"),
                ]
            )
            self.out_w = np.ascontiguousarray(get("attention.output.dense.weight").T)
            self.up_w = np.ascontiguousarray(get("intermediate.dense.weight").T)
            self.down_w = np.ascontiguousarray(get("output.dense.weight").T)
        dim = self.out_w.shape[0]
        # Only the queries' bias is added; the values' passes through attention unchanged
        # (its weights sum to 1), so it joins the output projection's (see _attend).
        self.q_b = np.asarray(self.qkv_b[:dim])
        self.out_b = np.asarray(get("attention.output.dense.bias")) + self.qkv_b[2 * dim :] @ self.out_w
        self.ln1_w = np.asarray(get("attention.output.LayerNorm.weight"))
        self.ln1_b = np.asarray(get("attention.output.LayerNorm.bias"))
        self.up_b = np.asarray(get("intermediate.dense.bias"))
        self.down_b = np.asarray(get("output.dense.bias"))
        self.ln2_w = np.asarray(get("output.LayerNorm.weight"))
        self.ln2_b = np.asarray(get("output.LayerNorm.bias"))


def _prepared_shapes(dim: int, inner: int) -> dict[str, tuple[int, ...]]:
    return {
        "qkv_w": (dim, 3 * dim),
        "qkv_b": (3 * dim,),
        "out_w": (dim, dim),
        "up_w": (dim, inner),
        "down_w": (inner, dim),
    }


def _load_layers(
    t: dict[str, FloatArray], weights: Path, digest: str, count: int, dim: int, inner: int, scale: float
) -> list[_Layer]:
    """The encoder's layers, their built matrices memory-mapped from a prepared-weights file
    beside the checkpoint (written on the first load, named by the checkpoint's hash), so a
    load copies nothing: building them costs a short-lived process such as a hook ~30 ms.
    A missing, short or unwritable file just means building them here."""
    import numpy as np  # lazy: optional extra (numpy), absent on keyword-only installs

    shapes = _prepared_shapes(dim, inner)
    per_layer = sum(math.prod(shape) for shape in shapes.values())
    head = round(scale**-2)  # the scale folded into the query weights is 1/sqrt(head size)
    path = weights.parent / f"{_PREPARED_PREFIX}{digest[:16]}.{dim}x{inner}x{count}h{head}.f32"
    try:
        if path.stat().st_size == per_layer * count * 4:
            data = np.memmap(path, dtype="<f4", mode="r")
            layers, at = [], 0
            for i in range(count):
                prepared = {}
                for name, shape in shapes.items():
                    size = math.prod(shape)
                    prepared[name] = data[at : at + size].reshape(shape)
                    at += size
                layers.append(_Layer(t, f"encoder.layer.{i}", scale, prepared))
            return layers
    except OSError:
        pass
    layers = [_Layer(t, f"encoder.layer.{i}", scale) for i in range(count)]
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:  # a read-only model folder just means building them again next time
        with tmp.open("wb") as fh:
            for layer in layers:
                for name in _Layer.PREPARED:
                    fh.write(np.ascontiguousarray(getattr(layer, name), dtype="<f4").tobytes())
        tmp.replace(path)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()
    return layers


# --- the optional faster runtime ----------------------------------------------------------
#
# When onnxruntime is installed, bulk embedding (semantic enable and update) runs the same
# encoder through it: its matrix kernels use the widest vector instructions the processor
# has (numpy's OpenBLAS may be held to narrower ones, e.g. by OPENBLAS_CORETYPE) and it
# fuses layer norm and GELU, about twice the notes per CPU-second here. The graph is
# written here from the weights already loaded, so nothing is downloaded and no ONNX file
# is kept; its vectors agree with the numpy pass to ~2e-7 (the fingerprint stays the same,
# and tests/search/test_embed.py checks both against the reference). Queries and short runs stay
# on numpy (see _ONNX_AFTER_WINDOWS).

RUNTIME_ENV = "ANAMNESIS_EMBED_RUNTIME"  # "numpy" keeps every call on numpy
# Making the session costs ~0.15 s of CPU and ~180 MB of memory (onnxruntime's copy of the
# layers' weights, and the same again packed for its kernels): it is made once an embedder
# has had this many windows in calls of more than one (a long `semantic enable` or
# `update`), never for a short update or for queries.
_ONNX_AFTER_WINDOWS = 64
_ONNX_OPSET = 17  # LayerNormalization's first opset
_ONNX_FLOAT, _ONNX_INT64 = 1, 7  # TensorProto data types
_ATTR_FLOAT, _ATTR_INT, _ATTR_INTS = 1, 2, 7  # AttributeProto types


def onnx_runtime_available() -> bool:
    """True when onnxruntime is installed and not switched off by ANAMNESIS_EMBED_RUNTIME."""
    return os.environ.get(RUNTIME_ENV, "").strip().lower() != "numpy" and _installed("onnxruntime")


# A few protobuf writers: the ONNX model is a protobuf message, and these few fields are
# all the graph needs (the onnx package would be one more dependency for them).
def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        out.append(low | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _pb(number: int, payload: bytes | str | int | float) -> bytes:
    """One protobuf field: an int as a varint, a float as 32 bits, text and bytes by length."""
    if isinstance(payload, bool | int):
        return _varint(number << 3) + _varint(int(payload))
    if isinstance(payload, float):
        import struct  # lazy: only the ONNX graph writes floats

        return _varint(number << 3 | 5) + struct.pack("<f", payload)
    data = payload.encode() if isinstance(payload, str) else payload
    return _varint(number << 3 | 2) + _varint(len(data)) + data


class _OnnxGraph:
    """Writes the encoder as an ONNX graph: input `x` (n, dim), a window's rows after the
    embedding layer (numpy does that lookup: the 47 MB word table stays out of the graph);
    output (1, dim), the mean of its token vectors. The weights are copied once, into the
    model's bytes."""

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self.nodes: list[bytes] = []
        self.initializers: list[bytes | memoryview] = []  # headers and the weights' buffers
        self.size = 0

    def tensor(self, name: str, array: Any) -> str:
        import numpy as np  # lazy: optional extra (numpy), absent on keyword-only installs

        kind = _ONNX_INT64 if array.dtype == np.int64 else _ONNX_FLOAT
        data = np.ascontiguousarray(array, dtype="<i8" if kind == _ONNX_INT64 else "<f4").data.cast("B")
        head = b"".join(_pb(1, int(d)) for d in array.shape) + _pb(2, kind) + _pb(8, name)
        head += _varint(9 << 3 | 2) + _varint(len(data))
        field = _varint(5 << 3 | 2) + _varint(len(head) + len(data))
        self.initializers += [field + head, data]
        self.size += len(field) + len(head) + len(data)
        return name

    def op(self, op_type: str, *inputs: str, **attributes: float | int | list[int]) -> str:
        out = f"t{len(self.nodes)}"
        attrs = b""
        for key, value in attributes.items():
            if isinstance(value, list):
                body = _pb(1, key) + b"".join(_pb(8, v) for v in value) + _pb(20, _ATTR_INTS)
            elif isinstance(value, float):
                body = _pb(1, key) + _pb(2, value) + _pb(20, _ATTR_FLOAT)
            else:
                body = _pb(1, key) + _pb(3, value) + _pb(20, _ATTR_INT)
            attrs += _pb(5, body)
        self.nodes.append(b"".join(_pb(1, i) for i in inputs) + _pb(2, out) + _pb(4, op_type) + attrs)
        return out

    def model(self, output: str) -> bytes:
        def value_info(name: str, dims: tuple[str, ...]) -> bytes:
            shape = b"".join(_pb(1, _pb(2, d) if d != "dim" else _pb(1, self.dim)) for d in dims)
            return _pb(1, name) + _pb(2, _pb(1, _pb(1, _ONNX_FLOAT) + _pb(2, shape)))

        rest = (
            b"".join(_pb(1, node) for node in self.nodes)
            + _pb(2, "encoder")
            + _pb(11, value_info("x", ("n", "dim")))
            + _pb(12, value_info(output, ("one", "dim")))
        )
        head = _pb(1, 8) + _pb(2, "anamnesis") + _pb(8, _pb(1, "") + _pb(2, _ONNX_OPSET))
        graph = _varint(7 << 3 | 2) + _varint(len(rest) + self.size)
        return b"".join([head, graph, rest, *self.initializers])


def _onnx_encoder(embedder: Embedder) -> bytes:
    """The embedder's encoder as an ONNX model, from the weights it has loaded."""
    import numpy as np  # lazy: optional extra (numpy), absent on keyword-only installs

    dim, heads = embedder.dim, embedder._heads
    g = _OnnxGraph(dim)
    split = g.tensor("split", np.array([-1, 3, heads, dim // heads], dtype=np.int64))
    merge = g.tensor("merge", np.array([-1, dim], dtype=np.int64))
    half = g.tensor("half", np.array(0.5, dtype=np.float32))
    unit = g.tensor("unit", np.array(1.0, dtype=np.float32))
    root_two = g.tensor("root_two", np.array(math.sqrt(2.0), dtype=np.float32))
    eps = float(embedder._eps)

    def norm(x: str, weight: Any, bias: Any, name: str) -> str:
        return g.op(
            "LayerNormalization", x, g.tensor(f"{name}.w", weight), g.tensor(f"{name}.b", bias), axis=-1, epsilon=eps
        )

    def dense(x: str, weight: Any, bias: Any, name: str) -> str:
        return g.op("Add", g.op("MatMul", x, g.tensor(f"{name}.w", weight)), g.tensor(f"{name}.b", bias))

    x = "x"
    for i, layer in enumerate(embedder._layers):
        # the same arithmetic as _encode: only the queries' bias, the values' folded into out_b
        qkv_bias = np.concatenate([layer.q_b, np.zeros(2 * dim, dtype=np.float32)])
        qkv = g.op("Transpose", g.op("Reshape", dense(x, layer.qkv_w, qkv_bias, f"{i}.qkv"), split), perm=[1, 2, 0, 3])
        q, k, v = (g.op("Gather", qkv, g.tensor(f"{i}.{part}", np.array(part, dtype=np.int64)), axis=0) for part in range(3))
        scores = g.op("Softmax", g.op("MatMul", q, g.op("Transpose", k, perm=[0, 2, 1])), axis=-1)
        context = g.op("Reshape", g.op("Transpose", g.op("MatMul", scores, v), perm=[1, 0, 2]), merge)
        attn = g.op("Add", dense(context, layer.out_w, layer.out_b, f"{i}.out"), x)
        x = norm(attn, layer.ln1_w, layer.ln1_b, f"{i}.ln1")
        hidden = dense(x, layer.up_w, layer.up_b, f"{i}.up")
        # x * (1 + erf(x / sqrt 2)) * 0.5, in the form onnxruntime fuses into one GELU kernel
        gelu = g.op("Mul", g.op("Mul", hidden, g.op("Add", g.op("Erf", g.op("Div", hidden, root_two)), unit)), half)
        x = norm(g.op("Add", dense(gelu, layer.down_w, layer.down_b, f"{i}.down"), x), layer.ln2_w, layer.ln2_b, f"{i}.ln2")
    return g.model(g.op("ReduceMean", x, axes=[0], keepdims=1))


def _onnx_session(embedder: Embedder) -> Any:
    """An onnxruntime session of the encoder, on one thread (embed() runs one per core)."""
    import onnxruntime  # lazy: optional, only for bulk embedding when installed

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.log_severity_level = 3  # errors only: nothing on a CLI's stderr
    return onnxruntime.InferenceSession(_onnx_encoder(embedder), options, providers=["CPUExecutionProvider"])


class Embedder:
    """A loaded model: embed texts into L2-normalised float32 vectors of `dim` numbers.

    Loading one holds BLAS (OpenBLAS, as numpy's wheels ship it) to a single thread for
    the rest of the process, and embed() spreads its batches over the cores with threads
    of its own instead. The matrix products here are small (a few hundred rows), and
    BLAS's threads made them 3 to 20 times slower on a 2-core machine whose cores are
    shared with other work; they also left the elementwise half of the work on one core.
    The limit is set once and not lifted: switching BLAS between one thread and several
    around each call was itself slow, and wrong when calls overlapped.
    """

    def __init__(self, model_dir: Path, max_chunks: int = MAX_CHUNKS) -> None:
        import numpy as np  # lazy: optional extra (numpy), absent on keyword-only installs
        from tokenizers import Tokenizer  # lazy: optional extra (tokenizers)

        if max_chunks < 1:
            raise ValueError("max_chunks must be at least 1")
        model_dir = Path(model_dir)
        check_model_dir(model_dir)
        config = _read_json(model_dir / "config.json")
        self.model_dir = model_dir
        self.max_chunks = max_chunks
        self.max_tokens = min(MAX_TOKENS, int(config.get("max_position_embeddings", 512)))
        self.fingerprint = model_fingerprint(model_dir, max_chunks)

        try:
            tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        except Exception as exc:
            raise SemanticUnavailable(f"bad model file {model_dir / 'tokenizer.json'}: {exc}") from None
        tokenizer.no_padding()
        tokenizer.no_truncation()
        self._tokenizer = tokenizer
        cls_id, sep_id = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
        if cls_id is None or sep_id is None:
            raise SemanticUnavailable(f"bad model file {model_dir / 'tokenizer.json'}: no [CLS]/[SEP] tokens")
        self._cls, self._sep = cls_id, sep_id
        self._arange = np.arange(int(config.get("max_position_embeddings", 512)), dtype=np.int64)

        try:
            from threadpoolctl import ThreadpoolController  # lazy: optional extra (threadpoolctl)

            self._blas: Any = ThreadpoolController()
        except ImportError:  # without it, BLAS's own threads do the spreading
            self._blas = None
        self._single_threaded_blas()
        self._workers = _cpu_count() if self._blas is not None else 1
        self._bulk = threading.Lock()
        self._onnx: Any = None  # the onnxruntime session, once bulk calls have had enough windows
        self._onnx_tried = False
        self._onnx_lock = threading.Lock()
        self._bulk_windows = 0

        t = _load_tensors(model_dir / WEIGHTS_FILE)
        self.dim = int(config["hidden_size"])
        self._heads = int(config["num_attention_heads"])
        self._eps = float(config.get("layer_norm_eps", 1e-12))
        try:
            self._word = t["embeddings.word_embeddings.weight"]
            self._position = t["embeddings.position_embeddings.weight"]
            self._type0 = np.asarray(t["embeddings.token_type_embeddings.weight"][0])
            self._ln_w = np.asarray(t["embeddings.LayerNorm.weight"])
            self._ln_b = np.asarray(t["embeddings.LayerNorm.bias"])
            scale = 1.0 / math.sqrt(self.dim // self._heads)
            self._layers = _load_layers(
                t,
                model_dir / WEIGHTS_FILE,
                _weights_sha256(model_dir / WEIGHTS_FILE),
                int(config["num_hidden_layers"]),
                self.dim,
                int(config["intermediate_size"]),
                scale,
            )
        except KeyError as exc:
            raise SemanticUnavailable(f"bad model file {model_dir / WEIGHTS_FILE}: no tensor {exc}") from None

    # One batch of windows, each a list of token ids with [CLS] and [SEP]: their
    # mean-pooled token vectors (not normalised). The windows' tokens are packed into one
    # matrix with no padding: the dense layers run on every real token at once, attention
    # runs window by window, and the feed-forward block runs in row blocks that stay in
    # the processor's cache.
    def _encode(self, windows: Sequence[Sequence[int]]) -> FloatArray:
        import numpy as np  # lazy: optional extra (numpy), absent on keyword-only installs

        lengths = [len(w) for w in windows]
        offsets = [0]
        for n in lengths:
            offsets.append(offsets[-1] + n)
        total, dim = offsets[-1], self.dim
        heads = self._heads
        x = self._embedded(windows, lengths, total)
        # Buffers made once a call: a fresh temporary of this size costs more in page
        # faults than the arithmetic done in it.
        qkv = np.empty((total, 3 * dim), dtype=np.float32)
        context = np.empty((total, dim), dtype=np.float32)
        following = np.empty((total, dim), dtype=np.float32)
        inner = self._layers[0].up_w.shape[1]
        block = min(_ROW_BLOCK, total)
        attn_buf = np.empty((block, dim), dtype=np.float32)
        hidden_buf = np.empty((block, inner), dtype=np.float32)
        scratch = (np.empty_like(hidden_buf), np.empty_like(hidden_buf), np.empty_like(hidden_buf))
        for layer in self._layers:
            np.matmul(x, layer.qkv_w, out=qkv)
            qkv[:, :dim] += layer.q_b
            for start, end in itertools.pairwise(offsets):
                _attend(qkv[start:end], context[start:end], heads)
            # The rest of the layer works row by row: done in blocks, each block's numbers
            # stay in the processor's cache from one step to the next.
            for row in range(0, total, _ROW_BLOCK):
                rows = min(_ROW_BLOCK, total - row)
                attn = attn_buf[:rows]
                np.matmul(context[row : row + rows], layer.out_w, out=attn)
                attn += layer.out_b
                attn += x[row : row + rows]
                _layer_norm(attn, layer.ln1_w, layer.ln1_b, self._eps)
                hidden = hidden_buf[:rows]
                np.matmul(attn, layer.up_w, out=hidden)
                hidden += layer.up_b
                _gelu(hidden, (scratch[0][:rows], scratch[1][:rows], scratch[2][:rows]))
                out = following[row : row + rows]
                np.matmul(hidden, layer.down_w, out=out)
                out += layer.down_b
                out += attn
                _layer_norm(out, layer.ln2_w, layer.ln2_b, self._eps)
            x, following = following, x
        summed = np.add.reduceat(x, offsets[:-1], axis=0)
        pooled: FloatArray = np.divide(
            summed, np.asarray(lengths, dtype=np.float32)[:, None], dtype=np.float32
        )
        return pooled

    def _embedded(self, windows: Sequence[Sequence[int]], lengths: list[int], total: int) -> FloatArray:
        """The embedding layer: each token's word, position and type vectors, summed and
        normalised, the windows' rows one after the other."""
        import numpy as np  # lazy: optional extra (numpy), absent on keyword-only installs

        ids = np.fromiter((i for w in windows for i in w), dtype=np.int64, count=total)
        positions = np.concatenate([self._arange[:n] for n in lengths])
        x = self._word[ids]
        x += self._position[positions]
        x += self._type0
        return _layer_norm(x, self._ln_w, self._ln_b, self._eps)

    def _windows(self, texts: Sequence[str]) -> list[list[list[int]]]:
        """Each text's token windows, [CLS] and [SEP] included."""
        inner = self.max_tokens - 2
        # Prose runs about 4 characters a token; cutting at 100 a token spares tokenising
        # huge texts and changes the windows only of freaks (words over 100 characters
        # long each become one [UNK] token).
        limit = inner * self.max_chunks * 101
        encodings = self._tokenizer.encode_batch([t[:limit] for t in texts], add_special_tokens=False)
        out = []
        for enc in encodings:
            ids = enc.ids
            pieces = [ids[i : i + inner] for i in range(0, len(ids), inner)][: self.max_chunks] or [[]]
            out.append([[self._cls, *piece, self._sep] for piece in pieces])
        return out

    def embed(self, texts: Sequence[str], batch_size: int = 16) -> FloatArray:
        """Vectors of `texts`: float32, shape (len(texts), dim), each row L2-normalised.

        `batch_size` is the most windows (256-token pieces of text) run through the model
        at once; batches are spread over the machine's cores by threads. Safe to call from
        several threads: bulk calls take turns, a query never waits."""
        import numpy as np  # lazy: optional extra (numpy), absent on keyword-only installs

        if isinstance(texts, str):
            raise TypeError("embed takes a sequence of texts; use embed_query for one")
        result = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return result
        flat: list[tuple[int, list[int]]] = [
            (index, window) for index, windows in enumerate(self._windows(texts)) for window in windows
        ]
        workers = max(1, min(self._workers, len(flat)))
        batches = _balanced_batches(flat, workers, max(1, int(batch_size)))

        session = self._onnx_session(len(flat))

        def run(group: list[tuple[int, list[int]]]) -> FloatArray:
            if session is not None:  # window by window: no padding, no mask
                return np.concatenate(
                    [
                        session.run(None, {"x": self._embedded([window], [len(window)], len(window))})[0]
                        for _, window in group
                    ]
                )
            return self._encode([window for _, window in group])

        self._single_threaded_blas()
        if workers == 1 or len(batches) == 1:
            pooled_batches = [run(group) for group in batches]
        else:
            # Bulk calls from several threads take turns (together they would only
            # fight over the cores and the GIL); a one-batch call, a query, never waits.
            with self._bulk, ThreadPoolExecutor(max_workers=workers, thread_name_prefix="embed") as pool:
                pooled_batches = list(pool.map(run, batches))

        sums = np.zeros((len(texts), self.dim), dtype=np.float64)
        for group, pooled32 in zip(batches, pooled_batches, strict=True):
            pooled = pooled32.astype(np.float64)
            pooled /= np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
            for (index, window), vector in zip(group, pooled, strict=True):
                sums[index] += len(window) * vector
        sums /= np.maximum(np.linalg.norm(sums, axis=1, keepdims=True), 1e-12)
        result[:] = sums
        return result

    def _onnx_session(self, windows: int) -> Any:
        """The onnxruntime session once bulk calls have had _ONNX_AFTER_WINDOWS windows, else
        None (also when it is not installed, switched off, or failed: numpy does the work
        then, with the same vectors). A query never makes it, nor waits for it."""
        if self._onnx_tried or windows < 2:
            return self._onnx
        with self._onnx_lock:
            self._bulk_windows += windows
            if self._bulk_windows >= _ONNX_AFTER_WINDOWS and not self._onnx_tried:
                if onnx_runtime_available():
                    try:
                        self._onnx = _onnx_session(self)
                    except Exception:  # a broken or too old onnxruntime: numpy will do
                        self._onnx = None
                self._onnx_tried = True
        return self._onnx

    def _single_threaded_blas(self) -> None:
        """Hold BLAS to one thread, for the whole process (see the class's docstring)."""
        if self._blas is not None:
            self._blas.limit(limits=1, user_api="blas")

    def embed_query(self, text: str) -> FloatArray:
        """The vector of one text, shape (dim,)."""
        vector: FloatArray = self.embed([text])[0]
        return vector


def _window_cost(length: int) -> int:
    """Relative cost of a window of `length` tokens: the dense layers cost the same for
    every token (~21 MFLOP for this model), attention grows with the window's length
    (~9 kFLOP a token per token of the window)."""
    return length * (2300 + length)


def _balanced_batches(
    flat: list[tuple[int, list[int]]], workers: int, most: int
) -> list[list[tuple[int, list[int]]]]:
    """The windows in batches of at most `most`, their count a multiple of `workers` where
    the windows allow, and each batch about as costly as the others: the threads finish
    together instead of one waiting for the batch of all the long windows. Longest first,
    each window to the cheapest batch with room (windows of equal length stay in order)."""
    count = max(1, -(-len(flat) // most))
    count = min(len(flat), -(-count // workers) * workers)
    room = -(-len(flat) // count)
    batches: list[list[tuple[int, list[int]]]] = [[] for _ in range(count)]
    costs = [0] * count
    for item in sorted(flat, key=lambda item: -len(item[1])):
        slot = min((i for i in range(count) if len(batches[i]) < room), key=costs.__getitem__)
        batches[slot].append(item)
        costs[slot] += _window_cost(len(item[1]))
    # The costliest batches first, so no thread is left with a long one at the end.
    order = sorted(range(count), key=lambda i: -costs[i])
    return [batches[i] for i in order if batches[i]]


def _cpu_count() -> int:
    """Cores this process may run on (ANAMNESIS_EMBED_THREADS overrides)."""
    forced = os.environ.get("ANAMNESIS_EMBED_THREADS", "")
    if forced.isdigit() and int(forced) > 0:
        return int(forced)
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def load_embedder(model_dir: Path, max_chunks: int = MAX_CHUNKS) -> Embedder:
    """Load the model in `model_dir`; SemanticUnavailable with a one-line reason when the
    extra is not installed or the folder is not a usable model."""
    _require_dependencies()
    return Embedder(Path(model_dir), max_chunks)


# --- getting the model --------------------------------------------------------------


def download_model(dest: Path, progress: Callable[[int, int], None] | None = None) -> Path:
    """Fetch all-MiniLM-L6-v2 from the public model hub into `dest` (about 90 MB) and
    return `dest`. `progress(done_bytes, total_bytes)` is called as bytes arrive. Raises
    SemanticUnavailable with one line when the hub cannot be reached."""
    _require_dependencies(download=True)
    import huggingface_hub  # lazy: optional extra (huggingface_hub), only to download the model
    from huggingface_hub import get_hf_file_metadata, hf_hub_download, hf_hub_url  # lazy: optional extra

    dest = Path(dest)
    if huggingface_hub.constants.HF_HUB_OFFLINE:
        raise SemanticUnavailable(
            f"cannot download the model from the model hub: HF_HUB_OFFLINE is set (put a model folder in {dest} by hand)"
        )
    try:
        sizes = {name: get_hf_file_metadata(hf_hub_url(HUB_REPO, name)).size or 0 for name in HUB_FILES}
    except Exception as exc:
        raise SemanticUnavailable(_download_error(exc, dest)) from None
    total = sum(sizes.values())
    done = 0
    last = [-1]

    def report(file_bytes: int) -> None:
        now = min(total, done + file_bytes)
        if progress is not None and now != last[0]:
            last[0] = now
            progress(now, total)

    bar = _progress_bar_class(report)
    try:
        dest.mkdir(parents=True, exist_ok=True)
        report(0)
        for name in HUB_FILES:
            if bar is not None and _accepts(hf_hub_download, "tqdm_class"):
                bar.furthest = 0
                hf_hub_download(HUB_REPO, name, local_dir=dest, tqdm_class=bar)
            else:
                hf_hub_download(HUB_REPO, name, local_dir=dest)
            done += sizes[name]
            report(0)
    except OSError as exc:
        if isinstance(exc, ConnectionError | TimeoutError) or not exc.strerror:
            raise SemanticUnavailable(_download_error(exc, dest)) from None
        raise SemanticUnavailable(f"cannot write the model to {dest}: {exc.strerror}") from None
    except Exception as exc:
        raise SemanticUnavailable(_download_error(exc, dest)) from None
    check_model_dir(dest)
    return dest


def _download_error(exc: BaseException, dest: Path) -> str:
    reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    if len(reason) > 160:
        reason = reason[:157] + "..."
    return (
        f"cannot download the model from the model hub ({type(exc).__name__}: {reason}); "
        f"check the network, or put a model folder in {dest} by hand"
    )


def _accepts(func: Callable[..., Any], parameter: str) -> bool:
    try:
        return parameter in inspect.signature(func).parameters
    except (TypeError, ValueError):
        return False


def _progress_bar_class(report: Callable[[int], None]) -> type[Any] | None:
    """A silent tqdm class that passes the bytes of the file being downloaded to `report`.

    huggingface_hub may open more than one bar per file (network transfer, then writing to
    disk), each counting the same bytes: the furthest of them is the file's progress. Set
    the class's `furthest` to 0 before each file."""
    try:
        from tqdm.auto import tqdm  # lazy: optional (tqdm comes with huggingface_hub)
    except ImportError:
        return None

    class SilentBar(tqdm):  # type: ignore[misc]
        furthest = 0

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs["disable"] = True
            kwargs.pop("name", None)
            counts_bytes = kwargs.get("unit", "it") == "B"
            super().__init__(*args, **kwargs)
            # Not a byte counter (a count of files, say): ignored.
            self.counted = int(kwargs.get("initial", 0) or 0) if counts_bytes else -1

        def update(self, n: float | None = 1) -> bool | None:
            if self.counted >= 0 and n:
                self.counted += int(n)
                if self.counted > SilentBar.furthest:
                    SilentBar.furthest = self.counted
                    report(self.counted)
            result: bool | None = super().update(n)
            return result

    return SilentBar
