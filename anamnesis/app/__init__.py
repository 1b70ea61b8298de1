"""The application: what needs several domains at once, named in one place.

`syncing` runs the sync engine with what agents and importers have waiting;
`setup_plan` is what `init` does, `installation` what `uninstall` removes,
`doctor` the health checks, `tidy` the upkeep of a growing memory, `demo`
three machines in a temporary folder.

Other packages use only the names below (tests/architecture/test_faces.py).
"""

from typing import TYPE_CHECKING

from anamnesis.base.face import lazy_face

if TYPE_CHECKING:
    from anamnesis.app.demo import run_demo as run_demo
    from anamnesis.app.doctor import SUGGESTION as SUGGESTION
    from anamnesis.app.doctor import note_problems as note_problems
    from anamnesis.app.doctor import run_checks as run_checks
    from anamnesis.app.installation import Installation as Installation
    from anamnesis.app.installation import current_installation as current_installation
    from anamnesis.app.installation import remove_installation as remove_installation
    from anamnesis.app.setup_plan import DISCOVER_HINT as DISCOVER_HINT
    from anamnesis.app.setup_plan import DISCOVERY_SECONDS as DISCOVERY_SECONDS
    from anamnesis.app.setup_plan import EVERY as EVERY
    from anamnesis.app.setup_plan import SEMANTIC_MISSING as SEMANTIC_MISSING
    from anamnesis.app.setup_plan import accept_offer as accept_offer
    from anamnesis.app.setup_plan import discovery_notes as discovery_notes
    from anamnesis.app.setup_plan import discovery_report as discovery_report
    from anamnesis.app.setup_plan import discovery_wanted as discovery_wanted
    from anamnesis.app.setup_plan import enable_semantic as enable_semantic
    from anamnesis.app.setup_plan import first_machine_lines as first_machine_lines
    from anamnesis.app.setup_plan import first_sync as first_sync
    from anamnesis.app.setup_plan import peer_offers as peer_offers
    from anamnesis.app.setup_plan import plan_join as plan_join
    from anamnesis.app.setup_plan import schedule_choice as schedule_choice
    from anamnesis.app.setup_plan import schedule_hint as schedule_hint
    from anamnesis.app.setup_plan import schedule_question as schedule_question
    from anamnesis.app.setup_plan import semantic_choice as semantic_choice
    from anamnesis.app.setup_plan import semantic_hint as semantic_hint
    from anamnesis.app.setup_plan import semantic_question as semantic_question
    from anamnesis.app.setup_plan import setup_schedule as setup_schedule
    from anamnesis.app.setup_plan import timer_installed as timer_installed
    from anamnesis.app.syncing import sync_store as sync_store
    from anamnesis.app.syncing import with_intake as with_intake
    from anamnesis.app.tidy import Applied as Applied
    from anamnesis.app.tidy import apply_plan as apply_plan
    from anamnesis.app.tidy import decline as decline
    from anamnesis.app.tidy import describe_proposal as describe_proposal
    from anamnesis.app.tidy import list_archived as list_archived
    from anamnesis.app.tidy import model_unready as model_unready
    from anamnesis.app.tidy import plan_tidy as plan_tidy
    from anamnesis.app.tidy import read_plan as read_plan
    from anamnesis.app.tidy import restore_archived as restore_archived
    from anamnesis.app.tidy import save_proposed as save_proposed

__getattr__, __dir__ = lazy_face(__name__)
