"""What Claude Code runs for its hook events: `python -P -m anamnesis.hooks <event>`.

Shipped in the wheel as the `anamnesis.hooks` package. Kept small: `run`
imports at the top only the core modules every event loads anyway, and the
rest (injection, recall, capture) only for the event at hand. `-P` keeps the
project folder (the hook's working directory) off sys.path, so a project
holding an `anamnesis/` directory cannot shadow the package. The event may be
given as Claude Code names it (`SessionStart`) or as `session-start`.
"""
