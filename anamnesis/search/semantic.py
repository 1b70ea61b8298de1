"""Optional local semantic search: note vectors beside the FTS5 index.

Off by default and never a core dependency: `anamnesis semantic enable`
turns it on for this machine (settings.json, key "semantic") once the extra
is installed and a model folder is present. Vectors live in index.db, per
machine, never synced; each row records the note's content hash and the
model's fingerprint, so only changed notes are embedded again and a new
model re-embeds everything.

Embedding takes minutes for thousands of notes on a laptop CPU, so nothing
on the user's path waits for it: `start_background_update` starts a detached
`anamnesis semantic update` (one at a time, under state/embed.lock) that
embeds in small committed batches — resumable after any kill — while search
ranks notes without a vector by keywords alone. Only `anamnesis reindex` and
`anamnesis semantic update` wait, showing progress.

Loading the model costs a short-lived process (a hook, one `search`) far more
than the query itself: importing numpy, reading the tokenizer and the weights.
A running `anamnesis watch` keeps them loaded and answers similarity questions
on a unix socket in state/ (`anamnesis.search.semantic_server`); `similarity` asks it
first, with a strict deadline, and loads the model itself only when no server
answers (none running, another model, too slow).
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import json
import os
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from anamnesis.base.errors import AnamnesisError, ExitCode
from anamnesis.base.settings import load_settings, save_settings, update_section
from anamnesis.search.index import Index, open_index

if TYPE_CHECKING:
    import numpy

    from anamnesis.base.paths import Store
    from anamnesis.search.catalog import Catalog
    from anamnesis.search.embed import Embedder
    from anamnesis.search.ranking import Filters

SETTINGS_KEY = "semantic"
SOCKET_NAME = "semantic.sock"
ASK_TIMEOUT = 1.0  # seconds a caller waits for the query server before loading the model itself
REPLY_LIMIT = 4 << 20  # a longer reply is not one of ours
BATCH = 32
MAX_EMBED_CHARS = 4000  # title, tags and the start of the body: what the model sees (~256 tokens each chunk)


class SemanticError(AnamnesisError):
    """Semantic search cannot be turned on or used here (extra missing, no model)."""

    exit_code = ExitCode.SEMANTIC_UNAVAILABLE


def settings_of(store: Store) -> dict[str, Any]:
    """This machine's semantic settings: {"enabled": bool, "model_dir": str | None}."""
    try:
        raw = load_settings(store).get(SETTINGS_KEY)
    except AnamnesisError:
        return {"enabled": False, "model_dir": None}
    raw = raw if isinstance(raw, dict) else {}
    return {"enabled": bool(raw.get("enabled")), "model_dir": raw.get("model_dir") or None}


def default_model_dir(store: Store) -> Path:
    """Where `semantic enable` puts a downloaded model: machine-local, outside memory/."""
    return store.home / "models" / "all-MiniLM-L6-v2"


def unavailable_reason(store: Store) -> str | None:
    """Why semantic search is not in use here, in one line; None when it is."""
    # lazy: embed (model code, thread pool) stays off search and the hooks while semantic search is off
    from anamnesis.search.embed import (
        INSTALL_HINT,
        SemanticUnavailable,
        check_model_dir,
        missing_dependencies,
    )

    conf = settings_of(store)
    if not conf["enabled"]:
        return "off (keyword search only; `anamnesis semantic enable` turns it on)"
    missing = missing_dependencies()
    if missing:
        return (
            f"enabled, but {', '.join(missing)} not installed: keyword search only ({INSTALL_HINT})"
        )
    try:
        check_model_dir(Path(conf["model_dir"] or default_model_dir(store)))
    except SemanticUnavailable as exc:
        return f"enabled, but {exc}: keyword search only"
    return None


_ENGINES: dict[str, SemanticEngine] = {}
_ENGINES_LOCK = threading.Lock()


