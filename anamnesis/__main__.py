"""`python -m anamnesis` is the same as the `anamnesis` command.

`python -m anamnesis mcp`, which Claude Code starts for every session, goes to
the server directly: the command-line parser (typer, rich and every command's
module) would only add to the server's start.
"""

import sys

if __name__ == "__main__":
    if sys.argv[1:] == ["mcp"]:
        from anamnesis.mcp import main as serve

        serve()
    else:
        from anamnesis.cli import main

        main()
