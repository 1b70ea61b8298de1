"""The registry of agents, and init's decisions about them.

`AGENTS` maps each name `--agent` accepts to its `Agent`. `chosen` decides
which agents an `init` sets up; `AgentsStep` plans them all before anything
is written (one unsafe file stops init with nothing changed) and applies
them once the store exists.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from anamnesis.agents import instructions
from anamnesis.agents.base import Agent, McpFileAgent
from anamnesis.agents.claude import ClaudeCode, find_old_hooks
from anamnesis.agents.codex import Codex
from anamnesis.agents.files import AgentConfigError, FileChange, describe, read_text
from anamnesis.agents.gemini import Gemini
from anamnesis.agents.opencode import OpenCode
from anamnesis.base.errors import AnamnesisError, UsageError

if TYPE_CHECKING:
    from anamnesis.base.paths import Store

AGENTS: dict[str, Agent] = {agent.name: agent for agent in (ClaudeCode(), Codex(), Gemini(), OpenCode())}


def get_agent(name: str) -> Agent:
    """The agent called `name`; a one-line error naming the supported ones otherwise."""
    agent = AGENTS.get(name.strip().lower())
    if agent is None:
        raise UsageError(f"unknown agent {name!r}; supported: {', '.join(AGENTS)}")
    return agent


def chosen(names: list[str] | None, with_claude: bool = True) -> list[Agent]:
    """The agents init sets up: those named, else Claude Code plus every other one found installed."""
    if names:
        picked: list[Agent] = []
        for name in names:
            agent = get_agent(name)
            if agent not in picked:
                picked.append(agent)
        return picked
    return [agent for agent in AGENTS.values() if (with_claude or agent.name != "claude") and agent.detect()]


def old_claude_hooks(agents: list[Agent]) -> tuple[Path, list[str]] | None:
    """(Claude Code's settings.json, events) when Claude Code is among `agents` and its settings
    still hold hooks of anamnesis-memory 0.1.3 (they run that program against this store)."""
    if not any(isinstance(agent, ClaudeCode) for agent in agents):
        return None
    path, events = find_old_hooks()
    return (path, events) if events else None


def dropping_old_hooks(agents: list[Agent]) -> list[Agent]:
    """`agents` with Claude Code set to remove the 0.1.3 hooks as it is set up."""
    return [ClaudeCode(drop_old=True) if isinstance(agent, ClaudeCode) else agent for agent in agents]


def old_hooks_line(path: Path, events: list[str]) -> str:
    """What init and doctor say about 0.1.3 hooks left in Claude Code's settings."""
    return (
        f"Claude Code: {path} still holds hooks of anamnesis-memory 0.1.3 ({', '.join(events)}); they run"
        " that program in every session, against this store: `anamnesis init --remove-old-hooks` removes them"
    )


class AgentsStep:
    """init's agents step: plan every chosen agent's changes now, apply them later.

    A config file that cannot be edited safely stops the step before
    anything is written when the person named that agent (`--agent`), and
    always for Claude Code. An agent init found installed on its own is
    skipped instead, with a line saying why and how to set it up later: the
    store, Claude Code and the other agents are still set up.
    """

    def __init__(
        self, store: Store, agents: list[Agent], with_instructions: bool = True, named: bool = False
    ) -> None:
        self.store = store
        self.with_instructions = with_instructions
        self.plans: list[tuple[Agent, list[FileChange]]] = []
        self.skipped: list[str] = []
        for agent in agents:  # planned before anything is written
            try:
                self.plans.append((agent, agent.plan_install(store, with_instructions=with_instructions)))
            except AgentConfigError as exc:
                if named or isinstance(agent, ClaudeCode):
                    raise
                self.skipped.append(
                    f"{agent.title}: skipped (its config cannot be edited safely): {exc}. Once it is fixed,"
                    f" `anamnesis init --agent {agent.name}` sets it up"
                )

    def planned(self, with_diff: bool = False) -> list[str]:
        """Lines for init's plan, per agent (with diffs for --print)."""
        return titled(self.plans, with_diff) + self.skipped

    def apply(self) -> list[str]:
        """Write the changes (idempotent); the lines for init's report."""
        done: list[str] = []
        for agent, _changes in self.plans:
            lines = agent.install(self.store, with_instructions=self.with_instructions)
            done.extend(f"{agent.title}: {line}" for line in lines or ["already set up, nothing to change"])
            if isinstance(agent, ClaudeCode) and not agent.on_path():
                done.append(
                    f"{agent.title}: not installed here (no `{agent.binary}` on PATH): its settings are ready for"
                    " when it is"
                )
        return done + self.skipped


def titled(plans: list[tuple[Agent, list[FileChange]]], with_diff: bool = False) -> list[str]:
    """describe() of each agent's changes, each line naming the agent (a diff is left as it is)."""
    return [
        line if line.startswith("--- ") else f"{agent.title}: {line}"
        for agent, changes in plans
        for line in describe(changes, with_diff)
    ]


def plan_removal(store: Store, agents: list[Agent]) -> list[tuple[Agent, list[FileChange]]]:
    """What uninstall would change, per agent (nothing written)."""
    return [(agent, agent.plan_uninstall(store)) for agent in agents]


def remove_agents(store: Store, agents: list[Agent], named: bool = True) -> list[str]:
    """Remove what init added to these agents; the lines for the report. A file that cannot be
    safely edited stops it before anything is written when the agents were `named` (--agent);
    otherwise that agent is skipped with a line saying how to remove it later."""
    skipped: list[str] = []
    ready: list[Agent] = []
    for agent in agents:
        try:
            agent.plan_uninstall(store)
        except AgentConfigError as exc:
            if named:
                raise
            skipped.append(
                f"{agent.title}: skipped (its config cannot be edited safely): {exc}. Once it is fixed,"
                f" `anamnesis uninstall --agent {agent.name}` removes what init added"
            )
            continue
        ready.append(agent)
    done: list[str] = []
    for agent in ready:
        done.extend(f"{agent.title}: {line}" for line in agent.uninstall(store))
    return done + skipped


def lacking_instructions(agents: list[Agent]) -> list[Path]:
    """The instructions files of these agents that do not hold the memory block yet (init asks first)."""
    lacking: list[Path] = []
    for agent in agents:
        path = agent.instructions_path() if isinstance(agent, McpFileAgent) else None
        if path is not None:
            try:
                text = read_text(path)
            except AnamnesisError:
                text = None
            if not instructions.present(text):
                lacking.append(path)
    return lacking