def engine_for(store: Store) -> SemanticEngine | None:
    """The engine for this store when semantic search is on and usable, else None (cached per process)."""
    conf = settings_of(store)
    if not conf["enabled"]:
        return None
    if unavailable_reason(store) is not None:
        return None
    model_dir = str(Path(conf["model_dir"] or default_model_dir(store)).resolve())
    with _ENGINES_LOCK:
        engine = _ENGINES.get(model_dir)
        if engine is None:
            engine = SemanticEngine(Path(model_dir))
            _ENGINES[model_dir] = engine
    return engine


@dataclass
class _Vectors:
    generation: str
    rowids: list[int]
    matrix: numpy.ndarray
    rowid_array: numpy.ndarray
    positions: dict[int, int]


class SemanticEngine:
    """A loaded model and a cache of the index's vectors (reloaded when the index changes)."""

    def __init__(self, model_dir: Path) -> None:
        # lazy: embed (model code, thread pool) stays off search and the hooks while semantic search is off
        from anamnesis.search.embed import model_fingerprint

        self.model_dir = model_dir
        self.fingerprint = model_fingerprint(model_dir)
        self._embedder: Embedder | None = None
        self._vectors: dict[str, _Vectors] = {}
        self._lock = threading.Lock()

    @property
    def embedder(self) -> Embedder:
        # lazy: embed (model code, thread pool) stays off search and the hooks while semantic search is off
        from anamnesis.search.embed import SemanticUnavailable, load_embedder

        with self._lock:
            if self._embedder is None:
                try:
                    self._embedder = load_embedder(self.model_dir)
                except SemanticUnavailable as exc:
                    raise SemanticError(str(exc)) from None
            return self._embedder

    def vectors(self, index: Catalog) -> _Vectors:
        """The up-to-date vectors of the index (notes whose text changed since are left out)."""
        import numpy as np  # lazy: optional extra (numpy), absent on keyword-only installs

        generation = index.generation()
        key = str(index.store.index_path)
        cached = self._vectors.get(key)
        if cached is not None and cached.generation == generation:
            return cached
        rows = index.vectors(self.fingerprint)
        dim = self.embedder.dim
        if rows:
            matrix = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float16).reshape(len(rows), dim)
            matrix = matrix.astype(np.float32)
        else:
            matrix = np.zeros((0, dim), dtype=np.float32)
        rowids = [r[0] for r in rows]
        cached = _Vectors(
            generation,
            rowids,
            matrix,
            np.asarray(rowids, dtype=np.int64),
            {r: i for i, r in enumerate(rowids)},
        )
        self._vectors[key] = cached
        return cached

    def similarity(
        self, index: Catalog, text: str, filters: Filters, pool: int, also: set[int] | None = None
    ) -> dict[int, float]:
        """Cosine similarity of `text` to the `pool` closest notes passing `filters`, and to the
        notes in `also` (the keyword candidates a hybrid ranking fuses with).

        Asked of a running query server when there is one (no model load here), else computed
        in this process."""
        answer = ask_server(index.store, self.fingerprint, text, filters, pool, also)
        if answer is not None:
            return answer
        return self.local_similarity(index, text, filters, pool, also)

    def local_similarity(
        self, index: Catalog, text: str, filters: Filters, pool: int, also: set[int] | None = None
    ) -> dict[int, float]:
        """`similarity` computed in this process (loads the model and the vectors once)."""
        import numpy as np  # lazy: optional extra (numpy), absent on keyword-only installs

        vectors = self.vectors(index)
        if not vectors.rowids:
            return {}
        cosines = vectors.matrix @ self.embedder.embed_query(text)
        if filters.sql()[0]:
            allowed = index.passing(filters)
            cosines = np.where(np.isin(vectors.rowid_array, allowed), cosines, -np.inf)
        count = min(pool, len(cosines))
        best = np.argpartition(-cosines, count - 1)[:count]
        out = {vectors.rowids[i]: float(cosines[i]) for i in best.tolist() if cosines[i] > -np.inf}
        for rowid in also or ():
            position = vectors.positions.get(rowid)
            if position is not None and rowid not in out and cosines[position] > -np.inf:
                out[rowid] = float(cosines[position])
        return out

    def embed_notes(self, texts: list[str]) -> bytes:
        """Vectors of these note texts as consecutive float16 rows."""
        import numpy as np  # lazy: optional extra (numpy), absent on keyword-only installs

        matrix = self.embedder.embed(texts)
        return bytes(np.asarray(matrix, dtype=np.float16).tobytes())


