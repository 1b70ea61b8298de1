"""The opt-in model-written summary of a session note, added later by a detached process.

The deterministic session note (`capture`) is the default and stands on its
own. A person who wants a model's summary on top turns it on for this machine
(settings.json, key "summary"; never in memory/) with one of two providers:

- "claude": their own Claude Code, headless (`claude -p`), with no tools, no
  MCP servers, no hooks and no saved session;
- "api": the Anthropic Messages API, with a key read from an environment
  variable they name or from a key file outside memory/ (the key itself is
  never stored in settings, notes or logs).

The capture hooks never wait for it: after the note is written they start
`python -P -m anamnesis summary run NOTE --transcript T --hook` detached
(`start_background`). That process sends the model the note's own
(redacted) digest and the assistant's latest messages from the transcript
(each redacted, then the whole text again), within a timeout, redacts the
answer, and puts it at the top of the note as a marked section through
`store.update_note` (under the store lock, against the text it read, so an
edit made meanwhile is kept). The section records a hash of the input: the same session content is
never summarised twice. Any failure is reported in the hooks log and leaves
the note as it was.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from anamnesis.agents.transcript import summarize
from anamnesis.base.errors import AnamnesisError, ExitCode, NoteChanged, UsageError
from anamnesis.base.notes import Note, parse_note
from anamnesis.base.settings import load_settings, save_settings, update_section
from anamnesis.base.text import trim
from anamnesis.store import read_note, redact, resolve_ref, safe_path, update_note

if TYPE_CHECKING:
    from anamnesis.base.paths import Store

SETTINGS_KEY = "summary"
PROVIDERS = ("claude", "api")
SECTION = "## Summary (model-written)"
MARK = "anamnesis:model-summary"
DEFAULT_API_MODEL = "claude-haiku-4-5"
DEFAULT_CLAUDE_MODEL = "haiku"  # Claude Code's alias of its small model: a summary needs no more
DEFAULT_BASE_URL = "https://api.anthropic.com"
API_VERSION = "2023-06-01"
MAX_INPUT = 24_000  # characters sent to the model (about 6,000 tokens at most)
MAX_TEXTS = 6_000  # of those, the assistant's own latest messages
MAX_TOKENS = 700  # the answer's length limit, in tokens
MAX_OUTPUT = 3_000  # characters of the answer kept in the note
MAX_TIMEOUT = 600.0
SYSTEM = (
    "You write the summary of a coding session for the developer's own notes. You get a digest of "
    "the session: what was asked, files touched, commands run, the assistant's messages. Answer in "
    "markdown with at most three short bullet lists, each under a bold label: **Done**, **Decided**, "
    "**Open** (leave out a list with nothing in it). At most 12 bullets in all, one line each. Use only "
    "facts from the digest; no preamble, no headings, no closing remarks."
)
_SECTION_RE = re.compile(r"(?ms)^## Summary \(model-written\)[ \t]*\r?\n.*?(?=^## |\Z)")
_MARK_RE = re.compile(rf"<!-- {re.escape(MARK)} input=([0-9a-f]{{12}}) [^>\n]*-->")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


class SummaryError(AnamnesisError):
    """The model summary could not be made (not set up, the model failed or was too slow)."""

    exit_code = ExitCode.FAILED


@dataclass
class SummaryConfig:
    """This machine's summary settings (what `summary status` shows, without any key)."""

    enabled: bool = False
    provider: str = "claude"
    model: str = ""
    claude_bin: str = ""
    base_url: str = ""
    key_env: str = "ANTHROPIC_API_KEY"
    key_file: str = ""
    timeout: float = 120.0


@dataclass
class SummaryResult:
    """What `run` did: "written" or "unchanged" (this input was summarised already)."""

    path: str
    action: str
    detail: str = ""


