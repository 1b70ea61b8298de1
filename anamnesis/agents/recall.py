"""UserPromptSubmit recall: notes that clearly match what was just asked.

The prompt is searched (any of its words, stop words dropped); only notes
scoring above a threshold come back, at most a few, within a small budget
(default 2,000 characters), each with its path so the agent can read the
whole note. Notes already shown in this session are not repeated. When
nothing matches well, nothing is printed: silence is the common case.
"""

from __future__ import annotations

import json
import math
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from anamnesis.agents.transcript import MEMORY_CLOSE, MEMORY_OPEN, strip_injected
from anamnesis.base.fsutil import atomic_write_text
from anamnesis.base.settings import load_settings
from anamnesis.base.text import trim
from anamnesis.search import SAME_AS, STOPWORDS, Hit, Index, default_ranker, open_index, search
from anamnesis.store import load_note, project_key

if TYPE_CHECKING:
    from anamnesis.base.paths import Store

MAX_BUDGET = 4000
# A note must hold this share of the prompt's words, each weighed by its rarity among the notes
# (the best-ranked note a little less), so a prompt's rare words decide, not its common ones.
WORDS_ENOUGH = 0.45
WORDS_FIRST = 0.35
# Every word weighs at least this much on top of its rarity, so in a small memory, where a few notes
# make every shared word look common, the words a note holds still count.
RARITY_FLOOR = 0.5
OTHER_PROJECT_COVERAGE = 0.6  # another project's note must hold this share of them, more than
OTHER_PROJECT_MARGIN = 0.15  # this project's best holds, and outscore it by this much
# With semantic search on, meaning decides, helped by the words a note shares with the prompt: a
# note is shown when its cosine to the prompt plus WORDS_HELP times the share of the prompt's
# (rarity-weighted) words it holds reaches EVIDENCE_ENOUGH. Off-topic prompts and small talk stay
# below it: their closest note sat at a cosine of 0.16 in the median, 0.24-0.29 at the 90th
# percentile, and shares none of their words. A paraphrase shares few words, so its cosine must
# carry it (0.31 alone); a question that holds half of its words needs 0.21. Below MEANING_FLOOR
# shared words alone never show a note: it is about something else that uses the same words.
# (Thresholds and weight sat on a plateau on all three of our sets: docs/search.md.)
EVIDENCE_ENOUGH = 0.31
WORDS_HELP = 0.2
MEANING_FLOOR = 0.12
# A note of the project the prompt is typed in needs this much less: that is where the answer
# usually is. Off-topic prompts, sent from each project in turn, stayed as silent; every set's
# paraphrases gained 7-11 points (docs/search.md).
HERE_EASIER = 0.05
# Past the closest note, another is shown by meaning only when its cosine is at least this share of
# the closest one's (or the prompt's words say so): on our three sets no gold note was lost and the
# share of shown notes that were gold rose from 0.45-0.52 to 0.52-0.61 (docs/search.md).
AS_CLOSE = 0.7
# Words too common in prompts to say what a prompt is about (on top of the index's stop words).
PROMPT_NOISE = frozenset(
    (
        "about again all also any anything around ask back bit but can't change check code could did "
        "didn't does doesn't done don't each else even every file files fine first fix get getting give "
        "going good got help here i'd i'll i'm it's just know last like look looks make many maybe more "
        "most much need new next now okay old one only other out over please really right run said same say "
        "see should show some something still sure take tell than thanks thing things think this those "
        "try two very want way well what's why work works would yes yet"
        # greetings and sign-offs, and the words of sums: a prompt made of these is small talk
        # or arithmetic, whatever note happens to say "this morning" or "three times"
        " afternoon bye cheers divided evening goodbye hello hey minus morning multiplied night"
        " plus power squared thank times"
    ).split()
)
# Everyday words of English prose that say how or when, not what: adverbs, connectives, time words
# and the verbs of talking about a problem. In a prompt they are padding; in a small memory one
# note holding one makes it look as rare as a tool's name. When words alone decide, they weigh the
# floor, never their rarity (`rarity`): keyword recall gained on all three of our sets (docs/search.md).
EVERYDAY = frozenset(
    (
        "actually ago almost already although always anyway anyhow apparently basically because before "
        "besides certainly clearly currently definitely either enough especially eventually ever exactly "
        "finally generally however hour hours instead later lately least less likely mainly meanwhile "
        "mostly nearly never nowadays often otherwise perhaps possibly probably quite rather recently "
        "seemingly seems since somehow sometimes somewhat soon though today tomorrow together totally "
        "usual usually whether whenever wherever whatever without yesterday yesterday's week weeks "
        "able anybody anyone everybody everyone everything nobody nothing somebody someone stuff "
        "grab figure figured happen happened happens happening mean means meant wonder wondering "
        "trying tried using used keeps kept stops stopped seeing seen saw looking"
    ).split()
)
# By words alone, the words of a prompt no note holds weigh this many average words in all (`rarity`):
# the second tester's long and chatty prompts gained 3 of 75, no other set lost a note or its silence.
UNHELD_AT_MOST = 2
MAX_QUERY_CHARS = 1500
WORD_RE = re.compile(r"[^\W_]+(?:[_.'/-][^\W_]+)*")  # a prompt's words: code words whole
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


