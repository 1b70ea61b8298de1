"""Run the dashboard: bind the socket, make the token, serve with uvicorn until stopped."""

from __future__ import annotations

from collections.abc import Callable

from anamnesis.base.listen import bind, is_loopback, new_token, serve_held
from anamnesis.base.paths import Store
from anamnesis.base.running import DASHBOARDS
from anamnesis.search import open_index
from anamnesis.web.app import create_app


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
    serve_held(
        bound,
        app,
        store.state_dir / DASHBOARDS,  # known to `uninstall` while it runs
        lifespan="off",
        ready=None if on_ready is None else lambda: on_ready(bound.url(token)),
    )


def exposure_warning(host: str) -> str | None:
    """The loud warning for a bind address other people can reach, or None on loopback."""
    if is_loopback(host):
        return None
    return (
        f"WARNING: the dashboard will listen on {host}, reachable from other machines.\n"
        "WARNING: anyone who can reach this port and learns the token can read and change every note.\n"
        "WARNING: traffic is plain HTTP (not encrypted); prefer an SSH tunnel or Tailscale to 127.0.0.1."
    )
