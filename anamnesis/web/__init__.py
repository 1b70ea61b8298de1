"""The browser dashboard (`anamnesis web`): an adapter over the same core as the CLI.

`app.create_app` builds the ASGI app (server-side HTML, a little vanilla JS,
all files shipped in the package); `server.serve` runs it on loopback with a
per-run token. Nothing here searches, writes or runs git itself: it calls
`index`, `store`, `history`, `sync` and `conflicts`.
"""
