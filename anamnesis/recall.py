"""UserPromptSubmit recall: notes that clearly match what was just asked.

The prompt is searched (any of its words, stop words dropped); only notes
scoring above a threshold come back, at most a few, within a small budget
(default 2,000 characters), each with its path so the agent can read the
whole note. Notes already shown in this session are not repeated. When
nothing matches well, nothing is printed: silence is the common case.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from anamnesis.fsutil import atomic_write_text
from anamnesis.index import Hit, open_index
from anamnesis.project import project_key
from anamnesis.query import SAME_AS, STOPWORDS
from anamnesis.search import search
from anamnesis.settings import load_settings
from anamnesis.store import load_note
from anamnesis.text import trim
from anamnesis.transcript import MEMORY_CLOSE, MEMORY_OPEN, strip_injected

if TYPE_CHECKING:
    from anamnesis.paths import Store

MAX_BUDGET = 4000
MIN_COVERAGE = 0.5  # below the best match, a note must hold this share of the prompt's words
OTHER_PROJECT_COVERAGE = 0.6  # another project's note must hold this share of them, more than
OTHER_PROJECT_MARGIN = 0.15  # this project's best holds, and outscore it by this much
# Words too common in prompts to say what a prompt is about (on top of the index's stop words).
PROMPT_NOISE = frozenset(
    (
        "about again all also any anything around ask back bit but can't change check code could did "
        "didn't does doesn't done don't each else even every file files fine first fix get getting give "
        "going good got help here i'd i'll i'm it's just know last like look looks make many maybe more "
        "most much need new next now okay old one only other out over please really right run same "
        "see should show some something still sure take tell than thanks thing things think this those "
        "try two very want way well what's why work works would yes yet"
    ).split()
)
MAX_QUERY_CHARS = 1500
MAX_QUERY_WORDS = 48
SEEN_FILES_MAX_AGE = 7 * 86400


def recall_settings(settings: dict[str, Any]) -> dict[str, Any]:
    """The recall knobs with defaults filled in and clamped."""
    raw = settings.get("recall") if isinstance(settings.get("recall"), dict) else {}
    assert isinstance(raw, dict)

    def num(key: str, default: float) -> float:
        try:
            return float(raw.get(key, default))
        except (TypeError, ValueError):
            return default

    return {
        "enabled": bool(raw.get("enabled", True)),
        "budget": int(max(300, min(MAX_BUDGET, num("budget", 2000)))),
        "max_notes": int(max(1, min(10, num("max_notes", 3)))),
    }


def prompt_terms(text: str) -> list[str]:
    """The distinct words of a prompt that say what it is about."""
    words = re.findall(r"[^\W_]+(?:[_.'/-][^\W_]+)*", text.lower())
    keep = [w for w in words if len(w) >= 3 and w not in STOPWORDS and w not in PROMPT_NOISE]
    return list(dict.fromkeys(keep))[:MAX_QUERY_WORDS]


def coverage(terms: list[str], text: str) -> int:
    """How many of `terms` occur in `text` (as a word start, so 'policy' finds 'policies');
    a term written the other usual way counts too ('prod' for 'production')."""
    low = text.lower()
    found = 0
    for term in terms:
        for form in (term, *(" ".join(f) for f in SAME_AS.get(term, ()))):
            stem = form if len(form) <= 5 else form[: max(5, len(form) - 2)]
            if re.search(r"(?<![^\W_])" + re.escape(stem) + ("" if len(form) > 5 else r"(?![^\W_])"), low):
                found += 1
                break
    return found


def _needed(count: int) -> int:
    return 1 if count <= 1 else min(3, max(2, -(-count * 2 // 5)))


def _seen_path(store: Store, session_id: str) -> Path | None:
    safe = re.sub(r"[^A-Za-z0-9_-]", "", session_id)[:80]
    return store.state_dir / "sessions" / f"{safe}.json" if safe else None


def seen_notes(store: Store, session_id: str) -> set[str]:
    """Note paths already put in front of the agent in this session."""
    path = _seen_path(store, session_id)
    if path is None:
        return set()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return set()
    return {str(p) for p in data.get("shown", [])} if isinstance(data, dict) else set()


def remember_shown(store: Store, session_id: str, paths: list[str], *, replace: bool = False) -> None:
    """Record what this session was shown (machine-local state, never synced)."""
    path = _seen_path(store, session_id)
    if path is None:
        return
    shown = set() if replace else seen_notes(store, session_id)
    shown.update(paths)
    atomic_write_text(path, json.dumps({"shown": sorted(shown), "at": time.time()}), mode=0o600)
    if replace:  # a new session starting is a good moment to forget old ones
        cutoff = time.time() - SEEN_FILES_MAX_AGE
        for old in path.parent.glob("*.json"):
            try:
                if old.stat().st_mtime < cutoff:
                    old.unlink()
            except OSError:
                pass


def _project_of(cwd: str) -> str | None:
    if not cwd:
        return None
    try:
        return project_key(cwd)
    except OSError:
        return None


def build_recall(store: Store, prompt: str, *, session_id: str = "", cwd: str = "") -> tuple[str, list[str]]:
    """The context to add for `prompt`, and the paths it shows; ("", []) when nothing fits."""
    knobs = recall_settings(load_settings(store))
    if not knobs["enabled"]:
        return "", []
    text = strip_injected(prompt).strip()
    if not text or text.startswith("/") or len(text) < 8:
        return "", []
    terms = prompt_terms(text[:MAX_QUERY_CHARS])
    if not terms:
        return "", []
    seen = seen_notes(store, session_id) if session_id else set()
    near = _project_of(cwd)
    with open_index(store) as index:
        hits = search(
            index,
            " ".join(terms),
            near_project=near,
            limit=min(40, knobs["max_notes"] + len(seen) + 5),
            snippets=False,
        )
    header = (
        f"{MEMORY_OPEN}\nNotes from memory that may bear on this prompt "
        "(read one in full with the anamnesis MCP `read` tool):\n"
    )
    footer = f"{MEMORY_CLOSE}\n"
    # hit, body, share of the prompt held, elsewhere; notes already shown still count as this
    # project's answer (so repeating a prompt does not pull in other projects' notes instead)
    qualified: list[tuple[Hit, str, float, bool]] = []
    for position, hit in enumerate(hits):
        if hit.superseded_by:
            continue
        try:
            body = load_note(store, hit.path).body
        except Exception:  # a note that vanished or broke since indexing: leave it out
            continue
        matched = coverage(terms, f"{hit.title}\n{' '.join(hit.tags)}\n{body[:20000]}")
        share = matched / len(terms)
        if matched < _needed(len(terms)) or (share < MIN_COVERAGE and position > 0):
            continue
        elsewhere = near is not None and hit.project is not None and hit.project != near
        qualified.append((hit, body, share, elsewhere))
    local = [(hit.score, share) for hit, _body, share, elsewhere in qualified if not elsewhere]
    best_score = max((score for score, _share in local), default=0.0)
    best_share = max((share for _score, share in local), default=0.0)
    chosen: list[tuple[Hit, str]] = []
    others = 0
    for hit, body, share, elsewhere in qualified:
        if len(chosen) >= knobs["max_notes"]:
            break
        if hit.path in seen:
            continue
        if elsewhere:
            # another project's note only when it is clearly the better match, and one at most
            clearly = share >= OTHER_PROJECT_COVERAGE and (
                not local or (share > best_share and hit.score >= best_score + OTHER_PROJECT_MARGIN)
            )
            if not clearly or others:
                continue
            others += 1
        chosen.append((hit, body))
    room = knobs["budget"] - len(header) - len(footer)
    parts: list[str] = []
    shown: list[str] = []
    for position, (hit, body) in enumerate(chosen):
        share = room // (len(chosen) - position)
        head = f"- **{hit.title}** ({hit.type}, {hit.updated[:10] or 'undated'}) `{hit.path}`"
        if len(head) + 1 > share:
            continue
        excerpt = trim(re.sub(r"\s+", " ", body), share - len(head) - 4)
        entry = f"{head}\n  {excerpt}\n" if excerpt else f"{head}\n"
        parts.append(entry)
        shown.append(hit.path)
        room -= len(entry)
    if not parts:
        return "", []
    return header + "".join(parts) + footer, shown
