"""The one way Anamnesis runs git: the real binary, never a prompt, clear errors, nothing left running.

GitPython wraps the same binary; calling it directly keeps the start-up of
hooks and `sync` fast and the error text exactly git's.

A git that talks to another machine (fetch, push, ls-remote...) gets the
user's own ssh command with our safety options in front (batch mode, a
connect timeout, keep-alives), a wall-clock bound, and a process group of
its own; when the bound passes, or the caller is interrupted, the whole
group (git and the ssh it started) is stopped. Local gits stay in the
caller's process group (what stops the caller's group stops them), and are
stopped with the caller when it is interrupted.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from anamnesis.base.errors import AnamnesisError, GitError, LockTimeout
from anamnesis.base.fsutil import NO_SPACE_WORDS

CONNECT_TIMEOUT = 5
ALIVE_INTERVAL = 5
SSH_OPTIONS = (
    f"-o BatchMode=yes -o ConnectTimeout={CONNECT_TIMEOUT} "
    f"-o ServerAliveInterval={ALIVE_INTERVAL} -o ServerAliveCountMax=2"
)
SSH_COMMAND = f"ssh {SSH_OPTIONS}"
NETWORK_TIMEOUT = 120.0  # seconds one fetch/push/ls-remote may take; ANAMNESIS_NETWORK_TIMEOUT overrides it
NETWORK_COMMANDS = frozenset({"fetch", "push", "ls-remote", "clone", "pull", "fetch-pack", "send-pack"})
STOP_GRACE = 2.0  # seconds a stopped git gets to clean up before SIGKILL


class GitTimeout(GitError):
    """A git talking to another machine did not finish within its bound (and was stopped)."""


class Stopped(AnamnesisError):
    """The command was stopped by a signal; the git and ssh processes it started were stopped too."""

    def __init__(self, signum: int, what: str = "sync") -> None:
        self.signum = signum
        self.exit_code = 128 + signum
        name = signal.Signals(signum).name
        super().__init__(
            f"{what} stopped by {name} (the git and ssh processes it started were stopped too); "
            "the next sync carries on from here"
        )


def git_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """An environment where git never waits for a human and speaks English."""
    env = dict(os.environ)
    env.update(
        {
            "GIT_TERMINAL_PROMPT": "0",
            "LC_ALL": "C",
            "GIT_EDITOR": "true",
            "GIT_MERGE_AUTOEDIT": "no",
        }
    )
    if extra:
        env.update(extra)
    return env


# -- the ssh command -------------------------------------------------------------------------

_FIRST_WORD = re.compile(r"""\s*((?:"[^"]*"|'[^']*'|[^\s"'])+)""")
_NOT_OPENSSH = ("plink", "tortoiseplink", "putty", "simple")


def _ssh_config(repo: Path | None, environ: dict[str, str]) -> dict[str, str]:
    """core.sshcommand and ssh.variant from git's config as seen in `repo` (with ~/.gitconfig)."""
    if repo is None:
        return {}
    proc = subprocess.run(
        ["git", "-C", str(repo), "config", "--get-regexp", r"^(core\.sshcommand|ssh\.variant)$"],
        capture_output=True, text=True, env=environ, stdin=subprocess.DEVNULL, timeout=30, check=False,
    )
    found: dict[str, str] = {}
    for line in proc.stdout.splitlines():
        key, _, value = line.partition(" ")
        found[key.lower()] = value.strip()  # the last one wins, as in git
    return found


def user_ssh_command(repo: Path | None = None, environ: dict[str, str] | None = None) -> str:
    """The ssh command git would use on its own: GIT_SSH_COMMAND, core.sshCommand, GIT_SSH, or `ssh`."""
    environ = dict(os.environ) if environ is None else environ
    command = environ.get("GIT_SSH_COMMAND", "").strip()
    if not command:
        command = _ssh_config(repo, environ).get("core.sshcommand", "")
    if not command and environ.get("GIT_SSH", "").strip():
        command = shlex.quote(environ["GIT_SSH"].strip())
    return command or "ssh"


def _program(command: str) -> str:
    match = _FIRST_WORD.match(command)
    word = match.group(1) if match else ""
    word = word.replace('"', "").replace("'", "")
    return os.path.basename(word).lower().removesuffix(".exe")


def safe_ssh_command(command: str, variant: str = "") -> str:
    """`command` with our safety options where they win.

    ssh keeps the first value it is given for an option, and reads its
    command line before any config file. So for a command whose program is
    `ssh`, the options go right after the program word, ahead of the user's
    own options and config. A wrapper (any other program) gets them at the
    end of its own words, in front of what git adds, and must hand them to
    ssh; PuTTY's plink (or ssh.variant set to anything but ssh) gets none.
    """
    if SSH_OPTIONS in command:
        return command  # already there (an anamnesis started by anamnesis)
    program = _program(command)
    if variant.lower() in _NOT_OPENSSH or program in _NOT_OPENSSH:
        return command
    match = _FIRST_WORD.match(command)
    if program == "ssh" and match:
        return f"{command[: match.end()]} {SSH_OPTIONS}{command[match.end():]}"
    return f"{command} {SSH_OPTIONS}"


def network_env(repo: Path | None, env: dict[str, str]) -> dict[str, str]:
    """`env` for a git that talks to another machine: its ssh command carries our safety options."""
    env = dict(env)
    config = {} if env.get("GIT_SSH_COMMAND", "").strip() and env.get("GIT_SSH_VARIANT") else _ssh_config(repo, env)
    command = env.get("GIT_SSH_COMMAND", "").strip() or config.get("core.sshcommand", "")
    if not command and env.get("GIT_SSH", "").strip():
        command = shlex.quote(env["GIT_SSH"].strip())
    variant = env.get("GIT_SSH_VARIANT") or config.get("ssh.variant", "")
    env["GIT_SSH_COMMAND"] = safe_ssh_command(command or "ssh", variant)
    return env


def network_timeout(default: float | None = NETWORK_TIMEOUT) -> float:
    """How long one network git call may run: ANAMNESIS_NETWORK_TIMEOUT (seconds), else `default`."""
    value = os.environ.get("ANAMNESIS_NETWORK_TIMEOUT", "").strip()
    try:
        seconds = float(value) if value else float(default or NETWORK_TIMEOUT)
    except ValueError:
        seconds = float(default or NETWORK_TIMEOUT)
    return max(seconds, 1.0)


def _subcommand(args: tuple[str, ...]) -> str:
    """The git subcommand in `args` (skipping `-c key=value` and other global options)."""
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg in ("-c", "-C", "--git-dir", "--work-tree", "--namespace"):
            skip = True
        elif not arg.startswith("-"):
            return arg
    return ""


# -- running git: one process group per call, stopped on timeout or interruption ----------------

_children: dict[int, tuple[subprocess.Popen[Any], bool]] = {}  # pid -> (git, in a group of its own)
_children_guard = threading.Lock()
_stopping: list[int] = []  # the signal that is stopping this process, once one arrived


def _signal(proc: subprocess.Popen[Any], group: bool, sig: int) -> None:
    """`sig` to a git, or to its whole process group (the ssh it started too)."""
    try:
        if group:
            os.killpg(proc.pid, sig)
        elif proc.returncode is None:
            proc.send_signal(sig)
    except (ProcessLookupError, PermissionError):
        pass


def _stop(proc: subprocess.Popen[Any], group: bool, grace: float = STOP_GRACE) -> None:
    """Stop a git (with `group`, everything it started): SIGTERM, time to clean up, then SIGKILL.

    A local git (not `group`) first gets `grace` seconds to finish by itself:
    it is quick, and a finished ref update or checkout needs no repair.
    """
    if not group:
        try:
            proc.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            pass
    _signal(proc, group, signal.SIGTERM)
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        pass
    # ssh can outlive its git by a moment; a group outlives its leader while any member lives.
    _signal(proc, group, signal.SIGKILL)
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        pass


def stop_children() -> None:
    """Stop every git (and the ssh it started) that this process is running now, from any thread."""
    with _children_guard:
        running = list(_children.values())
    for proc, group in running:
        _signal(proc, group, signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE
    for proc, group in running:
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
        _signal(proc, group, signal.SIGKILL)


@contextmanager
def stop_on_signals(what: str = "sync") -> Iterator[None]:
    """Within the block, SIGTERM, SIGINT and SIGHUP stop the gits (and their ssh) and raise `Stopped`.

    The exception unwinds through the caller's cleanup (lock release, sync
    log), so the store is left as a finished sync would leave it. Only the
    first signal raises; a second one while cleaning up only stops children.
    Outside the main thread (where Python cannot install handlers) it does nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, _frame: object) -> None:
        first = not _stopping
        _stopping.append(signum)
        if first:
            raise Stopped(signum, what)
        stop_children()

    signals = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
    previous = {sig: signal.signal(sig, handler) for sig in signals}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
        _stopping.clear()


# A git of someone else's (`git status` in a terminal, an editor's git plugin) takes index.lock for
# a moment; a command of ours that meets it waits this long for it to go, then runs again. It failed
# before touching anything, so running it again is safe. A lock that stays (left by a killed git)
# still fails, as before: recovery deals with those.
LOCK_WAIT = 3.0


def _run(
    repo: Path,
    args: tuple[str, ...],
    input: str | bytes | None,
    text: bool,
    check: bool,
    timeout: float | None,
    env: dict[str, str] | None,
) -> subprocess.CompletedProcess[Any]:
    completed = _run_once(repo, args, input, text, timeout, env)
    if completed.returncode != 0 and _subcommand(args) not in NETWORK_COMMANDS:
        lock = _LOCK_RE.search(_decoded(completed.stderr))
        if lock is not None and _gone_within(Path(lock.group(1)), LOCK_WAIT):
            completed = _run_once(repo, args, input, text, timeout, env)
    if check and completed.returncode != 0:
        command = f"git {' '.join(args[:2])}"
        reason = _reason(completed.stderr or completed.stdout, completed.returncode)
        raise GitError(
            f"{command} failed: {reason}",
            command=command,
            reason=reason,
            stderr=_decoded(completed.stderr),
            returncode=completed.returncode,
        )
    return completed


def _gone_within(path: Path, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while path.exists():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def _run_once(
    repo: Path,
    args: tuple[str, ...],
    input: str | bytes | None,
    text: bool,
    timeout: float | None,
    env: dict[str, str] | None,
) -> subprocess.CompletedProcess[Any]:
    cmd = ["git", "-C", str(repo), "-c", "core.quotepath=off", *args]
    full_env = git_env(env)
    network = _subcommand(args) in NETWORK_COMMANDS
    if network:
        full_env = network_env(repo if repo.is_dir() else None, full_env)
        timeout = network_timeout(timeout)
    try:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=text,
            # file names that are not valid UTF-8 survive the round trip instead of crashing
            encoding="utf-8" if text else None,
            errors="surrogateescape" if text else None,
            env=full_env,
            start_new_session=network,  # a group of its own: stopping it stops the ssh it started
        )
    except FileNotFoundError as exc:
        raise GitError("git is not installed or not on PATH") from exc
    try:
        with _children_guard:
            _children[proc.pid] = (proc, network)
        try:
            stdout, stderr = proc.communicate(input, timeout=timeout)
        except BaseException as exc:
            _stop(proc, network)
            if not isinstance(exc, subprocess.TimeoutExpired):
                raise
            stdout, stderr = proc.communicate()
            what = f"git {_subcommand(args)}"
            if not network:
                raise GitError(f"{what} timed out after {timeout:g}s", command=what) from None
            said = _reason(stderr, 0) if stderr else ""
            raise GitTimeout(
                f"{what} stopped after {timeout:g} s without finishing"
                + (f" (its last words: {said})" if said else ""),
                command=what,
                stderr=_decoded(stderr),
            ) from None
    finally:
        with _children_guard:
            _children.pop(proc.pid, None)
    return subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr)


def _decoded(output: str | bytes) -> str:
    return output.decode("utf-8", "replace") if isinstance(output, bytes) else output


def _reason(output: str | bytes, code: int) -> str:
    """git's own words for a failure (read from its stderr, the only account git gives): its
    fatal/error line if it printed one, else its last line."""
    text = _decoded(output)
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    for line in lines:
        if line.startswith(("fatal:", "error:")):
            return line
    return lines[-1] if lines else f"exit status {code}"


def run_git(
    repo: Path,
    *args: str,
    check: bool = True,
    input: str | None = None,
    timeout: float | None = 120,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run `git -C repo args...`; raise GitError (with git's stderr) if `check` and it fails."""
    return _run(repo, args, input, True, check, timeout, env)


def git_out(repo: Path, *args: str, timeout: float | None = 120) -> str:
    """stdout of a git command that must succeed, stripped."""
    return run_git(repo, *args, timeout=timeout).stdout.strip()


def run_git_bytes(
    repo: Path,
    *args: str,
    input: bytes | None = None,
    check: bool = True,
    timeout: float | None = 120,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[bytes]:
    """`run_git` for raw bytes in and out: blobs of any encoding, NUL-separated listings."""
    return _run(repo, args, input, False, check, timeout, env)


# -- git processes and stale lock files ---------------------------------------------

_LOCK_NAMES = ("index.lock", "HEAD.lock", "ORIG_HEAD.lock", "config.lock", "packed-refs.lock", "shallow.lock")


OBJECT_ID = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")  # a commit id, SHA-1 or SHA-256


def read_blobs(repo: Path, oids: list[str]) -> dict[str, bytes]:
    """The bytes of blobs, read with one `git cat-file --batch`."""
    unique = list(dict.fromkeys(oids))
    if not unique:
        return {}
    out = run_git_bytes(repo, "cat-file", "--batch", input="".join(f"{o}\n" for o in unique).encode()).stdout
    found: dict[str, bytes] = {}
    pos = 0
    for oid in unique:
        end = out.index(b"\n", pos)
        header = out[pos:end].split()
        pos = end + 1
        if header[-1] == b"missing":
            continue
        size = int(header[2])
        found[oid] = out[pos : pos + size]
        pos += size + 1
    return found


def tree_entries(
    repo: Path, treeish: str, paths: list[str], *, check: bool = True, env: dict[str, str] | None = None
) -> dict[str, tuple[str, str]]:
    """{path: (mode, object id)} of those paths in a commit or tree (absent ones left out); each
    path taken as written, never as a glob (a note may be called `[draft].md`). `check` False:
    a treeish that does not exist (HEAD of an empty repo) holds nothing."""
    wanted = list(dict.fromkeys(paths))
    found: dict[str, tuple[str, str]] = {}
    for start in range(0, len(wanted), 500):
        chunk = wanted[start : start + 500]
        proc = run_git_bytes(
            repo, "--literal-pathspecs", "ls-tree", "-r", "-z", "--full-tree", treeish, "--", *chunk,
            check=check, env=env,
        )
        if proc.returncode:
            continue
        asked = set(chunk)
        for record in proc.stdout.decode("utf-8", "surrogateescape").split("\0"):
            meta, tab, path = record.partition("\t")
            if tab and path in asked:
                mode, _kind, oid = meta.split(" ")
                found[path] = (mode, oid)
    return found


def head_ref(repo: Path) -> str:
    """The ref HEAD points at (`refs/heads/main`), or '' for a detached HEAD.

    Read from `.git/HEAD` as git itself reads it, because every write checks
    the branch first and a git process per write is most of its cost; a HEAD
    that is not a plain file (a `.git` file or a symlinked HEAD) or a repo
    whose refs live in a reftable asks git.
    """
    head = repo / ".git" / "HEAD"
    try:
        if not head.is_symlink():
            text = head.read_text(encoding="utf-8").strip()
            target = text.removeprefix("ref: ").strip() if text.startswith("ref: ") else None
            if target is not None and target != "refs/heads/.invalid":  # .invalid: a reftable repo
                return target
            if target is None and OBJECT_ID.fullmatch(text):
                return ""
    except (OSError, UnicodeDecodeError):
        pass
    return run_git(repo, "symbolic-ref", "-q", "HEAD", check=False).stdout.strip()


def lock_files(repo: Path) -> list[Path]:
    """Git lock files present in `repo` (index.lock, HEAD.lock, ref locks...)."""
    git_dir = repo / ".git"
    found = [git_dir / name for name in _LOCK_NAMES if (git_dir / name).exists()]
    refs = git_dir / "refs"
    if refs.is_dir():
        found.extend(refs.rglob("*.lock"))
    return found


def git_processes_in(repo: Path) -> list[int]:
    """Pids of git processes (other than us) working in `repo`, found via /proc or ps/lsof."""
    target = str(repo.resolve())
    if Path("/proc/self").is_dir():
        return _proc_git_processes(target)
    return _ps_git_processes(target)


def _inside(path: str, target: str) -> bool:
    return path == target or path.startswith(target + "/")


def _proc_git_processes(target: str) -> list[int]:
    found: list[int] = []
    me = os.getpid()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        base = f"/proc/{entry.name}"
        try:
            with open(f"{base}/stat", "rb") as handle:
                stat = handle.read()
            comm = stat[stat.index(b"(") + 1 : stat.rindex(b")")]
            state = stat[stat.rindex(b")") + 2 : stat.rindex(b")") + 3]
            if not comm.startswith(b"git") or state in (b"Z", b"X"):
                continue
            cwd = os.readlink(f"{base}/cwd")
            with open(f"{base}/cmdline", "rb") as handle:
                cmdline = handle.read().decode("utf-8", "replace").split("\0")
        except (OSError, ValueError):
            continue
        if _inside(cwd, target) or any(_inside(arg, target) for arg in cmdline):
            found.append(int(entry.name))
    return found


def _ps_git_processes(target: str) -> list[int]:
    try:
        out = subprocess.run(["ps", "-Ao", "pid=,comm="], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    pids = [int(p) for p, _, comm in (line.strip().partition(" ") for line in out.splitlines())
            if p.isdigit() and Path(comm.strip()).name.startswith("git") and int(p) != os.getpid()]
    if not pids or shutil.which("lsof") is None:
        return pids  # cannot tell where they work: assume they may be ours
    found: list[int] = []
    for pid in pids:
        try:
            out = subprocess.run(
                ["lsof", "-a", "-p", str(pid), "-d", "cwd", "-Fn"], capture_output=True, text=True, timeout=10
            ).stdout
        except (OSError, subprocess.SubprocessError):
            found.append(pid)
            continue
        if any(_inside(line[1:], target) for line in out.splitlines() if line.startswith("n")):
            found.append(pid)
    return found


def settle_git(repo: Path, timeout: float = 30.0) -> list[str]:
    """Wait for git processes left in `repo`, then remove lock files nobody owns; what was removed.

    A git killed mid-write (a sync hit by SIGKILL) leaves its lock file behind,
    and every later git in the repo fails until it is gone.
    """
    deadline = time.monotonic() + timeout
    while True:
        busy = git_processes_in(repo)
        if not busy:
            break
        if time.monotonic() >= deadline:
            raise LockTimeout(
                f"git process {', '.join(map(str, busy))} is still working in {repo}; try again when it is done"
            )
        time.sleep(0.05)
    removed: list[str] = []
    for lock in lock_files(repo):
        try:
            lock.unlink()
            removed.append(str(lock.relative_to(repo)))
        except FileNotFoundError:
            pass
    return removed


# -- what went wrong, in ssh's (or git's) own words, and what to do ---------------------------


FailureKind = Literal["outage", "misconfigured"]
"""outage: the peer cannot be reached now (off, asleep, no network, busy) and may be next time;
misconfigured: its answer says it will never work as set up (no repository at that path, a host key
that is unknown or changed, a refused key, no git there) until a person acts."""


@dataclass(frozen=True)
class Failure:
    """Why a git talking to another machine failed (the line that says it), what to do, whether
    waiting can fix it (`kind`), whether the peer answered that it holds no repository at that
    path (`no_repository`: `peers add` refuses such a URL), whether the URL itself can never
    name a machine (`bad_url`: a port that is not a number, a host name with characters no host
    name has; `peers add` refuses it too), and the lock file a git left there that made it fail
    (`lock`), and the host name that did not resolve (`unresolved`). Callers branch on these
    fields, never on the words."""

    reason: str
    hint: str = ""
    kind: FailureKind = "outage"
    no_repository: bool = False
    lock: str = ""
    bad_url: bool = False
    unresolved: str = ""  # the host name ssh could not resolve (see `ssh_config_names`)

    @property
    def text(self) -> str:
        """One line: the reason, then the hint."""
        return f"{self.reason} — {self.hint}" if self.hint else self.reason


_BOILERPLATE = (
    "please make sure you have the correct access rights",
    "and the repository exists",
    "fatal: could not read from remote repository",
    "could not read from remote repository",
    "fatal: the remote end hung up unexpectedly",
)
_LOCK_RE = re.compile(r"Unable to create '([^']+\.lock)': File exists")
_LOCKED_REF_RE = re.compile(r"cannot lock ref '([^']+)'")
SCP_URL = re.compile(r"^(?:[^@/:]+@)?(?P<host>[^/:]+):(?P<path>.*)$")


def is_local_url(url: str) -> bool:
    """Whether a git URL names a path on this machine (not ssh, not a URL scheme)."""
    if url.startswith("file://"):
        return True
    if "://" in url:
        return False
    if url.startswith(("/", "./", "../", "~")) or url in (".", ".."):
        return True
    match = SCP_URL.match(url)
    return match is None or "/" in url.split(":", 1)[0]


def ssh_target(url: str) -> tuple[str, str]:
    """(`[-p PORT ]user@host`, path) of an ssh URL, ('', '') for anything else."""
    if is_local_url(url):
        return "", ""
    match = re.match(r"^(?:ssh|git\+ssh|ssh\+git)://(?:([^@/]+)@)?(\[[^\]]+\]|[^:/]+)(?::(\d+))?(/.*)?$", url)
    if match:
        user, host, port, path = match.groups()
        target = f"{user}@{host}" if user else host
        return (f"-p {port} {target}" if port else target), path or ""
    if "://" in url:
        return "", ""
    host, _, path = url.partition(":")
    return host, path


def _check(url: str, ssh: str) -> str:
    target, _ = ssh_target(url)
    return f"`{ssh} {target} true`" if target else "`ssh HOST true`"


def explain(output: str, url: str = "", ssh: str | None = None, stopped: str = "") -> Failure:
    """The meaningful line of a failed fetch/push/ls-remote (ssh's own when ssh failed) and a hint.

    `ssh` is the user's ssh command, for the command the hint suggests;
    `stopped` is the message of a git stopped at its time bound (GitTimeout).
    git's and ssh's stderr is the only account these foreign programs give of a failure, so this
    reads their text by necessity; what it finds leaves here as fields (`Failure.kind`), and
    nothing downstream reads the words again.
    """
    ssh = ssh or user_ssh_command()
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    lines = [line for line in lines if not line.strip("@ ").startswith("WARNING") and set(line) != {"@"}]
    check = _check(url, ssh)
    target = ssh_target(url)[0].split(" ")[-1].rsplit("@", 1)[-1] or "the peer"  # the host, for prose
    joined = "\n".join(lines)
    if stopped:
        where = f"{target} accepted the connection but did not answer in time: check with {check}"
        if not ssh_target(url)[0]:
            where = f"{url} did not answer in time (a network file system that hangs?)"
        return Failure(stopped, f"{where} (the limit, {network_timeout():g} s, is ANAMNESIS_NETWORK_TIMEOUT)")

    def line_with(*needles: str) -> str:
        return next((line for line in lines if any(n in line for n in needles)), "")

    if "REMOTE HOST IDENTIFICATION HAS CHANGED" in output or "has changed and you have requested strict" in joined:
        forget = line_with("ssh-keygen ") or f"ssh-keygen -R {target}"
        return Failure(
            f"Host key verification failed: the host key of {target} changed",
            f"if you know why (the machine was reinstalled), forget the old key with `{forget}`, "
            f"then run {check} once in a terminal to check and record the new one",
            "misconfigured",
        )
    if "Host key verification failed" in joined or "host key is known for" in joined:
        return Failure(
            "Host key verification failed.",
            f"this machine does not know {target}'s host key yet: run {check} once in a terminal "
            "to check it and record it",
            "misconfigured",
        )
    denied = line_with("Permission denied (", "Too many authentication failures")
    if denied:
        agent = "" if os.environ.get("SSH_AUTH_SOCK") else " (none is reachable here: SSH_AUTH_SOCK is not set)"
        return Failure(
            denied,
            f"{target} refused this machine's ssh key: check with {check}; a key with a passphrase must be "
            f"loaded in an ssh agent{agent}, and a timer reaches an agent only if one ran at "
            "`anamnesis schedule install` and still runs: give this host a key without a passphrase, "
            "or use Tailscale SSH",
            "misconfigured",
        )
    config = line_with("Bad owner or permissions on", "Bad configuration option", "bad configuration options",
                       "Can't open user config file")
    if config:
        return Failure(config, "ssh refuses its own configuration on this machine: fix the file it names, "
                               f"then check with {check}", "misconfigured")
    banner = line_with("timed out during banner exchange", "kex_exchange_identification", "Connection closed by",
                       "Connection reset by")
    if banner:
        return Failure(
            banner,
            f"{target} accepts connections but its ssh server did not answer: check with {check}",
        )
    alive = line_with("not responding")
    if alive and alive.startswith("Timeout"):
        return Failure(alive, f"{target} stopped answering in the middle")
    bad_host = _bad_host_name(line_with("Bad port '", "hostname contains invalid characters",
                                        "Could not resolve hostname"))
    if bad_host:
        return Failure(
            bad_host,
            f"the URL {url or 'given'} names no machine, now or later: a port must be a number from 1 to 65535 "
            "(`ssh://HOST:PORT/PATH`), a host name only letters, digits, '.', '-' and '_'; "
            "give the right one with `anamnesis peers add NAME URL`",
            "misconfigured",
            bad_url=True,
        )
    resolve = line_with("Could not resolve hostname")
    if resolve:
        host = _UNRESOLVABLE.search(resolve)
        return Failure(
            resolve,
            "check the host name in the URL (`ssh HOST true` must reach it); for Tailscale: "
            "is `tailscale status` up, with MagicDNS on?",
            unresolved=host.group("host") if host else "",
        )
    connect = line_with("ssh: connect to host")
    if connect:
        return Failure(connect, f"{target} is off, asleep or not running ssh")
    missing = line_with("git-upload-pack", "git-receive-pack")
    if missing and "not found" in missing:
        return Failure(
            missing, f"git is not installed on {target}, or not on the PATH of its ssh logins", "misconfigured"
        )
    dubious = line_with("detected dubious ownership")
    if dubious:
        add = line_with("git config --global --add safe.directory")
        return Failure(
            dubious.removeprefix("fatal:").strip(),
            "the repository belongs to another user, and git refuses it until told to trust it"
            + (f": if you do, `{add}`" if add else " (git's safe.directory setting)"),
            "misconfigured",
        )
    no_repo = line_with("does not appear to be a git repository", "not a git repository") or next(
        (line for line in lines if "repository" in line.lower() and "not found" in line), ""
    )
    if no_repo:
        return _no_repository(no_repo, url, target)
    unpack = line_with("remote unpack failed")
    if unpack:
        where = target if ssh_target(url)[0] else (url or "the peer")
        full = " (its disk is full)" if any(w in joined for w in NO_SPACE_WORDS) else ""
        return Failure(
            unpack.removeprefix("error:").strip(),
            f"{where} could not store what was sent{full}: its store cannot be written there (a full disk, or "
            "folders of its memory/.git this user cannot write); fix it on that machine (`anamnesis sync` there "
            "names the folder and the fix), then sync again",
            "misconfigured",
        )
    locked = _LOCK_RE.search(joined)
    if locked:
        ref = _LOCKED_REF_RE.search(joined)
        name = f"cannot lock ref '{ref.group(1)}': " if ref else ""
        lock = os.path.normpath(locked.group(1))
        return Failure(f"{name}{lock} exists", "", lock=lock)
    return Failure(_plain_reason(lines))


_UNRESOLVABLE = re.compile(r"Could not resolve hostname (?P<host>.*): [^:]*$")


def _bad_host_name(line: str) -> str:
    """`line` when ssh's words say the URL itself is wrong, not the network: a port that is not a
    number (`Bad port '0'`; git hands a port it cannot read to ssh as part of the host name, so
    `ssh://desk:22x/m` fails as `Could not resolve hostname desk:22x`), or a host name with a
    character no host name has (a space, a colon). A plain unknown name stays an outage: that is
    what a network or Tailscale that is down looks like."""
    if line.startswith("Bad port '") or "hostname contains invalid characters" in line:
        return line
    match = _UNRESOLVABLE.search(line)
    if match and re.search(r"[^A-Za-z0-9._-]", match.group("host")):
        return line
    return ""


def ssh_config_names(ssh_command: str = "ssh") -> dict[str, str]:
    """The names this machine knows other machines by, each with the file that names it: the
    aliases and HostName values of the ssh config `ssh_command` reads (its `-F` file, else
    ~/.ssh/config and what it includes) and the names in /etc/hosts."""
    words = shlex.split(ssh_command) if ssh_command.strip() else ["ssh"]
    config = Path("~/.ssh/config").expanduser()
    for position, word in enumerate(words):
        if word == "-F" and position + 1 < len(words):
            config = Path(words[position + 1]).expanduser()
        elif word.startswith("-F") and len(word) > 2:
            config = Path(word[2:]).expanduser()
    names: dict[str, str] = {}
    _read_ssh_config(config, names, depth=0)
    try:
        hosts = Path("/etc/hosts").read_text(encoding="utf-8", errors="replace")
    except OSError:
        hosts = ""
    for line in hosts.splitlines():
        for name in line.split("#", 1)[0].split()[1:]:
            if name == "localhost" or not name.startswith(("localhost", "ip6-")):  # not its variants
                names.setdefault(name.lower(), "/etc/hosts")
    return names


def _read_ssh_config(path: Path, names: dict[str, str], depth: int) -> None:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return
    for line in text.splitlines():
        parts = line.split("#", 1)[0].replace("=", " ", 1).split()
        if len(parts) < 2:
            continue
        keyword = parts[0].lower()
        if keyword in ("host", "hostname"):
            for name in parts[1:]:
                if not re.search(r"[*?!%]", name):
                    names.setdefault(name.lower(), str(path))
        elif keyword == "include" and depth < 4:
            for pattern in parts[1:]:
                where = Path(pattern).expanduser()
                where = where if where.is_absolute() else Path("~/.ssh").expanduser() / where
                for included in sorted(where.parent.glob(where.name)) if where.parent.is_dir() else []:
                    _read_ssh_config(included, names, depth + 1)


_REMOVABLE = ("/media/", "/run/media/", "/mnt/", "/Volumes/", "/net/")  # where disks and shares are mounted


def _unmounted(path: str) -> bool:
    """Whether a missing local `path` looks like one on a disk that is not mounted now: under a folder
    where disks are mounted, or below an empty folder (a mount point with nothing on it)."""
    path = os.path.abspath(os.path.expanduser(path.removeprefix("file://")))
    if os.path.exists(path):
        return False
    if path.startswith(_REMOVABLE):
        return True
    parent = os.path.dirname(path)
    while parent != os.path.dirname(parent) and not os.path.exists(parent):
        parent = os.path.dirname(parent)
    try:
        return parent != os.path.dirname(parent) and os.path.isdir(parent) and not os.listdir(parent)
    except OSError:
        return False


def _no_repository(line: str, url: str, target: str) -> Failure:
    """A peer that answered that there is no repository at its path: a typo, or a store moved away."""
    reason = line.removeprefix("fatal:").removeprefix("error:").strip()
    if url and is_local_url(url):
        path = url.removeprefix("file://")
        if _unmounted(path):
            return Failure(reason, f"{path} is not there now: is the disk it lives on mounted?")
        where = f"{path} does not exist" if not os.path.exists(os.path.expanduser(path)) else f"{path} holds no repository"
        store = os.path.join(os.path.expanduser(path), "memory")
        check = f"did you mean {store}?" if os.path.isdir(os.path.join(store, ".git")) else "check the path"
    else:
        where = f"{target} has no repository at {ssh_target(url)[1] or 'that path'}"
        check = "check the path (`anamnesis status` there shows its home; a store's repository is HOME/memory)"
    return Failure(
        reason,
        f"{where}: {check}, then give the right one with `anamnesis peers add NAME URL`",
        "misconfigured",
        no_repository=True,
    )


def _plain_reason(lines: list[str]) -> str:
    """The line that says what went wrong (ssh's or git's own), without git's boilerplate."""
    kept = [line for line in lines if not line.lower().startswith(_BOILERPLATE)]
    for prefix in ("ssh:", "fatal:", "error:", "remote:"):
        for line in kept:
            if line.startswith(prefix):
                return line.removeprefix("fatal:").removeprefix("error:").strip()
    if kept:
        return kept[0]
    return lines[0].removeprefix("fatal:").strip() if lines else ""