def socket_path(store: Store) -> Path:
    """Where a query server for this store listens: state/semantic.sock, or, when that path
    is too long for a unix socket address (104 bytes on macOS), a name derived from the
    store's folder in a private folder of this user's under the temp folder."""
    path = store.state_dir / SOCKET_NAME
    if len(os.fsencode(path)) < 100:
        return path
    digest = hashlib.sha256(os.fsencode(store.home.resolve())).hexdigest()[:20]
    return Path(tempfile.gettempdir()) / f"anamnesis-{os.getuid()}" / f"{digest}.sock"


def socket_usable(path: Path, *, create: bool = False) -> bool:
    """True when `path` fits a unix socket address and its folder is this user's alone
    (made so with `create`; not writable by everyone): nobody else can listen there."""
    if len(os.fsencode(path)) >= 104:
        return False
    folder = path.parent
    try:
        if create:
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = folder.stat()
    except OSError:
        return False
    return st.st_uid == os.getuid() and not st.st_mode & 0o002


def ask_server(
    store: Store, fingerprint: str, text: str, filters: Filters, pool: int, also: set[int] | None
) -> dict[int, float] | None:
    """The query server's answer to a `similarity` question, or None when none answers in
    time or it runs another model. Never raises, never waits past ASK_TIMEOUT: a hook
    that asks stays fast even when the server hangs."""
    path = socket_path(store)
    if not socket_usable(path) or not path.exists():
        return None
    request = {
        "fingerprint": fingerprint,
        "index": str(store.index_path),
        "text": text,
        "filters": dataclasses.asdict(filters),
        "pool": int(pool),
        "also": sorted(also or ()),
    }
    deadline = time.monotonic() + ASK_TIMEOUT
    chunks: list[bytes] = []
    received = 0
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(ASK_TIMEOUT)
            sock.connect(str(path))
            sock.sendall(json.dumps(request).encode("utf-8") + b"\n")
            sock.shutdown(socket.SHUT_WR)
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                sock.settimeout(left)
                chunk = sock.recv(65536)
                if not chunk:
                    break
                received += len(chunk)
                if received > REPLY_LIMIT:
                    return None
                chunks.append(chunk)
        reply = json.loads(b"".join(chunks))
        if not isinstance(reply, dict) or reply.get("fingerprint") != fingerprint:
            return None
        return {int(rowid): float(cosine) for rowid, cosine in reply["cosines"]}
    except (OSError, ValueError, TypeError, KeyError):
        return None


def note_text(title: str, tags: str, body: str) -> str:
    """What is embedded for a note: its title, tags and the start of its body."""
    head = title.strip()
    if tags.strip():
        head += f"\n{tags.strip()}"
    return f"{head}\n{body.strip()}"[:MAX_EMBED_CHARS]


def pending(index: Index, fingerprint: str) -> list[int]:
    """Rowids of notes with no vector from this model for their current text."""
    return index.without_vector(fingerprint)


@dataclass
class Coverage:
    """How many notes have a current vector."""

    embedded: int
    total: int

    @property
    def pending(self) -> int:
        return self.total - self.embedded


def coverage(index: Index, fingerprint: str) -> Coverage:
    return Coverage(index.count_vectors(fingerprint), index.count_notes())


