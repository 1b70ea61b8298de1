"""The dashboard's gate: Host check, token, CSRF and security headers on every response.

The dashboard can read and change every note, so it is treated like a
password-protected service even on loopback: other local users, other
browser tabs and DNS-rebinding pages must not reach it.

- Host: only the bound host/port (and `localhost` for loopback) is served,
  which defeats DNS rebinding (a foreign name resolving to 127.0.0.1).
- Token: random per run, printed at start; `?token=` once, then an HttpOnly
  SameSite=Strict cookie (the token is stripped from the URL by a redirect).
- Writes: POST only, with a CSRF token in the form or an `X-CSRF-Token`
  header, and a same-origin `Origin`/`Sec-Fetch-Site` when the browser sends one.
- Headers: a strict Content-Security-Policy (no inline script or style, no
  framing, nothing loaded from elsewhere), no referrer to other sites, no caching.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
from collections.abc import Iterable
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qsl, urlencode

from starlette.datastructures import Headers, MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from anamnesis.base.listen import shows_token

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "font-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; "
    "base-uri 'none'; object-src 'none'"
)
SECURITY_HEADERS = {
    "content-security-policy": CSP,
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "same-origin",
    "cache-control": "no-store",
    "cross-origin-opener-policy": "same-origin",
    "cross-origin-resource-policy": "same-origin",
    "permissions-policy": "camera=(), microphone=(), geolocation=()",
}
SAFE_METHODS = {"GET", "HEAD"}
UNAUTHORIZED_PAGE = (
    "<!doctype html><meta charset=utf-8><title>Anamnesis: token needed</title>"
    "<h1>Token needed</h1><p>Open the address that <code>anamnesis web</code> printed "
    "(it ends in <code>?token=…</code>). The token changes every time the dashboard starts.</p>"
)


def csrf_for(token: str) -> str:
    """The CSRF token of a run: derived from the secret token, useless without the cookie."""
    return hmac.new(token.encode(), b"anamnesis-csrf", hashlib.sha256).hexdigest()[:40]


def _host_is_ip_literal(value: str) -> bool:
    host = value.rsplit(":", 1)[0] if not value.endswith("]") else value
    try:
        ipaddress.ip_address(host.strip("[]"))
        return True
    except ValueError:
        return False


class Guard:
    """ASGI middleware in front of the whole app: nothing is served before these checks."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        token: str,
        hosts: Iterable[str],
        port: int,
        any_ip_host: bool = False,
    ) -> None:
        self.app = app
        self.token = token
        self.hosts = {h.lower() for h in hosts}
        self.port = port
        self.any_ip_host = any_ip_host  # exposed on a LAN: IP literals cannot be rebound
        self.cookie_name = f"anamnesis_{port}"
        self.origins = {f"http://{h}" for h in self.hosts}

    def host_ok(self, host: str) -> bool:
        host = host.lower()
        if host in self.hosts:
            return True
        return self.any_ip_host and host.endswith(f":{self.port}") and _host_is_ip_literal(host)

    def token_ok(self, candidate: str | None) -> bool:
        return shows_token(candidate, self.token)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, receive, send)
            return
        if scope["type"] != "http":
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 1008})
            return
        headers = Headers(scope=scope)
        if not self.host_ok(headers.get("host", "")):
            await _plain(send, 421, "Misdirected request: this dashboard only answers to its own address.\n")
            return
        method = scope["method"]
        cookie = SimpleCookie()
        try:
            cookie.load(headers.get("cookie", ""))
        except Exception:
            pass
        morsel = cookie.get(self.cookie_name)
        bearer = headers.get("authorization", "")
        authed = self.token_ok(morsel.value if morsel else None) or (
            bearer.startswith("Bearer ") and self.token_ok(bearer[7:].strip())
        )
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        given = next((v for k, v in query if k == "token"), None)
        if given is not None and method in SAFE_METHODS and self.token_ok(given):
            rest = urlencode([(k, v) for k, v in query if k != "token"])
            raw_path = scope.get("raw_path") or scope.get("path", "/").encode()
            location = "/" + raw_path.decode("latin-1").lstrip("/\\") + ("?" + rest if rest else "")
            await _redirect_with_cookie(send, location, self._set_cookie())
            return
        if not authed:
            await _send(send, 401, UNAUTHORIZED_PAGE.encode(), "text/html; charset=utf-8")
            return
        if method not in SAFE_METHODS:
            origin = (headers.get("origin") or "").lower()
            site = headers.get("sec-fetch-site")
            # "null" is what a browser sends when it hides the origin; Sec-Fetch-Site still tells.
            # The Host was checked above, so an Origin naming that same host is this dashboard
            # (when exposed, it is reached by IP addresses that are not in `self.origins`).
            own_origin = origin in self.origins or origin == "http://" + headers.get("host", "").lower()
            foreign_origin = (
                bool(origin) and not own_origin and not (origin == "null" and site == "same-origin")
            )
            if foreign_origin or site in ("cross-site", "same-site"):
                await _plain(send, 403, "Cross-site request refused.\n")
                return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                extra = MutableHeaders(scope=message)
                for key, value in SECURITY_HEADERS.items():
                    if key not in extra:
                        extra[key] = value
            await send(message)

        await self.app(scope, receive, send_with_headers)

    def _set_cookie(self) -> str:
        return f"{self.cookie_name}={self.token}; Path=/; HttpOnly; SameSite=Strict"


async def _send(
    send: Send, status: int, body: bytes, content_type: str, extra: list[tuple[bytes, bytes]] | None = None
) -> None:
    headers: list[Any] = [
        (b"content-type", content_type.encode()),
        (b"content-length", str(len(body)).encode()),
    ]
    headers += [(k.encode(), v.encode()) for k, v in SECURITY_HEADERS.items()]
    headers += extra or []
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _plain(send: Send, status: int, text: str) -> None:
    await _send(send, status, text.encode(), "text/plain; charset=utf-8")


async def _redirect_with_cookie(send: Send, location: str, cookie: str) -> None:
    await _send(
        send,
        303,
        b"",
        "text/plain; charset=utf-8",
        [(b"location", location.encode("latin-1", "replace")), (b"set-cookie", cookie.encode())],
    )
