"""The MCP server (`anamnesis mcp`, which Claude Code starts for every session): an adapter.

`server` declares the tools, resources and prompts, with schemas as tight as
their checks, and answers over stdio; each tool calls a domain's face (store,
search, sync through app.syncing, agents' inject). `upkeep` is the tidy and
timeline work the server offers. `http` serves the same server over streamable
HTTP on loopback, behind a Host check and a token (`anamnesis mcp --http`).

Other packages use only the names below (tests/architecture/test_faces.py).
"""

from typing import TYPE_CHECKING

from anamnesis.base.face import lazy_face

if TYPE_CHECKING:
    from anamnesis.mcp.http import serve_http as serve_http
    from anamnesis.mcp.server import main as main
    from anamnesis.mcp.server import serve as serve
__getattr__, __dir__ = lazy_face(__name__)