@contextmanager
def embed_lock(store: Store, wait: bool) -> Iterator[bool]:
    """The embedding lock (machine-local, separate from the store lock so sync never waits on it).

    Yields False when another process holds it and `wait` is false.
    """
    store.state_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(store.state_dir / "embed.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def embedding_running(store: Store) -> bool:
    """True while some process is embedding notes for this store."""
    with embed_lock(store, wait=False) as mine:
        return not mine


def update_vectors(
    store: Store,
    *,
    progress: Callable[[int, int], None] | None = None,
    wait: bool = True,
    should_stop: Callable[[], bool] | None = None,
) -> int:
    """Embed every note whose vector is missing or stale; returns how many were embedded.

    Batches are committed one by one, so a kill loses at most one batch.
    With `wait=False`, returns 0 at once when another process is already at it.
    """
    engine = engine_for(store)
    if engine is None:
        raise SemanticError(unavailable_reason(store) or "semantic search is off")
    done = 0
    with embed_lock(store, wait=wait) as mine:
        if not mine:
            return 0
        with open_index(store) as index:
            todo = pending(index, engine.fingerprint)
            if progress:
                progress(0, len(todo))
            for start in range(0, len(todo), BATCH):
                if should_stop and should_stop():
                    break
                batch = todo[start : start + BATCH]
                rows = index.texts_to_embed(batch)
                if rows:
                    blob = engine.embed_notes([note_text(r[2], r[3], r[4]) for r in rows])
                    width = len(blob) // len(rows)
                    index.store_vectors(
                        engine.fingerprint,
                        [(r[0], r[1], blob[i * width : (i + 1) * width]) for i, r in enumerate(rows)],
                    )
                done += len(rows)
                if progress:
                    progress(min(start + len(batch), len(todo)), len(todo))
    return done


def start_background_update(store: Store) -> bool:
    """Start a detached `anamnesis semantic update` when semantic search is on and notes wait.

    Cheap when off (one settings read) and never waits: the caller's work
    (a sync, a new note, a hook) goes on at once. Returns True if one started.
    """
    if not settings_of(store)["enabled"] or unavailable_reason(store) is not None:
        return False
    if embedding_running(store):
        return False
    from anamnesis.base.spawn import (
        spawn_detached,  # lazy: only when an update starts; keeps spawn off search
    )

    try:
        spawn_detached(store, ["-m", "anamnesis", "semantic", "update", "--quiet"], "semantic.log")
    except OSError:
        return False
    return True


def catch_up(store: Store, index: Index) -> bool:
    """Start the background update when notes wait for a vector and none is running: a note
    written while the model could not be loaded (its folder moved, say) is embedded once it can
    be, at the next search, rather than when some other note changes. True if one started."""
    if not settings_of(store)["enabled"] or unavailable_reason(store) is not None or embedding_running(store):
        return False
    engine = engine_for(store)
    return engine is not None and bool(pending(index, engine.fingerprint)) and start_background_update(store)


SERVE_IDLE = 1800  # seconds: a query server a hook started stays for a session's quiet half hour
SEARCH_SERVE_IDLE = 600  # seconds: one a `search` started stays for the searches that follow it
SERVE_STARTING = 30.0  # seconds: a server another hook just started is still loading its model
SERVE_MARKER = "semantic-serve.started"  # in state/: when a hook or a search last started one


def start_query_server(store: Store, idle: float = SERVE_IDLE) -> bool:
    """Start a detached `anamnesis semantic serve --idle IDLE` when semantic search is on and no
    query server answers, so that the prompts of the session starting (or the searches after
    this one) are ranked by a process that has the model loaded instead of each loading it
    (watch does this where it runs).

    Cheap when off (one settings read), never waits; True if one started. Two callers racing
    start at most one server that stays: the second finds the socket taken and exits."""
    if not settings_of(store)["enabled"] or server_answering(store) or unavailable_reason(store) is not None:
        return False
    marker = store.state_dir / SERVE_MARKER
    try:
        if time.time() - marker.stat().st_mtime < SERVE_STARTING:
            return False
    except OSError:
        pass
    from anamnesis.base.fsutil import atomic_write_text  # lazy: only when a server starts
    from anamnesis.base.spawn import spawn_detached  # lazy: only when a server starts; keeps spawn off search

    try:
        atomic_write_text(marker, f"{time.time()}\n")
        spawn_detached(store, ["-m", "anamnesis", "semantic", "serve", "--idle", str(int(idle))], "semantic.log")
    except OSError:
        return False
    return True


def enable_semantic(store: Store, model_dir: Path | None, progress: Callable[[int, int], None] | None = None) -> Path:
    """Turn semantic search on for this machine; returns the model folder used.

    With `model_dir`, that folder must already hold the model (air-gapped
    machines, tests). Without it, the model is downloaded once into the
    store's models/ folder from the public model hub.
    """
    # lazy: embed (model code, thread pool) stays off search and the hooks while semantic search is off
    from anamnesis.search.embed import (
        INSTALL_HINT,
        SemanticUnavailable,
        check_model_dir,
        download_model,
        missing_dependencies,
    )

    missing = missing_dependencies()
    if missing:
        raise SemanticError(f"semantic search needs {', '.join(missing)}: {INSTALL_HINT}")
    try:
        if model_dir is not None:
            folder = model_dir.expanduser().resolve()
            check_model_dir(folder)
        else:
            folder = default_model_dir(store)
            try:
                check_model_dir(folder)
            except SemanticUnavailable:
                download_model(folder, progress)
                check_model_dir(folder)
    except SemanticUnavailable as exc:
        raise SemanticError(str(exc)) from None
    settings = load_settings(store)
    settings[SETTINGS_KEY] = {"enabled": True, "model_dir": str(folder)}
    save_settings(store, settings)
    _ENGINES.clear()
    stop_query_server(store)  # it may run another model; the next hook, search or watch starts one with this
    return folder


def disable_semantic(store: Store) -> None:
    """Turn semantic search off here; vectors stay in index.db for a later enable with the same
    model. A running query server is stopped: nothing asks it while semantic search is off."""
    update_section(store, SETTINGS_KEY, enabled=False)
    _ENGINES.clear()
    stop_query_server(store)


def semantic_status(store: Store) -> dict[str, Any]:
    """What `semantic status` and `status` say: on or off and why, the model, how many notes have
    vectors (`complete` when none is pending), and whether a query server answers."""
    conf = settings_of(store)
    reason = unavailable_reason(store)
    info: dict[str, Any] = {
        "enabled": conf["enabled"],
        "active": reason is None,
        "reason": reason,
        "model_dir": conf["model_dir"],
    }
    engine = engine_for(store) if reason is None else None
    if engine is not None:
        with open_index(store) as index:
            counts = coverage(index, engine.fingerprint)
        info.update(
            fingerprint=engine.fingerprint,
            embedded=counts.embedded,
            notes=counts.total,
            pending=counts.pending,
            complete=counts.pending == 0,
            embedding_now=embedding_running(store),
            query_server=server_answering(store),
        )
    return info


def stop_query_server(store: Store) -> bool:
    """Make this store's query server stop, by removing its socket (`QueryServer.running`):
    `semantic serve` exits within a second, watch starts a new one if semantic search is
    still on. True if one answered. For uninstall, and for enable and disable, after which
    a running server has the wrong model or none to serve."""
    if not server_answering(store):
        return False
    with contextlib.suppress(FileNotFoundError):
        socket_path(store).unlink()
    return True


def server_answering(store: Store) -> bool:
    """True when a query server (watch, `semantic serve`) accepts questions for this store."""
    path = socket_path(store)
    if not socket_usable(path) or not path.exists():
        return False
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(0.5)
        try:
            probe.connect(str(path))
        except OSError:
            return False
    return True
