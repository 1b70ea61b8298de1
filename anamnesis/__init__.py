"""Anamnesis: memory for coding agents that follows you across your machines."""

import os
import sys

__version__ = "0.2.0"

# The distribution name on the public package index belongs, for now, to another program
# (anamnesis-memory 0.1.3, a different design with the same command name): `--version`
# says which one this is and where it runs from, so a user who got the other one can tell.
ABOUT = (
    "Anamnesis: markdown notes in a git repo synced between your machines, a local search "
    "index, an MCP server for coding agents and Claude Code hooks"
)


def version_text() -> str:
    """What `anamnesis --version` prints: version, which program, and where it is installed."""
    where = os.path.dirname(os.path.abspath(__file__))
    return (
        f"anamnesis {__version__}\n"
        f"{ABOUT}.\n"
        "Installed from this project's source (a clone or a wheel built from it); it is not the "
        "anamnesis-memory 0.1.3 package on the public package index, which is another program.\n"
        f"package: {where}\npython:  {sys.executable}"
    )
