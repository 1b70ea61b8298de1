"""The query server: a loaded model answering similarity questions on a unix socket.

A hook or a one-off `search` with semantic search on would spend most of its time
loading the model (numpy, the tokenizer, the weights) and the notes' vectors to embed a
single query. A long-running process (`anamnesis watch`, or `anamnesis semantic serve`)
keeps both loaded and answers instead: `anamnesis.search.semantic.ask_server` sends one JSON
line — the query, the filters, how many notes, the model's fingerprint — and reads one
JSON line back, the cosines by note rowid, within a strict deadline; without an answer
the caller computes them itself.

The socket is state/semantic.sock (a private folder of the user's under the temp folder
when that path is too long for a socket address), created with mode 0600: only this user
can ask, and nothing leaves the machine. One server per store: a second one finds the first answering
and does not start; a socket left by a killed server is replaced.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import threading
import time
from typing import Any

from anamnesis.base.paths import Store
from anamnesis.search.index import open_index
from anamnesis.search.ranking import Filters
from anamnesis.search.semantic import (
    REPLY_LIMIT,
    SemanticEngine,
    engine_for,
    server_answering,
    socket_path,
    socket_usable,
)

log = logging.getLogger("anamnesis.semantic_server")

READ_TIMEOUT = 2.0  # a client that sends nothing for this long is dropped
REQUEST_LIMIT = 1 << 20  # longest request line read
MAX_POOL = 1000
MAX_ALSO = 10_000
_FILTER_FIELDS = tuple(field.name for field in Filters.__dataclass_fields__.values())


class RequestError(ValueError):
    """A request this server cannot answer; its text goes back to the client."""


def _parse(raw: bytes) -> dict[str, Any]:
    try:
        request = json.loads(raw)
    except ValueError:
        raise RequestError("not JSON") from None
    if not isinstance(request, dict):
        raise RequestError("not a JSON object")
    if not isinstance(request.get("text"), str):
        raise RequestError("no text")
    filters = request.get("filters") or {}
    if not isinstance(filters, dict) or any(
        key not in _FILTER_FIELDS or not (value is None or isinstance(value, str))
        for key, value in filters.items()
    ):
        raise RequestError("bad filters")
    pool = request.get("pool")
    if not isinstance(pool, int) or isinstance(pool, bool) or not 1 <= pool <= MAX_POOL:
        raise RequestError("bad pool")
    also = request.get("also") or []
    if (
        not isinstance(also, list)
        or len(also) > MAX_ALSO
        or not all(isinstance(r, int) and not isinstance(r, bool) for r in also)
    ):
        raise RequestError("bad also")
    return request


class QueryServer:
    """Answers `similarity` questions for one store until stopped."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.path = socket_path(store)
        self.engine: SemanticEngine | None = None
        self.answered = 0
        self._sock: socket.socket | None = None
        self._inode: int | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    @property
    def running(self) -> bool:
        """Answering: its thread alive and the socket file still its own. Removing the file (the
        store gone, `stop_query_server`) or another server's replacing it ends its use: watch
        then starts a new one when semantic search is still on, `semantic serve` exits."""
        if self._thread is None or not self._thread.is_alive():
            return False
        try:
            return self.path.stat().st_ino == self._inode
        except OSError:
            return False

    def start(self) -> bool:
        """Listen, and load the model and vectors in the background; False (nothing started)
        when semantic search is off here, the socket path is too long, or another server
        already answers for this store."""
        engine = engine_for(self.store)
        self.store.state_dir.mkdir(parents=True, exist_ok=True)
        if engine is None or not socket_usable(self.path, create=True):
            return False
        if self.path.exists() or self.path.is_symlink():
            if server_answering(self.store):
                return False
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()  # left by a server that was killed
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old_umask = os.umask(0o177)
        try:
            sock.bind(str(self.path))
        except OSError:
            sock.close()
            return False
        finally:
            os.umask(old_umask)
        sock.listen(16)
        sock.settimeout(0.5)
        self._inode = self.path.stat().st_ino
        self._sock = sock
        self.engine = engine
        self._stop.clear()
        self._thread = threading.Thread(target=self._serve, name="anamnesis-query-server", daemon=True)
        self._thread.start()
        return True

    def stop(self) -> None:
        """Stop answering and remove the socket (only if it is still ours)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        with contextlib.suppress(OSError):
            if self._inode is not None and self.path.stat().st_ino == self._inode:
                self.path.unlink()
        self._inode = None

    def _warm(self) -> None:
        """Load the model and the vectors now, so the first question is answered fast."""
        assert self.engine is not None
        try:
            self.engine.embedder.embed_query("warm up")
            with open_index(self.store) as index:
                self.engine.vectors(index)
        except Exception:
            log.exception("query server: warming up failed")

    def _serve(self) -> None:
        assert self._sock is not None
        self._warm()
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                if self._stop.is_set():
                    return
                time.sleep(0.1)
                continue
            with conn:
                try:
                    self._answer(conn)
                except Exception:
                    log.exception("query server: a question failed")

    def _answer(self, conn: socket.socket) -> None:
        conn.settimeout(READ_TIMEOUT)
        raw = b""
        try:
            while b"\n" not in raw:
                chunk = conn.recv(65536)
                if not chunk:
                    break
                raw += chunk
                if len(raw) > REQUEST_LIMIT:
                    raise RequestError("request too long")
            reply = self.reply(raw)
        except RequestError as exc:
            reply = {"error": str(exc)}
        except OSError:
            return  # the client went away or was too slow: it falls back on its own
        data = json.dumps(reply).encode("utf-8") + b"\n"
        if len(data) <= REPLY_LIMIT:
            with contextlib.suppress(OSError):
                conn.sendall(data)

    def reply(self, raw: bytes) -> dict[str, Any]:
        """The answer to one request line (RequestError when it cannot be answered)."""
        assert self.engine is not None
        request = _parse(raw.split(b"\n", 1)[0])
        if request.get("fingerprint") != self.engine.fingerprint:
            raise RequestError(f"this server runs model {self.engine.fingerprint}")
        if request.get("index") != str(self.store.index_path):
            raise RequestError("another store's index")
        filters = Filters(**request.get("filters") or {})
        with open_index(self.store) as index:
            cosines = self.engine.local_similarity(
                index, request["text"], filters, request["pool"], set(request.get("also") or ())
            )
        self.answered += 1
        return {
            "fingerprint": self.engine.fingerprint,
            "cosines": [[rowid, cosine] for rowid, cosine in cosines.items()],
        }


def serve(store: Store, stop: threading.Event, idle: float | None = None) -> bool:
    """Answer questions until `stop` is set, nobody asked for `idle` seconds, or the socket
    file is removed or replaced (see `QueryServer.running`); False when no server could start
    (semantic search off, or one already answers)."""
    server = QueryServer(store)
    if not server.start():
        return False
    try:
        last, seen = time.monotonic(), 0
        while not stop.wait(1.0) and server.running:
            if server.answered != seen:
                last, seen = time.monotonic(), server.answered
            elif idle is not None and time.monotonic() - last >= idle:
                break
    finally:
        server.stop()
    return True
