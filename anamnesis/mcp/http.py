"""The MCP server over streamable HTTP on this machine's loopback, for clients that connect to a
URL instead of starting a process (and for the official MCP conformance suite).

The same tools as over stdio, behind the same kind of gate as the dashboard: only loopback
addresses, a Host header that names this server (a DNS-rebinding page's foreign name gets a
403), a browser Origin that is this server's own, and a token, since any local user can
reach a loopback port. The token is kept in the store's state folder (mode 0600) and stays the
same from run to run, so a client is configured once; `--new-token` replaces it.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Callable
from pathlib import Path
from urllib.parse import parse_qsl

from mcp.server.transport_security import TransportSecuritySettings
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from anamnesis.base.errors import AnamnesisError, UsageError
from anamnesis.base.fsutil import atomic_write_text
from anamnesis.base.listen import allowed_hosts, bind, is_loopback, new_token, serve_held, shows_token
from anamnesis.base.paths import Store
from anamnesis.base.running import MCP_SERVERS
from anamnesis.mcp.server import build_server

TOKEN_FILE = "mcp-http.token"  # in the state folder: machine-local, never synced
PATH = "/mcp"
UNAUTHORIZED = -32001  # JSON-RPC server error: the request never reached the MCP server
TOKEN_SHAPE = re.compile(r"[A-Za-z0-9_-]{32,256}")  # what new_token makes: 32 URL-safe characters


def _kept_token(path: Path) -> str:
    """The token kept at `path` if it is still a secret: a regular file of this user's (not a
    symlink to some other file), readable by no one else, holding a token as this program makes
    them; "" otherwise, and it is replaced."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:  # missing, a symlink (ELOOP), unreadable
        return ""
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o077:
            return ""
        text = os.read(fd, 1024).decode("ascii", "replace").strip()
    except OSError:
        return ""
    finally:
        os.close(fd)
    return text if TOKEN_SHAPE.fullmatch(text) else ""


def http_token(store: Store, *, renew: bool = False) -> str:
    """The token an HTTP client must show: the kept one, or a new one when there is none, the
    kept one is no longer a secret (see `_kept_token`) or `renew` asks for it."""
    path = store.state_dir / TOKEN_FILE
    kept = "" if renew else _kept_token(path)
    if kept:
        return kept
    token = new_token()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, token + "\n", mode=0o600)  # replaces a symlink itself, never its target
    except OSError as exc:
        raise AnamnesisError(f"cannot keep the MCP server's token in {path}: {exc.strerror or exc}") from exc
    return token


class TokenGate:
    """ASGI middleware in front of the MCP app: Host, then Origin, then the token."""

    def __init__(self, app: ASGIApp, *, token: str, hosts: set[str]) -> None:
        self.app = app
        self.token = token
        self.hosts = {host.lower() for host in hosts}
        self.origins = {f"http://{host}" for host in self.hosts}

    def token_ok(self, headers: Headers, query: bytes) -> bool:
        scheme, _, sent = headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not sent.strip():
            sent = dict(parse_qsl(query.decode("latin-1"))).get("token", "")
        return shows_token(sent.strip(), self.token)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)  # lifespan: starts the SDK's session manager
            return
        headers = Headers(scope=scope)
        origin = headers.get("origin")
        if headers.get("host", "").lower() not in self.hosts:
            await _refuse(send, 403, "this server answers only to its own loopback address")
        elif origin is not None and origin.lower() not in self.origins:
            await _refuse(send, 403, "requests from web pages of other sites are refused")
        elif not self.token_ok(headers, scope.get("query_string", b"")):
            await _refuse(
                send,
                401,
                "token needed: send `Authorization: Bearer TOKEN` or add `?token=TOKEN` to the URL "
                "(`anamnesis mcp --http` prints both)",
            )
        else:  # the SDK checks Host and Origin again, case-sensitively: pass them on as checked here
            checked = _lowered(scope["headers"], (b"host", b"origin"))
            await self.app({**scope, "headers": checked}, receive, send)


def _lowered(headers: list[tuple[bytes, bytes]], names: tuple[bytes, ...]) -> list[tuple[bytes, bytes]]:
    """`headers` with the values of `names` in lower case (host names are case-insensitive)."""
    return [(name, value.lower() if name.lower() in names else value) for name, value in headers]


async def _refuse(send: Send, status: int, message: str) -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": UNAUTHORIZED, "message": message}})
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if status == 401:
        headers.append((b"www-authenticate", b'Bearer realm="anamnesis"'))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body.encode()})


def http_app(store: Store, *, token: str, host: str, port: int) -> ASGIApp:
    """The MCP server as an ASGI app for `host`:`port`, behind the gate."""
    hosts = allowed_hosts(host, port)
    server = build_server(store)
    app = server.streamable_http_app(
        streamable_http_path=PATH,
        host=host,
        transport_security=TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=sorted(hosts),
            allowed_origins=sorted(f"http://{name}" for name in hosts),
        ),
    )
    return TokenGate(app, token=token, hosts=hosts)


def serve_http(
    store: Store,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    renew_token: bool = False,
    on_ready: Callable[[str, str], None] | None = None,
) -> None:
    """Serve MCP over HTTP until interrupted; `on_ready(url, token)` once it listens."""
    if not 0 <= port <= 65535:
        raise UsageError(f"--port must be between 0 and 65535 (0 picks a free one), not {port}")
    if not is_loopback(host):
        raise UsageError(f"the MCP server listens on this machine only: {host} is not a loopback address")
    host = host.strip("[]").lower()  # [::1] as in a URL, LOCALHOST: the names the Host check knows
    token = http_token(store, renew=renew_token)
    bound = bind(host, port)
    serve_held(  # the app's lifespan starts the SDK's session manager
        bound,
        http_app(store, token=token, host=bound.host, port=bound.port),
        store.state_dir / MCP_SERVERS,  # known to `uninstall` while it runs
        ready=None if on_ready is None else lambda: on_ready(bound.address(PATH), token),
    )