def config_of(store: Store) -> SummaryConfig:
    """The summary settings of this machine, over the defaults; unknown keys are ignored."""
    raw = load_settings(store).get(SETTINGS_KEY)
    raw = raw if isinstance(raw, dict) else {}
    known = SummaryConfig.__dataclass_fields__
    config = SummaryConfig(**{k: v for k, v in raw.items() if k in known})
    config.enabled = config.enabled is True
    try:
        config.timeout = min(max(float(config.timeout), 1.0), MAX_TIMEOUT)
    except (TypeError, ValueError):
        config.timeout = SummaryConfig.timeout
    return config


def _check(store: Store, config: SummaryConfig) -> None:
    """Refuse settings that cannot work or that would put a key where it travels."""
    if config.provider not in PROVIDERS:
        raise UsageError(f"unknown provider {config.provider!r}; use one of: {', '.join(PROVIDERS)}")
    if config.key_env and not _ENV_NAME.match(config.key_env):
        raise UsageError(
            f"{config.key_env!r} is not an environment variable name (give the NAME, not the key)"
        )
    if config.key_file:
        path = Path(config.key_file).expanduser()
        if not path.is_absolute():
            raise UsageError(f"the key file must be an absolute path, not {config.key_file!r}")
        if _inside(path, store.memory):
            raise UsageError(
                f"the key file {path} is inside {store.memory}, which is synced by git; move it out"
            )
    if config.base_url and not re.match(r"https?://[^\s/]+", config.base_url):
        raise UsageError(f"the base URL must start with http:// or https://, not {config.base_url!r}")
    if not 1 <= config.timeout <= MAX_TIMEOUT:
        raise UsageError(f"the timeout must be between 1 and {MAX_TIMEOUT:.0f} seconds")


def _inside(path: Path, folder: Path) -> bool:
    resolved, base = os.path.realpath(path), os.path.realpath(folder)
    return resolved == base or resolved.startswith(base + os.sep)


def enable_summaries(store: Store, provider: str, **changes: Any) -> SummaryConfig:
    """Turn the model summary on for this machine with `provider`; other fields change when given.

    `changes` takes the fields of `SummaryConfig` (None leaves a field as it is).
    Returns the new settings; `readiness` says whether it can run right now.
    """
    config = config_of(store)
    config.enabled, config.provider = True, provider
    for key, value in changes.items():
        if key not in SummaryConfig.__dataclass_fields__ or key in ("enabled", "provider"):
            raise UsageError(f"unknown summary setting {key!r}")
        if value is not None:
            setattr(config, key, str(Path(value).expanduser()) if key == "key_file" and value else value)
    _check(store, config)
    settings = load_settings(store)
    settings[SETTINGS_KEY] = asdict(config)
    save_settings(store, settings)
    return config


def disable_summaries(store: Store) -> None:
    """Turn the model summary off here (the other fields are kept for a later enable)."""
    update_section(store, SETTINGS_KEY, enabled=False)


def find_claude(config: SummaryConfig) -> str | None:
    """The Claude Code binary: the configured one, else `claude` on PATH."""
    wanted = os.path.expanduser(config.claude_bin) if config.claude_bin else "claude"
    if os.sep in wanted:
        return wanted if os.path.isfile(wanted) and os.access(wanted, os.X_OK) else None
    return shutil.which(wanted)


def _api_key(store: Store, config: SummaryConfig) -> str:
    """The API key from the key file or the named environment variable; a clear error if neither."""
    if config.key_file:
        path = Path(config.key_file).expanduser()
        if _inside(path, store.memory):
            raise SummaryError(f"the key file {path} is inside memory/, which is synced; refusing to use it")
        try:
            key = path.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise SummaryError(f"cannot read the key file {path}: {exc.strerror or exc}") from None
        if not key:
            raise SummaryError(f"the key file {path} is empty")
        return key
    key = os.environ.get(config.key_env or "", "").strip()
    if not key:
        raise SummaryError(f"no API key: the environment variable {config.key_env or '(none)'} is not set")
    return key


