"""Starting work that must not hold up the caller: a detached `python -P …` of our own.

Hooks, sync and the MCP server hand slow work (a sync, embedding, a
model-written summary, a capture retry) to a child that outlives them. One
helper so every such child starts the same way: its own session (a hook's
process group being killed does not kill it), stdin from /dev/null, output
appended to a log under the store's logs/, the store's home as working folder
and `-P` (the project folder a hook runs in must not shadow the package: a
checkout of Anamnesis itself holds an `anamnesis/` directory).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from anamnesis.base.paths import Store


def spawn_detached(
    store: Store, args: list[str], log_name: str, env: dict[str, str] | None = None, nice: int = 0
) -> int:
    """Start `python -P ARGS` detached with output to logs/LOG_NAME and return its pid at once.

    `env` adds variables to the child's environment (ANAMNESIS_HOME is always
    set to this store). `nice` lowers the child's priority from its first
    instruction (through `nice(1)` where there is one), so a background job
    does not compete with the hook that is still exiting or with what the
    person does next. Raises OSError when the process cannot be started.
    """
    store.log_dir.mkdir(parents=True, exist_ok=True)
    child_env = {**os.environ, **(env or {}), "ANAMNESIS_HOME": str(store.home)}
    runner = shutil.which("nice") if nice > 0 else None
    prefix = [runner, "-n", str(nice)] if runner else []
    with open(store.log_dir / log_name, "ab") as log:
        return subprocess.Popen(
            [*prefix, sys.executable, "-P", *args],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
            close_fds=True,
            env=child_env,
            cwd=store.home,
        ).pid
