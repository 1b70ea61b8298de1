"""Entry points Claude Code runs for its hook events (see docs/claude-code.md)."""
