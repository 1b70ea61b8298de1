"""The browser dashboard (`anamnesis web`): an adapter over the same domains as the CLI.

`app.create_app` builds the ASGI app (server-side HTML, a little vanilla JS,
all files shipped in the package); `server.serve` runs it on loopback with a
per-run token. Nothing here searches, writes or runs git itself: it calls the
faces of the store, search, sync (and app.syncing) and agents.

Other packages use only the names below (tests/architecture/test_faces.py).
"""

from typing import TYPE_CHECKING

from anamnesis.base.face import lazy_face

if TYPE_CHECKING:
    from anamnesis.web.server import exposure_warning as exposure_warning
    from anamnesis.web.server import serve as serve
__getattr__, __dir__ = lazy_face(__name__)