def prompt_words(text: str) -> list[str]:
    """The distinct words of a prompt that say what it is about, spelt as typed.

    The keyword search is given these: its camelCase and dotted-name handling needs the case
    (`kgo.CooperativeSticky` finds `CooperativeStickyBalancer`; lowercased it found nothing)."""
    kept: dict[str, str] = {}
    for word in WORD_RE.findall(text):
        low = word.lower()
        if len(low) >= 3 and low not in STOPWORDS and low not in PROMPT_NOISE:
            kept.setdefault(low, word)
    return list(kept.values())[:MAX_QUERY_WORDS]


def code_words(words: list[str]) -> set[str]:
    """The words that are code as typed (`pg_dump`, `acme.io/pool`, `raidz2`, `environmentMatchGlobs`),
    lowercased: names the model may never have seen, so a note holding one counts on its words.
    Unlike `specific_terms`, brand names in capitals (`JavaScript`, `JSON`) are not among them."""
    return {word.lower() for word in words if re.search(r"[_./\d-]", word) or re.match(r"[a-z]+[A-Z]", word)}


def specific_terms(text: str) -> set[str]:
    """The prompt's words that name one thing: its code words (`parse_config`, `acme.io/pool`,
    `useFlag`, `raidz2`) and words in capitals (`GOTOOLCHAIN`, `JavaScript`), lowercased."""
    words = WORD_RE.findall(text)
    capitals = {word.lower() for word in words if re.search(r"[a-z][A-Z]", word) or (len(word) > 2 and word.isupper())}
    return code_words(words) | capitals


def held(terms: list[str], text: str) -> list[str]:
    """Which of `terms` occur in `text` (as a word start, so 'policy' finds 'policies'); a term
    written the other usual way counts too ('prod' for 'production')."""
    low = text.lower()
    found: list[str] = []
    for term in terms:
        for form in (term, *(" ".join(f) for f in SAME_AS.get(term, ()))):
            if re.search(_word_pattern(form), low):
                found.append(term)
                break
    return found


_ENDINGS = r"(?:e|s|es|d|ed|ing|ings|er|ers|ure|ures)?(?![^\W_])"


def _word_pattern(form: str) -> str:
    """How a prompt's word is looked for in a note: a short word whole; a verb's -ing or -ed form
    as its root with any of the usual endings ('failing' finds 'fails', 'stored' finds 'stores'
    but not 'story'); another long word as its start ('policy' finds 'policies')."""
    start = r"(?<![^\W_])"
    if len(form) <= 5:
        return start + re.escape(form) + r"(?![^\W_])"
    for ending in ("ing", "ed"):
        if form.endswith(ending) and len(form) - len(ending) >= 3 and form.isalpha():
            return start + re.escape(form[: -len(ending)]) + _ENDINGS
    return start + re.escape(form[: max(5, len(form) - 2)])


