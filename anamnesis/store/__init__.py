"""The store: memory/ as a git repository of notes, and every way a note is written or read.

`operations` is the one way to create, update, move, delete and resolve a
note (validated, redacted by `redaction`, written by `transaction`: atomic,
committed, the index kept in step); `links` and `supersede` relate notes,
`project` and `projects` name the project a note belongs to, `history` reads a
note's past, `merge` combines two versions of a note and writes the conflict
blocks `conflicts` lists and resolves, and `recovery` repairs what a killed git
process left before anyone writes (the sync engine calls it first too). It
keeps the search index current and knows nothing of sync or agents.

Other packages use only the names below (tests/architecture/test_faces.py).
"""

from typing import TYPE_CHECKING

from anamnesis.base.face import lazy_face

if TYPE_CHECKING:
    from anamnesis.store.conflicts import ConflictedNote as ConflictedNote
    from anamnesis.store.conflicts import HeldNote as HeldNote
    from anamnesis.store.conflicts import binary_conflicts as binary_conflicts
    from anamnesis.store.conflicts import conflicted_at as conflicted_at
    from anamnesis.store.conflicts import conflicted_ref as conflicted_ref
    from anamnesis.store.conflicts import describe_conflict as describe_conflict
    from anamnesis.store.conflicts import half_resolved as half_resolved
    from anamnesis.store.conflicts import list_conflicts as list_conflicts
    from anamnesis.store.conflicts import resolve_note as resolve_note
    from anamnesis.store.history import MachineActivity as MachineActivity
    from anamnesis.store.history import check_commit as check_commit
    from anamnesis.store.history import describe_change as describe_change
    from anamnesis.store.history import entry_title as entry_title
    from anamnesis.store.history import machine_activity as machine_activity
    from anamnesis.store.history import note_history as note_history
    from anamnesis.store.history import recent_commits as recent_commits
    from anamnesis.store.history import restore_version as restore_version
    from anamnesis.store.history import working_text as working_text
    from anamnesis.store.links import WIKILINK_RE as WIKILINK_RE
    from anamnesis.store.links import LinkGraph as LinkGraph
    from anamnesis.store.links import LinkResolver as LinkResolver
    from anamnesis.store.links import NoteKey as NoteKey
    from anamnesis.store.links import Unresolved as Unresolved
    from anamnesis.store.merge import KEEP_PREFIX as KEEP_PREFIX
    from anamnesis.store.merge import Block as Block
    from anamnesis.store.merge import Side as Side
    from anamnesis.store.merge import Stray as Stray
    from anamnesis.store.merge import block_labels as block_labels
    from anamnesis.store.merge import label_names as label_names
    from anamnesis.store.merge import lay_over as lay_over
    from anamnesis.store.merge import merge_file as merge_file
    from anamnesis.store.merge import merge_lines as merge_lines
    from anamnesis.store.merge import merge_texts as merge_texts
    from anamnesis.store.merge import parse_blocks as parse_blocks
    from anamnesis.store.merge import stray_lines as stray_lines
    from anamnesis.store.operations import MAX_NOTE_BYTES as MAX_NOTE_BYTES
    from anamnesis.store.operations import check_home as check_home
    from anamnesis.store.operations import check_writable as check_writable
    from anamnesis.store.operations import create_note as create_note
    from anamnesis.store.operations import delete_note as delete_note
    from anamnesis.store.operations import init_store as init_store
    from anamnesis.store.operations import load_note as load_note
    from anamnesis.store.operations import move_note as move_note
    from anamnesis.store.operations import read_note as read_note
    from anamnesis.store.operations import require_writable as require_writable
    from anamnesis.store.operations import resolve_ref as resolve_ref
    from anamnesis.store.operations import resolve_supersedes as resolve_supersedes
    from anamnesis.store.operations import retype as retype
    from anamnesis.store.operations import save_edited_text as save_edited_text
    from anamnesis.store.operations import save_note as save_note
    from anamnesis.store.operations import update_note as update_note
    from anamnesis.store.operations import validate as validate
    from anamnesis.store.operations import write_lock as write_lock
    from anamnesis.store.project import check_project_key as check_project_key
    from anamnesis.store.project import checkout_remote as checkout_remote
    from anamnesis.store.project import current_branch as current_branch
    from anamnesis.store.project import detect_project as detect_project
    from anamnesis.store.project import find_repo_root as find_repo_root
    from anamnesis.store.project import project_key as project_key
    from anamnesis.store.project import raw_project as raw_project
    from anamnesis.store.project import resolve_alias as resolve_alias
    from anamnesis.store.projects import list_aliases as list_aliases
    from anamnesis.store.projects import list_projects as list_projects
    from anamnesis.store.projects import remove_alias as remove_alias
    from anamnesis.store.projects import rename_project as rename_project
    from anamnesis.store.projects import set_alias as set_alias
    from anamnesis.store.recovery import CHECKOUT_MARKER as CHECKOUT_MARKER
    from anamnesis.store.recovery import RUNNING_MARKER as RUNNING_MARKER
    from anamnesis.store.recovery import SyncRefused as SyncRefused
    from anamnesis.store.recovery import checkout_started as checkout_started
    from anamnesis.store.recovery import clear_marker as clear_marker
    from anamnesis.store.recovery import finish_checkout as finish_checkout
    from anamnesis.store.recovery import read_marker as read_marker
    from anamnesis.store.recovery import repair_or_refuse as repair_or_refuse
    from anamnesis.store.recovery import start_checkout as start_checkout
    from anamnesis.store.recovery import wedged as wedged
    from anamnesis.store.recovery import write_marker as write_marker
    from anamnesis.store.redaction import redact as redact
    from anamnesis.store.redaction import redact_field as redact_field
    from anamnesis.store.redaction import redact_note_fields as redact_note_fields
    from anamnesis.store.redaction import redact_tags as redact_tags
    from anamnesis.store.storepaths import relpath_of as relpath_of
    from anamnesis.store.storepaths import safe_path as safe_path
    from anamnesis.store.supersede import SIMILAR_TYPES as SIMILAR_TYPES
    from anamnesis.store.supersede import TITLE_STOPWORDS as TITLE_STOPWORDS
    from anamnesis.store.supersede import Components as Components
    from anamnesis.store.supersede import jaccard as jaccard
    from anamnesis.store.supersede import read_links as read_links
    from anamnesis.store.supersede import similar_pairs as similar_pairs
    from anamnesis.store.transaction import write_units as write_units

__getattr__, __dir__ = lazy_face(__name__)
