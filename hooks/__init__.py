"""What Claude Code runs for its hook events: `python -m anamnesis.hooks <event>`.

Shipped in the wheel as the `anamnesis.hooks` package. Kept tiny: the work is
imported lazily from the core only for the event at hand.
"""