def rarity(index: Index, terms: list[str], *, everyday_floor: bool = False) -> dict[str, float]:
    """Each term's weight: how rare it is among the notes (a word most notes hold says little).

    A word no note holds cannot tell notes apart; it weighs what an average held word weighs,
    so a prompt about something the memory lacks still needs most of its other words matched,
    without one stray verb ('growing') outweighing every word the notes do hold; when words alone
    decide, all such words together weigh at most UNHELD_AT_MOST average words, or a long prompt
    ("...and they keep asking why we didn't go with elasticsearch...") buries the one word that
    names its note under the many that name nothing. With
    `everyday_floor`, the words of `EVERYDAY` weigh the floor: when words alone decide, padding
    ('actually', 'an hour ago') must not hide the words a note does hold. (With semantic search
    on, meaning decides and words only help: there it made stray words of small talk count more.)"""
    total = max(1, index.count_notes())
    counts = index.notes_holding(terms)
    padding = EVERYDAY if everyday_floor else frozenset()
    weights = {
        term: RARITY_FLOOR + math.log(1 + (total - counts[term] + 0.5) / (counts[term] + 0.5))
        for term in terms
        if counts[term] and term not in padding
    }
    typical = sum(weights.values()) / len(weights) if weights else 1.0
    unheld = [term for term in terms if term not in weights and term not in padding]
    if everyday_floor and len(unheld) > UNHELD_AT_MOST:
        typical *= UNHELD_AT_MOST / len(unheld)  # a long prompt's other words: together, two words' worth
    return {term: RARITY_FLOOR if term in padding else weights.get(term, typical) for term in terms}


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
    if not text or text.startswith("/"):
        return "", []
    words = prompt_words(text[:MAX_QUERY_CHARS])
    terms = [word.lower() for word in words]
    if not terms:
        return "", []
    specific = specific_terms(text[:MAX_QUERY_CHARS])
    named = code_words(words)
    seen = seen_notes(store, session_id) if session_id else set()
    near = _project_of(cwd)
    with open_index(store) as index:
        if near is not None and not index.list_notes(project=near, limit=1):
            # a folder the memory holds nothing of: no answer of its own to prefer, so every
            # project's notes compete on the same terms, as outside any project
            near = None
        ranker = default_ranker(store)
        by_meaning = ranker.name == "hybrid"
        hits = search(
            index,
            text[:MAX_QUERY_CHARS] if by_meaning else " ".join(words),
            near_project=near,
            limit=min(40, knobs["max_notes"] + len(seen) + 5),
            snippets=False,
            ranker=ranker,
        )
        weights = rarity(index, terms, everyday_floor=not by_meaning)
    whole = sum(weights.values()) or 1.0
    header = (
        f"{MEMORY_OPEN}\nNotes from memory that may bear on this prompt "
        "(read one in full with the anamnesis MCP `read` tool):\n"
    )
    footer = f"{MEMORY_CLOSE}\n"
    # hit, body, share of the prompt held, elsewhere, held by its words alone; notes already shown
    # still count as this project's answer (so repeating a prompt does not pull in other projects'
    # notes instead)
    qualified: list[tuple[Hit, str, float, bool, bool]] = []
    for position, hit in enumerate(hits):
        if hit.superseded_by:
            continue
        try:
            body = load_note(store, hit.path).body
        except Exception:  # a note that vanished or broke since indexing: leave it out
            continue
        title_and_tags = f"{hit.title}\n{' '.join(hit.tags)}"
        found = held(terms, f"{title_and_tags}\n{body[:20000]}")
        share = sum(weights[term] for term in found) / whole
        if len(found) == 1 and found[0] not in specific and not held(found, title_and_tags):
            share = 0.0  # one everyday word, and only in passing: a coincidence, not an answer
        if found and set(found) <= EVERYDAY:
            share = 0.0  # padding alone ('actually', 'since yesterday') answers nothing
        here = near is not None and hit.project == near
        named_here = set(found) & named
        by_name = bool(named_here) and bool(held(sorted(named_here), title_and_tags))
        by_words = by_name or share >= WORDS_ENOUGH
        if by_name and (not by_meaning or hit.similarity is None or hit.similarity >= MEANING_FLOOR):
            pass  # a code word the note is named by ('test_settlement_cutoff is failing'): enough alone
        elif by_meaning and hit.similarity is not None:
            meaning = hit.similarity
            if meaning >= MEANING_FLOOR and meaning + WORDS_HELP * share >= EVIDENCE_ENOUGH - HERE_EASIER * here:
                share = max(share, meaning)
            elif not (named_here and share >= (WORDS_FIRST if position == 0 else WORDS_ENOUGH)):
                continue
        elif not (found and share >= (WORDS_FIRST if position == 0 else WORDS_ENOUGH)):
            continue  # by words alone: keyword search, or a note not embedded yet (written moments ago)
        elsewhere = near is not None and hit.project is not None and hit.project != near
        qualified.append((hit, body, share, elsewhere, by_words))
    # By meaning, a note far less close than the closest one shown is about something next to the
    # prompt, not the prompt ('rebase lost my commits' and a refund how-to at 0.32): shown only when
    # the prompt's own words say so.
    # (closest among the notes that can be shown: this project's, or any when it has none)
    def cosine(hit: Hit) -> float | None:
        return hit.similarity if by_meaning else None

    local_first = [item for item in qualified if not item[3]] or qualified
    closest = max((c for item in local_first if (c := cosine(item[0])) is not None), default=0.0)
    qualified = [
        item
        for item in qualified
        if (c := cosine(item[0])) is None or item[4] or c >= AS_CLOSE * closest
    ]
    local = [(hit.score, share) for hit, _body, share, elsewhere, _words in qualified if not elsewhere]
    best_score = max((score for score, _share in local), default=0.0)
    best_share = max((share for _score, share in local), default=0.0)
    chosen: list[tuple[Hit, str]] = []
    others = 0
    for hit, body, share, elsewhere, _words in qualified:
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
