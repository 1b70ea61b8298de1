"""Listening on this machine: a socket bound before the server starts, the names a loopback
server answers to, and the secret a client must show. The dashboard and the MCP server over
HTTP share these, so both refuse the same foreign Host headers."""

from __future__ import annotations

import hmac
import ipaddress
import os
import secrets
import signal
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from anamnesis.base.running import hold


def is_loopback(host: str) -> bool:
    """Whether `host` names this machine only (127.0.0.0/8, ::1, localhost)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def allowed_hosts(host: str, port: int) -> set[str]:
    """Host header values a server bound to `host`:`port` answers to (any other is a rebound name)."""
    names = {_url_host(host).lower()}
    if is_loopback(host):
        names |= {"localhost", "127.0.0.1"} if ":" not in host else {"localhost", "[::1]"}
    else:
        hostname = socket.gethostname().lower()
        names |= {hostname, hostname.split(".")[0], "localhost", "127.0.0.1", "[::1]"}
        try:
            names.add(socket.getfqdn().lower())
        except OSError:
            pass
    return {f"{name}:{port}" for name in names}


@dataclass(frozen=True)
class Bound:
    """A listening socket and the address a client should use for it."""

    sock: socket.socket
    host: str
    port: int

    def address(self, path: str = "/") -> str:
        """The URL of `path` here, without a token."""
        shown = (
            "127.0.0.1" if self.host in ("0.0.0.0", "") else ("localhost" if self.host == "::" else self.host)
        )
        if ":" in shown:
            shown = f"[{shown}]"
        return f"http://{shown}:{self.port}{path}"

    def url(self, token: str, path: str = "/") -> str:
        """The URL of `path` here, carrying `token`."""
        return f"{self.address(path)}?token={token}"


def bind(host: str = "127.0.0.1", port: int = 0) -> Bound:
    """Listen on host:port (port 0 picks a free one)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    sock.listen(128)
    sock.set_inheritable(True)
    return Bound(sock=sock, host=host, port=int(sock.getsockname()[1]))


def shows_token(sent: str | None, token: str) -> bool:
    """Whether a client sent `token` (compared in constant time, so timing tells nothing of it)."""
    return bool(sent) and hmac.compare_digest(str(sent).encode(), token.encode())


def new_token() -> str:
    """A fresh secret a client must show (the dashboard makes one each run)."""
    return secrets.token_urlsafe(24)


def serve_held(
    bound: Bound,
    app: Any,
    running_in: Path,
    *,
    lifespan: Literal["auto", "on", "off"] = "auto",
    ready: Callable[[], None] | None = None,
) -> None:
    """Serve the ASGI `app` on `bound` until stopped, holding a lock file named after this process
    in the folder `running_in` meanwhile, so `uninstall` can find the process and stop it."""
    import uvicorn  # lazy: only the dashboard and the MCP server over HTTP serve; other users of base do not

    config = uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,
        server_header=False,
        lifespan=lifespan,
        timeout_graceful_shutdown=2,
    )
    server = uvicorn.Server(config)
    marker = running_in / f"{os.getpid()}.lock"
    held = hold(marker)
    # uvicorn shuts down on SIGTERM (what `uninstall` sends) and SIGINT, then raises the signal again
    # with the handler it found, from inside its event loop. Ours only notes it (and, come before
    # uvicorn takes the signals over, asks the server to stop as soon as it has started: a Ctrl+C
    # in that moment was otherwise lost, leaving the server running); the KeyboardInterrupt is
    # raised here once the loop is closed, so the clean-up below runs and the process ends as on
    # Ctrl+C, never killed by the signal with its lock file left behind. (Raised inside the loop, it
    # sometimes left the loop unclosed: "Exception ignored in BaseEventLoop.__del__".)
    signalled: list[int] = []

    def note(signum: int, frame: Any) -> None:
        signalled.append(signum)
        server.should_exit = True

    main = threading.current_thread() is threading.main_thread()
    previous = {sig: signal.signal(sig, note) for sig in (signal.SIGINT, signal.SIGTERM)} if main else {}
    try:
        if ready is not None:
            ready()
        server.run(sockets=[bound.sock])
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        bound.sock.close()
        marker.unlink(missing_ok=True)
        os.close(held)
    if signalled:
        raise KeyboardInterrupt
