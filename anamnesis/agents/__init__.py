"""The coding agents Anamnesis registers its MCP server with (Claude Code, Codex CLI, Gemini CLI, OpenCode).

One module per agent over a small interface (`base.Agent`); `files` edits
their config files with care; `registry` knows them all and holds init's
decisions. Nothing is imported here, so `anamnesis.agents.files` can be
used without loading every agent.
"""
