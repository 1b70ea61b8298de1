"""Run the dashboard: bind the socket, make the token, serve with uvicorn until stopped."""

from __future__ import annotations

import os
import secrets
import socket
from collections.abc import Callable
from dataclasses import dataclass

import uvicorn

from anamnesis.base.paths import Store
from anamnesis.base.running import DASHBOARDS, hold
from anamnesis.search import open_index
from anamnesis.web.app import create_app
from anamnesis.web.security import is_loopback


@dataclass(frozen=True)
class Bound:
    """A listening socket and the address a browser should use for it."""

    sock: socket.socket
    host: str
    port: int

    def url(self, token: str, path: str = "/") -> str:
        shown = (
            "127.0.0.1" if self.host in ("0.0.0.0", "") else ("localhost" if self.host == "::" else self.host)
        )
        if ":" in shown:
            shown = f"[{shown}]"
        return f"http://{shown}:{self.port}{path}?token={token}"


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


def new_token() -> str:
    """A fresh secret for one run of the dashboard."""
    return secrets.token_urlsafe(24)


def serve(
    store: Store,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    token: str | None = None,
    on_ready: Callable[[str], None] | None = None,
) -> None:
    """Serve the dashboard until interrupted; `on_ready(url)` is called once it listens."""
    store.require()
    with open_index(store) as index:
        index.refresh()
    bound = bind(host, port)
    token = token or new_token()
    app = create_app(store, token=token, host=bound.host, port=bound.port)
    config = uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,
        server_header=False,
        lifespan="off",
        timeout_graceful_shutdown=2,
    )
    server = uvicorn.Server(config)
    # known to `uninstall` while it runs: a file of its own, locked, named after its pid
    marker = store.state_dir / DASHBOARDS / f"{os.getpid()}.lock"
    held = hold(marker)
    if on_ready is not None:
        on_ready(bound.url(token))
    try:
        server.run(sockets=[bound.sock])
    finally:
        bound.sock.close()
        marker.unlink(missing_ok=True)
        os.close(held)


def exposure_warning(host: str) -> str | None:
    """The loud warning for a bind address other people can reach, or None on loopback."""
    if is_loopback(host):
        return None
    return (
        f"WARNING: the dashboard will listen on {host}, reachable from other machines.\n"
        "WARNING: anyone who can reach this port and learns the token can read and change every note.\n"
        "WARNING: traffic is plain HTTP (not encrypted); prefer an SSH tunnel or Tailscale to 127.0.0.1."
    )
