"""Agents: the coding agents Anamnesis serves, and what it does in their sessions.

Setup: one module per agent (`claude`, `codex`, `gemini`, `opencode`) over a
small interface (`base.Agent`), `files` and `jsonedit` edit their config files
with care, `instructions` is the memory block for their instructions file,
`registry` knows them all and holds init's decisions.
In a session: `inject` (SessionStart) and `recall` (each prompt) choose what
the agent sees without asking; `capture` writes a note of what happened
(SessionEnd, PreCompact) from the `transcript` (Claude Code's, or
`gemini_transcript`), `digest` keeps what matters of it, `summarize_model`
has a model write the summary when turned on; `timeline` reads those notes
back in order. It stands on the store, search and sync.

Other packages use only the names below (tests/architecture/test_faces.py); nothing is
loaded until a name is used, so a hook pays only for what it calls.
"""

from typing import TYPE_CHECKING

from anamnesis.base.face import lazy_face

if TYPE_CHECKING:
    from anamnesis.agents.capture import LOCK_TIMEOUT as LOCK_TIMEOUT
    from anamnesis.agents.capture import NO_SESSION as NO_SESSION
    from anamnesis.agents.capture import TRANSCRIPT_AGENTS as TRANSCRIPT_AGENTS
    from anamnesis.agents.capture import capture_session as capture_session
    from anamnesis.agents.capture import flush_queued as flush_queued
    from anamnesis.agents.capture import queued_notes as queued_notes
    from anamnesis.agents.capture import transcript_problem as transcript_problem
    from anamnesis.agents.claude import claude_files as claude_files
    from anamnesis.agents.claude import find_old_hooks as find_old_hooks
    from anamnesis.agents.inject import build_context as build_context
    from anamnesis.agents.recall import build_recall as build_recall
    from anamnesis.agents.recall import remember_shown as remember_shown
    from anamnesis.agents.registry import AGENTS as AGENTS
    from anamnesis.agents.registry import AgentsStep as AgentsStep
    from anamnesis.agents.registry import chosen as chosen
    from anamnesis.agents.registry import dropping_old_hooks as dropping_old_hooks
    from anamnesis.agents.registry import lacking_instructions as lacking_instructions
    from anamnesis.agents.registry import old_claude_hooks as old_claude_hooks
    from anamnesis.agents.registry import old_hooks_line as old_hooks_line
    from anamnesis.agents.registry import plan_removal as plan_removal
    from anamnesis.agents.registry import remove_agents as remove_agents
    from anamnesis.agents.registry import titled as titled
    from anamnesis.agents.summarize_model import SummaryError as SummaryError
    from anamnesis.agents.summarize_model import ask_model as ask_model
    from anamnesis.agents.summarize_model import clean_output as clean_output
    from anamnesis.agents.summarize_model import config_of as config_of
    from anamnesis.agents.summarize_model import disable_summaries as disable_summaries
    from anamnesis.agents.summarize_model import enable_summaries as enable_summaries
    from anamnesis.agents.summarize_model import readiness as readiness
    from anamnesis.agents.summarize_model import run_summary as run_summary
    from anamnesis.agents.summarize_model import start_background as start_background
    from anamnesis.agents.summarize_model import summary_status as summary_status
    from anamnesis.agents.timeline import Entry as Entry
    from anamnesis.agents.timeline import build_timeline as build_timeline
    from anamnesis.agents.timeline import render_markdown as render_markdown
    from anamnesis.agents.timeline import render_text as render_text
    from anamnesis.agents.transcript import MEMORY_CLOSE as MEMORY_CLOSE

__getattr__, __dir__ = lazy_face(__name__)
