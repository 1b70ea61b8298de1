"""Sync: bringing this machine's store and its peers' into step, and what drives it.

`engine.sync` commits, fetches each peer through a `transport` (file path or
ssh), merges trees (`treemerge`, with the store's text merge), pushes, then
updates the index; `stamping` dates hand edits, `peers` and `synclog` keep who
we sync with and what happened. The daemons that start syncs live here too:
`watch` (file changes), `discovery` (machines on the LAN / tailnet),
`schedule` (systemd timer, LaunchAgent), and `freshness` (whether a running
watch vouches for the index). It stands on the store and search; it knows
nothing of agents or importers: what they have waiting comes in as `Intake`
functions (app.syncing).

Other packages use only the names below (tests/architecture/test_faces.py).
"""

from typing import TYPE_CHECKING

from anamnesis.base.face import lazy_face

if TYPE_CHECKING:
    from anamnesis.sync.discovery import connectable_url as connectable_url
    from anamnesis.sync.discovery import discover as discover
    from anamnesis.sync.discovery import reachable_name as reachable_name
    from anamnesis.sync.discovery import tailscale_candidates as tailscale_candidates
    from anamnesis.sync.engine import Intake as Intake
    from anamnesis.sync.engine import SyncResult as SyncResult
    from anamnesis.sync.engine import join as join
    from anamnesis.sync.engine import sync as sync
    from anamnesis.sync.freshness import catch_up as catch_up
    from anamnesis.sync.freshness import read_current as read_current
    from anamnesis.sync.peers import EXIT_STALE as EXIT_STALE
    from anamnesis.sync.peers import NoRepository as NoRepository
    from anamnesis.sync.peers import PeerNotFound as PeerNotFound
    from anamnesis.sync.peers import add_peer as add_peer
    from anamnesis.sync.peers import ago as ago
    from anamnesis.sync.peers import check_name as check_name
    from anamnesis.sync.peers import get_peer as get_peer
    from anamnesis.sync.peers import incoming_machines as incoming_machines
    from anamnesis.sync.peers import list_peers as list_peers
    from anamnesis.sync.peers import name_for as name_for
    from anamnesis.sync.peers import name_from_url as name_from_url
    from anamnesis.sync.peers import normalize_url as normalize_url
    from anamnesis.sync.peers import peer_problems as peer_problems
    from anamnesis.sync.peers import probe as probe
    from anamnesis.sync.peers import remove_peer as remove_peer
    from anamnesis.sync.peers import same_store_as as same_store_as
    from anamnesis.sync.peers import stale_peers as stale_peers
    from anamnesis.sync.peers import untaken_pushes as untaken_pushes
    from anamnesis.sync.schedule import install_schedule as install_schedule
    from anamnesis.sync.schedule import parse_duration as parse_duration
    from anamnesis.sync.schedule import remove_schedule as remove_schedule
    from anamnesis.sync.schedule import schedule_files as schedule_files
    from anamnesis.sync.schedule import schedule_inactive as schedule_inactive
    from anamnesis.sync.schedule import schedule_installed as schedule_installed
    from anamnesis.sync.schedule import schedule_plan as schedule_plan
    from anamnesis.sync.schedule import schedule_status as schedule_status
    from anamnesis.sync.synclog import LogEntry as LogEntry
    from anamnesis.sync.synclog import Summary as Summary
    from anamnesis.sync.synclog import describe_sync as describe_sync
    from anamnesis.sync.synclog import last_sync_summary as last_sync_summary
    from anamnesis.sync.synclog import log_path as log_path
    from anamnesis.sync.synclog import recent as recent
    from anamnesis.sync.synclog import sync_log_summary as sync_log_summary
    from anamnesis.sync.watch import WATCH_LOG_NAME as WATCH_LOG_NAME
    from anamnesis.sync.watch import Watcher as Watcher
    from anamnesis.sync.watch import WatchOptions as WatchOptions
    from anamnesis.sync.watch import outdated_watch as outdated_watch
    from anamnesis.sync.watch import stop_watch as stop_watch
    from anamnesis.sync.watch import watch_pid as watch_pid
    from anamnesis.sync.watch import watch_running as watch_running
    from anamnesis.sync.watch import watch_summary as watch_summary

__getattr__, __dir__ = lazy_face(__name__)
