"""Importers: memory kept elsewhere brought into the store, idempotently.

One module per source (`anamnesis_memory`, `claude_md`, `claude_auto_memory`,
`markdown`) reads it into a `plan.Plan`, written as one commit; `run` holds
`anamnesis import` and the mirrors: the sources a person asked to keep
mirrored (Claude Code's auto-memory), which every sync takes in first
(through app.syncing) and `watch` checks each beat. It stands on the store
and on the agents' knowledge of where their files are.

Other packages use only the names below (tests/architecture/test_faces.py).
"""

from typing import TYPE_CHECKING

from anamnesis.base.face import lazy_face

if TYPE_CHECKING:
    from anamnesis.importers.plan import ImportReport as ImportReport
    from anamnesis.importers.plan import Plan as Plan
    from anamnesis.importers.run import SOURCES as SOURCES
    from anamnesis.importers.run import ImportInterrupted as ImportInterrupted
    from anamnesis.importers.run import gone_mirrors as gone_mirrors
    from anamnesis.importers.run import make_plan as make_plan
    from anamnesis.importers.run import mirror_all as mirror_all
    from anamnesis.importers.run import mirror_changed as mirror_changed
    from anamnesis.importers.run import run_import as run_import
    from anamnesis.importers.run import set_mirror as set_mirror

__getattr__, __dir__ = lazy_face(__name__)