def readiness(store: Store, config: SummaryConfig) -> str | None:
    """Why the summary cannot run now (no Claude Code binary, no key), or None when it can."""
    if config.provider == "claude":
        if find_claude(config) is None:
            where = config.claude_bin or "claude on PATH"
            return (
                f"Claude Code not found ({where}); set it with `anamnesis summary enable --claude-bin PATH`"
            )
        return None
    try:
        _api_key(store, config)
    except SummaryError as exc:
        return str(exc)
    return None


def summary_status(store: Store) -> dict[str, Any]:
    """What `summary status` reports: the settings (never a key), where the key comes from, readiness."""
    config = config_of(store)
    info: dict[str, Any] = {"enabled": config.enabled, "provider": config.provider, "timeout": config.timeout}
    if config.provider == "claude":
        info["model"] = config.model or DEFAULT_CLAUDE_MODEL
        info["claude_bin"] = find_claude(config) or config.claude_bin or "(not found)"
    else:
        info["model"] = config.model or DEFAULT_API_MODEL
        info["base_url"] = _base_url(config)
        info["key_from"] = (
            f"file {config.key_file}" if config.key_file else f"environment variable {config.key_env}"
        )
    info["problem"] = readiness(store, config)
    return info


def _base_url(config: SummaryConfig) -> str:
    return (config.base_url or os.environ.get("ANTHROPIC_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")


# -- the hook's side: start it, cheaply --------------------------------------------------


def start_background(store: Store, note_path: str, transcript: str) -> int | None:
    """Start the summary of `note_path` detached when it is on here; its pid, or None when off.

    Costs one settings read when off. Never waits for the model.
    """
    try:
        if not config_of(store).enabled:
            return None
    except AnamnesisError:
        return None
    # lazy: spawn loads only when the summary is on; the SessionEnd hook runs with it off
    from anamnesis.base.spawn import spawn_detached

    args = ["-m", "anamnesis", "summary", "run", note_path, "--transcript", transcript, "--hook"]
    try:
        return spawn_detached(store, args, "hooks-background.log", nice=10)
    except OSError:  # no process to spare: the deterministic note is written, that is what matters
        return None


# -- the note's section --------------------------------------------------------------------


def split_section(body: str) -> tuple[str, str]:
    """`body` without the model-written section, and that section ("" when there is none)."""
    found = _SECTION_RE.search(body)
    if not found:
        return body, ""
    rest = body[: found.start()] + body[found.end() :]
    return rest.lstrip("\n") if found.start() == 0 else rest, found.group(0).rstrip("\n") + "\n"


def with_section(body: str, section: str) -> str:
    """`body` with `section` as its model-written section (at the top), replacing any there was."""
    rest, _ = split_section(body)
    if not section:
        return rest
    return section.rstrip("\n") + "\n\n" + rest.lstrip("\n")


def summarised_input(body: str) -> str | None:
    """The input hash recorded by the note's model-written section, if it has one."""
    _, section = split_section(body)
    found = _MARK_RE.search(section)
    return found.group(1) if found else None


def render_section(text: str, input_hash: str, by: str) -> str:
    """The marked section: heading, the (redacted) summary, and a comment naming its input and maker."""
    by = re.sub(r"[^A-Za-z0-9._/:@-]", "", by)[:80] or "model"
    return f"{SECTION}\n\n{text.strip()}\n\n<!-- {MARK} input={input_hash} by={by} -->\n"


def clean_output(text: str) -> str:
    """The model's answer made safe for the note: redacted, no headings of its own, bounded."""
    text = _MARK_RE.sub("", text.replace("\r\n", "\n")).strip()
    text = re.sub(r"(?m)^[ \t]*#{1,6}[ \t]+(.+?)[ \t#]*$", r"**\1**", text)  # a heading would end our section
    return trim(redact(text), MAX_OUTPUT)


# -- the input -----------------------------------------------------------------------------


def model_input(note: Note, transcript: Path | None) -> str:
    """What the model reads: the note's own text (the deterministic digest `capture` wrote, already
    redacted; without our section) and, from a readable transcript, the assistant's latest messages,
    each redacted; then the whole text is redacted once more."""
    text = f"Session note: {note.title}\n\n{split_section(note.body)[0].strip()}\n"
    said = [] if transcript is None else summarize(transcript).texts
    kept: list[str] = []
    used = 0
    pieces = [redact(t).strip() for t in said if t.strip()]
    for piece in reversed(pieces):  # the latest first, within the bound
        if used + len(piece) > MAX_TEXTS:
            break
        kept.append(piece)
        used += len(piece)
    if kept:
        text += "\n## The assistant's latest messages\n\n" + "\n\n---\n\n".join(reversed(kept)) + "\n"
    return trim(redact(text), MAX_INPUT)


def input_hash(text: str) -> str:
    """A short hash of the model's input: the same content is never summarised twice."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:12]


# -- asking the model ----------------------------------------------------------------------


def ask_model(store: Store, config: SummaryConfig, prompt: str, system: str = SYSTEM) -> str:
    """The model's answer to `prompt` (already redacted) from the configured provider, within the
    timeout; `system` says what it is asked to do (a session summary unless told otherwise)."""
    if config.provider == "claude":
        return _ask_claude(store, config, prompt, system)
    if config.provider == "api":
        return _ask_api(store, config, prompt, system)
    raise SummaryError(f"unknown provider {config.provider!r}")


def _one_line(text: str, limit: int = 300) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _ask_claude(store: Store, config: SummaryConfig, prompt: str, system: str) -> str:
    """`claude -p` with our system prompt, no tools, no MCP servers, no hooks and no saved session."""
    binary = find_claude(config)
    if binary is None:
        raise SummaryError(f"Claude Code not found ({config.claude_bin or 'claude on PATH'})")
    command = [
        binary,
        "-p",
        "--output-format",
        "json",
        "--no-session-persistence",
        "--tools",
        "",
        "--strict-mcp-config",
        "--settings",
        json.dumps({"disableAllHooks": True}),  # its SessionEnd must not capture this run as a session
        "--system-prompt",
        system,
    ]
    command += ["--model", config.model or DEFAULT_CLAUDE_MODEL]
    store.state_dir.mkdir(parents=True, exist_ok=True)
    try:
        proc = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=store.state_dir,
            start_new_session=True,  # on timeout the whole group goes, helpers included
        )
    except OSError as exc:
        raise SummaryError(f"cannot start Claude Code ({binary}): {exc.strerror or exc}") from None
    try:
        out, err = proc.communicate(prompt.encode("utf-8", "replace"), timeout=config.timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        proc.communicate()
        raise SummaryError(f"Claude Code gave no answer within {config.timeout:.0f} s") from None
    stdout = out.decode("utf-8", "replace")
    try:
        answer = json.loads(stdout)
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        said = _one_line(err.decode("utf-8", "replace") or stdout) or "no output"
        raise SummaryError(f"Claude Code failed (exit {proc.returncode}): {said}")
    result = answer.get("result")
    if answer.get("is_error") or proc.returncode != 0 or not isinstance(result, str):
        said = _one_line(str(result or answer.get("subtype") or "no result"))
        raise SummaryError(f"Claude Code failed (exit {proc.returncode}): {said}")
    return result


def _ask_api(store: Store, config: SummaryConfig, prompt: str, system: str) -> str:
    """One Messages API request (not streamed) with the key from the environment or the key file."""
    import urllib.error  # lazy: pulls http.client and ssl; only the api provider, off the hooks
    import urllib.request  # lazy: http.client and ssl only for the api provider, off the hooks

    key = _api_key(store, config)
    url = _base_url(config) + "/v1/messages"
    body = {
        "model": config.model or DEFAULT_API_MODEL,
        "max_tokens": MAX_TOKENS,
        "system": system,
        "messages": [{"role": "user", "content": prompt}],
    }
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode("utf-8"),
        headers={"x-api-key": key, "anthropic-version": API_VERSION, "content-type": "application/json"},
        method="POST",
    )
    deadline = time.monotonic() + config.timeout
    try:
        with urllib.request.urlopen(request, timeout=config.timeout) as response:
            chunks: list[bytes] = []
            while chunk := response.read(65536):
                chunks.append(chunk)
                if time.monotonic() > deadline:
                    raise TimeoutError
            raw = b"".join(chunks)
    except urllib.error.HTTPError as exc:
        detail = exc.read(4096).decode("utf-8", "replace")
        try:
            detail = str(json.loads(detail)["error"]["message"])
        except (ValueError, KeyError, TypeError):
            pass
        raise SummaryError(f"the API at {url} answered {exc.code}: {_one_line(detail)}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", None) or exc
        if isinstance(reason, TimeoutError):
            raise SummaryError(f"the API at {url} gave no answer within {config.timeout:.0f} s") from None
        raise SummaryError(f"cannot reach the API at {url}: {_one_line(str(reason))}") from None
    try:
        answer = json.loads(raw)
        texts = [b["text"] for b in answer["content"] if isinstance(b, dict) and b.get("type") == "text"]
    except (ValueError, KeyError, TypeError):
        raise SummaryError(f"the API at {url} sent an answer that is not a message") from None
    return "".join(str(t) for t in texts)


# -- running it ----------------------------------------------------------------------------


@contextmanager
def _job_lock(store: Store, note_id: str, timeout: float) -> Iterator[None]:
    """One summary of a note at a time (a PreCompact run and a SessionEnd run must not race);
    machine-local and apart from the store lock, which is never held while the model thinks."""
    folder = store.state_dir / "summary"
    folder.mkdir(parents=True, exist_ok=True)
    name = re.sub(r"[^A-Za-z0-9_-]", "_", note_id)[:80] or "note"
    fd = os.open(folder / f"{name}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise SummaryError("another summary of this note is still running") from None
                time.sleep(0.2)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def run_summary(store: Store, ref: str, *, transcript: Path | None = None, force: bool = False) -> SummaryResult:
    """Ask the model for the summary of note `ref` and put it into the note as its marked section.

    Skipped ("unchanged") when the note's section was made from this very
    input, unless `force`. Runs with the configured provider whether or not
    the automatic summary is on (a person asked for it). Raises SummaryError,
    leaving the note as it was, when the provider is not ready, the model
    fails or it is slower than the timeout.
    """
    config = config_of(store)
    relpath = resolve_ref(store, ref)
    note = read_note(store, relpath)
    with _job_lock(store, note.id or relpath, config.timeout + 60):
        note = read_note(store, relpath)  # a run we waited for may have written it
        prompt = model_input(note, transcript)
        digest = input_hash(prompt)
        if not force and summarised_input(note.body) == digest:
            return SummaryResult(relpath, "unchanged", "this session content was summarised already")
        problem = readiness(store, config)
        if problem:
            raise SummaryError(problem)
        started = time.monotonic()
        text = clean_output(ask_model(store, config, prompt))
        if not text.strip():
            raise SummaryError("the model answered with no text")
        model = config.model or (DEFAULT_API_MODEL if config.provider == "api" else DEFAULT_CLAUDE_MODEL)
        section = render_section(text, digest, f"{config.provider}/{model}")
        _write(store, relpath, section)
        return SummaryResult(relpath, "written", f"{config.provider}, {time.monotonic() - started:.1f} s")


def _write(store: Store, relpath: str, section: str) -> None:
    """Put `section` into the note under the store lock, against the text just read: an edit that
    lands in between makes the write fail and it is done again on the new text (the edit is kept)."""
    path = safe_path(store, relpath)
    for attempt in range(5):
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            raise SummaryError(f"{relpath} was deleted or moved while the model was answering") from None
        body = parse_note(text.removeprefix("\ufeff"), relpath).body
        try:
            update_note(store, relpath, body=with_section(body, section), expected_text=text)
            return
        except NoteChanged:
            if attempt == 4:
                raise
            time.sleep(0.1)
