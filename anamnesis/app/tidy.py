"""Keeping memory tidy: near-duplicates, replaced notes and stale sessions, found and fixed without losing text.

`plan_tidy` reads every note and proposes, each with its evidence (the lines
both notes share or that differ, their dates, the score):

- **merge** two near-duplicates (the same project and type, most of their
  words or lines shared; with semantic search on, also notes whose vectors
  are alike well beyond the store's usual): the newer note gets the lines only the older one has, under a
  "Merged from" heading, and supersedes it. The older note stays.
- **supersede**: a later note of the same project and type whose title says
  the same thing as an older one but whose body differs (a value changed, a
  decision reversed) replaces it. The older note stays, below it in search.
- **archive** an old session note whose content lives on in a fact note
  (most of the fact's words are in the session, and the fact is not older):
  the file moves to memory/.archive/ (same path below it), out of the index
  and so out of search, synced like any file; `restore_archived` moves it back.

`apply_plan` applies proposals one commit each through the store's one write
path, and checks each against the store first: a proposal already done (the
link exists, the note is archived) or made stale (a note gone) is skipped, so
applying a plan twice changes nothing the second time, and two machines that
apply the same plan converge after sync. Nothing here deletes text.
"""

from __future__ import annotations

import datetime as dt
import difflib
import glob
import hashlib
import json
import re
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from anamnesis.base.errors import AnamnesisError, NoteChanged, NoteNotFound, UsageError
from anamnesis.base.fsutil import atomic_write_text
from anamnesis.base.git import run_git
from anamnesis.base.notes import ARCHIVE_DIR, PROJECTS_DIR, is_note_id, parse_note, project_folder
from anamnesis.search import open_index, parse_when
from anamnesis.store import (
    TITLE_STOPWORDS,
    Components,
    jaccard,
    load_note,
    relpath_of,
    require_writable,
    safe_path,
    similar_pairs,
    update_note,
    write_lock,
    write_units,
)

if TYPE_CHECKING:
    from pathlib import Path

    from anamnesis.base.notes import Note
    from anamnesis.base.paths import Store

Action = Literal["merge", "supersede", "archive"]
Kind = Literal["duplicate", "replaced", "stale-session"]
Outcome = Literal["applied", "already", "stale", "skipped"]

_ACTIONS: dict[str, Action] = {"merge": "merge", "supersede": "supersede", "archive": "archive"}
_KINDS: dict[str, Kind] = {"duplicate": "duplicate", "replaced": "replaced", "stale-session": "stale-session"}
PLAN_VERSION = 1
KEPT_PLANS = 10  # plans an agent proposed kept in state/tidy/, the latest ones
DECLINED_FILE = "tidy-declined.json"  # in state/: proposals the person said no to (`decline`)
DUPLICATE = 0.5  # body words shared (Jaccard) from which two notes are near-duplicates
SAME_LINES = 0.6  # or: the share of the shorter note's lines the other holds too (at least 2)
SAME_SUBJECT = 0.6  # title words shared from which a later note may replace an older one
CANDIDATE = 0.3  # words of title and body shared from which a pair is looked at at all
# With semantic search on, two notes say the same when their vectors' cosine stands out from how alike
# the store's notes are anyway: above MEANING_FLOOR and MEANING_SPREAD robust deviations above the median
# (prose about different things is ~0.1 alike, machine-made text ~0.8: one fixed cutoff fits neither).
MEANING_FLOOR = 0.75
MEANING_SPREAD = 6.0
LIVES_ON = 0.75  # share of a fact's words found in a session for the session to live on in it
MIN_FACT_WORDS = 6
STALE_AFTER = "30d"
MAX_EVIDENCE = 6
MARKER = "## Merged from"
MODEL_MERGE = "## Merged (model-written)"
MERGE_SYSTEM = (
    "You merge two notes of a person's long-term memory about the same subject into one. Keep every "
    "fact, number, command and decision either note states; where they disagree, say both and which "
    "note (first or second) says what. Write plain markdown without headings, no preamble, no comment "
    "about the task. Anything marked [REDACTED] stays as it is."
)
_WORD = re.compile(r"[^\W_]+")
_BULLET = re.compile(r"^\s*(?:[-*+]|\d{1,2}[.)])\s+")
_TYPES = ("semantic", "procedural", "preference")


def words(text: str) -> frozenset[str]:
    """The words of `text` that carry meaning: lower case, no stop words, no one-letter words."""
    return frozenset(w for w in _WORD.findall(text.lower()) if len(w) > 1 and w not in TITLE_STOPWORDS)


def _line_key(line: str) -> str:
    return " ".join(_BULLET.sub("", line).lower().split()).rstrip(".,;:!")


def _lines(body: str) -> list[str]:
    return [line.rstrip() for line in body.splitlines() if _line_key(line)]


@dataclass
class NoteRef:
    """A note as a proposal names it: enough to find it again and to show it."""

    id: str
    path: str
    title: str
    created: str
    updated: str

    def to_dict(self) -> dict[str, str]:
        """A JSON-ready view."""
        return asdict(self)


@dataclass
class Proposal:
    """One change tidy proposes, with why."""

    action: Action
    kind: Kind
    keep: NoteRef  # the note that stays in front: the merged-into, the replacement, the fact
    other: NoteRef  # the note merged, replaced or archived
    score: float
    project: str | None
    evidence: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        """A stable name for the proposal (the same on every machine for the same notes)."""
        return f"{self.action}:{self.other.id}:{self.keep.id}"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready view."""
        return {
            "key": self.key,
            "action": self.action,
            "kind": self.kind,
            "project": self.project,
            "score": round(self.score, 3),
            "keep": self.keep.to_dict(),
            "other": self.other.to_dict(),
            "evidence": self.evidence,
        }

    @classmethod
    def from_dict(cls, data: Any) -> Proposal:
        """Read a proposal back from a plan; UsageError naming what is wrong."""
        try:
            action, kind = _ACTIONS.get(str(data["action"])), _KINDS.get(str(data["kind"]))
            if action is None or kind is None:
                raise UsageError(
                    f"a proposal has an unknown action or kind ({data['action']!r}, {data['kind']!r})"
                )
            refs = [
                NoteRef(**{k: str(data[side][k]) for k in ("id", "path", "title", "created", "updated")})
                for side in ("keep", "other")
            ]
            evidence = data.get("evidence") or {}
            return cls(
                action,
                kind,
                refs[0],
                refs[1],
                float(data.get("score", 0)),
                str(data["project"]) if data.get("project") else None,
                evidence if isinstance(evidence, dict) else {},
            )
        except KeyError as exc:
            raise UsageError(
                f"a proposal in the plan has no {exc.args[0]!r} field: write plans with `anamnesis tidy --json`"
            ) from None
        except (TypeError, ValueError, AttributeError):
            raise UsageError(
                "a proposal in the plan has a field of the wrong kind (keep and other are notes, score a number):"
                " write plans with `anamnesis tidy --json`"
            ) from None


@dataclass
class Plan:
    """What `plan_tidy` proposes."""

    mode: Literal["words", "meaning"]
    proposals: list[Proposal]
    notes: int
    declined: int = 0  # proposals left out because the person said no to them (`decline`)

    def to_dict(self) -> dict[str, Any]:
        """The plan as `--json` prints it and `--apply` reads it."""
        return {
            "version": PLAN_VERSION,
            "mode": self.mode,
            "notes": self.notes,
            "declined": self.declined,
            "proposals": [p.to_dict() for p in self.proposals],
        }


@dataclass
class _Row:
    id: str
    path: str
    title: str
    type: str
    project: str | None
    created: str
    updated: str
    body: str
    supersedes: list[str]
    rowid: int
    words: frozenset[str] = frozenset()
    title_words: frozenset[str] = frozenset()

    def ref(self) -> NoteRef:
        return NoteRef(self.id, self.path, self.title, self.created, self.updated)


def _load(store: Store) -> list[_Row]:
    with open_index(store) as index:
        index.refresh()
        rows = index.unconflicted()
    out: list[_Row] = []
    for rowid, hit in rows:
        try:
            body = parse_note(safe_path(store, hit.path).read_text(encoding="utf-8", errors="replace"), hit.path).body
        except (OSError, ValueError):
            continue
        row = _Row(
            hit.id, hit.path, hit.title, hit.type, hit.project, hit.created, hit.updated, body, hit.supersedes, rowid
        )
        row.title_words = frozenset(w for w in words(row.title) if not w.isdigit())  # a value is no subject
        row.words = words(f"{row.title}\n{body}")
        out.append(row)
    return out


def _names_in(title_words: frozenset[str]) -> set[str]:
    """The title's words that name one thing among its kind: letters and digits together
    (v1, v2, py311, ipv6, s3), not a value (30, 60), which a newer note may well change."""
    return {w for w in title_words if any(c.isdigit() for c in w) and any(c.isalpha() for c in w)}


def _named_apart(a: _Row, b: _Row) -> bool:
    """Whether each title names a thing the other does not (v1 against v2): not one subject."""
    mine, theirs = _names_in(a.title_words), _names_in(b.title_words)
    return bool(mine - theirs) and bool(theirs - mine)


def _newer(a: _Row, b: _Row) -> tuple[_Row, _Row]:
    """(newer, older) of two notes: by creation, then update, then path (the same answer everywhere)."""
    ka, kb = (a.created or a.updated, a.updated, a.path), (b.created or b.updated, b.updated, b.path)
    return (a, b) if ka > kb else (b, a)


def _added_first(store: Store, one: str, other: str) -> bool:
    """Whether the commit that added `one` came before the one that added `other` (same-second
    notes: their dates cannot tell)."""
    commits = [
        run_git(store.memory, "log", "--diff-filter=A", "--format=%H", "-1", "--", path, check=False).stdout.strip()
        for path in (one, other)
    ]
    if not all(commits) or commits[0] == commits[1]:
        return False
    return run_git(store.memory, "merge-base", "--is-ancestor", *commits, check=False).returncode == 0


def _shared_and_differing(keep: str, other: str) -> tuple[list[str], list[str]]:
    kept = {_line_key(line) for line in _lines(keep)}
    shared: list[str] = []
    only: list[str] = []
    for line in _lines(other):
        (shared if _line_key(line) in kept else only).append(line)
    return shared, only


_TOKEN = re.compile(r"[\w.:/\-]+")
SHORT_LINE = 15  # tokens: a statement of one fact ("The API timeout is 30 seconds.")


_FENCE = re.compile(r"^\s*(```|~~~)")


def _in_their_fences(only: list[str], body: str) -> list[str]:
    """`only` (lines of `body`, in its order) with each run of lines that stood in a code block put
    back inside one: a shell comment copied out of its fence (`# install deps first`) would read
    as a heading."""
    opener_of: dict[int, str] = {}  # line number in body -> the fence it stands in
    opener: str | None = None
    lines = body.splitlines()
    for number, line in enumerate(lines):
        if _FENCE.match(line):
            opener = None if opener is not None else line.strip()
        elif opener is not None:
            opener_of[number] = opener
    wanted = [line for line in only if not _FENCE.match(line)]  # fences are put back around their lines
    out: list[str] = []
    open_fence: str | None = None
    at = 0
    for number, line in enumerate(lines):
        if at >= len(wanted) or line.rstrip() != wanted[at]:
            continue
        fence = opener_of.get(number)
        if fence != open_fence:
            if open_fence is not None:
                out.append(open_fence[:3])
            if fence is not None:
                out.append(fence)
            open_fence = fence
        out.append(wanted[at])
        at += 1
    if open_fence is not None:
        out.append(open_fence[:3])
    return out + wanted[at:]


def _value_changed(old: str, new: str) -> bool:
    """Whether `new` says what `old` says with a value changed: the same words but one word or two
    put in place of others in a short statement ("30 seconds" -> "60 seconds", "forbidden" ->
    "allowed"), or only numbers changed in a longer one. A copy edited here and there (several
    words changed in a paragraph) or a line reworded by adding words is no such change."""
    a, b = _TOKEN.findall(old.lower()), _TOKEN.findall(new.lower())
    blocks = difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes()
    changed = [(a[i1:i2], b[j1:j2]) for tag, i1, i2, j1, j2 in blocks if tag != "equal"]
    same = sum(i2 - i1 for tag, i1, i2, _j1, _j2 in blocks if tag == "equal")
    if not changed or same < 3 or any(not before or not after for before, after in changed):
        return False  # nothing differs, too little in common, or words only added or dropped
    if all(any(c.isdigit() for c in " ".join(before)) and any(c.isdigit() for c in " ".join(after)) for before, after in changed):
        return True
    return len(changed) == 1 and max(len(a), len(b)) <= SHORT_LINE and max(map(len, changed[0])) <= 2


def _changed_values(newer: str, older: str) -> list[tuple[str, str]]:
    """(older line, newer line) pairs where the newer note changed a value the older one states."""
    kept = {_line_key(line) for line in _lines(newer)}
    before = {_line_key(line) for line in _lines(older)}  # once, not for each line of the newer note
    only_newer = [line for line in _lines(newer) if _line_key(line) not in before]
    pairs = []
    for line in _lines(older):
        if _line_key(line) in kept:
            continue
        match = next((new for new in only_newer if _value_changed(line, new)), None)
        if match is not None:
            pairs.append((line.strip(), match.strip()))
    return pairs


def _meaning_pairs(
    store: Store, rows: list[_Row], groups: dict[tuple[str | None, str], list[int]]
) -> dict[tuple[int, int], float]:
    """Pairs (i, j) whose note vectors are alike well beyond the usual (see MEANING_SPREAD), with their
    cosine; {} with semantic search off."""
    # lazy: semantic (numpy, the model) only when it is on
    from anamnesis.search import engine_for

    engine = engine_for(store)
    if engine is None:
        return {}
    import numpy as np  # lazy: optional extra, present when semantic search is on

    with open_index(store) as index:
        vectors = engine.vectors(index)
    pairs: list[tuple[int, int, float]] = []
    for members in groups.values():
        have = [i for i in members if rows[i].rowid in vectors.positions]
        if len(have) < 2:
            continue
        matrix = vectors.matrix[[vectors.positions[rows[i].rowid] for i in have]]
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        matrix = matrix / np.where(norms == 0, 1, norms)
        cosines = matrix @ matrix.T
        upper = np.triu_indices(len(have), 1)
        pairs += [(have[a], have[b], float(cosines[a, b])) for a, b in zip(*upper, strict=True)]
    if not pairs:
        return {}
    values = np.asarray([c for _i, _j, c in pairs])
    median = float(np.median(values))
    spread = 1.4826 * float(np.median(np.abs(values - median)))
    cutoff = max(MEANING_FLOOR, median + MEANING_SPREAD * spread)
    return {(min(i, j), max(i, j)): c for i, j, c in pairs if c >= cutoff}


def plan_tidy(
    store: Store,
    *,
    project: str | None = None,
    stale_after: str = STALE_AFTER,
    meaning: bool | None = None,
    declined: bool = False,
) -> Plan:
    """Every merge, supersession and archive worth proposing, best first; each note in one proposal at most.

    `meaning` None uses note vectors when semantic search is on; False never does. A proposal
    the person declined (`decline`) is left out while neither of its notes has changed since,
    unless `declined`.
    """
    cutoff = parse_when(stale_after)
    rows = _load(store)
    links = Components()
    superseded: set[str] = set()
    for row in rows:
        for target in row.supersedes:
            links.join(row.id, target)
            superseded.add(target)
    groups: dict[tuple[str | None, str], list[int]] = defaultdict(list)
    for i, row in enumerate(rows):
        if row.type in _TYPES and row.id not in superseded and (project is None or row.project == project):
            groups[(row.project, row.type)].append(i)
    members = [i for group in groups.values() for i in group]
    pairs: dict[tuple[int, int], float] = {}
    for items, threshold in (
        ([((rows[i].project, rows[i].type), f"{rows[i].title}\n{rows[i].body}") for i in members], CANDIDATE),
        (
            [((rows[i].project, rows[i].type), " ".join(sorted(rows[i].title_words))) for i in members],
            SAME_SUBJECT,
        ),
    ):
        for x, y, _score in similar_pairs(items, threshold=threshold, limit=200_000, budget=20_000_000):
            i, j = members[x], members[y]
            pairs.setdefault((min(i, j), max(i, j)), 0.0)
    for pair, cosine in (_meaning_pairs(store, rows, groups) if meaning is not False else {}).items():
        pairs[pair] = cosine
    proposals: list[Proposal] = []
    for (i, j), cosine in pairs.items():
        a, b = rows[i], rows[j]
        if links.find(a.id) == links.find(b.id):
            continue  # already linked, directly or through others
        if _named_apart(a, b):
            continue  # "API v1 …" and "API v2 …": two things, however alike the rest reads
        body_sim = jaccard(words(a.body), words(b.body))
        title_sim = jaccard(a.title_words, b.title_words)
        newer, older = _newer(a, b)
        if (a.created or a.updated) == (b.created or b.updated) and _added_first(store, newer.path, older.path):
            newer, older = older, newer  # written in the same second: the one git got later is newer
        shared, only = _shared_and_differing(newer.body, older.body)
        fewest = min(len(_lines(a.body)), len(_lines(b.body)))
        same_lines = len(shared) / fewest if fewest and len(shared) >= 2 else 0.0
        changed = _changed_values(newer.body, older.body)
        if (body_sim >= DUPLICATE or same_lines >= SAME_LINES or cosine) and changed:
            # alike, but the newer one changed a value the older states: merging would copy the
            # old value into the current note; the newer one replaces the older instead
            action: Action = "supersede"
            kind: Kind = "replaced"
            score = max(body_sim, same_lines, cosine)
        elif body_sim >= DUPLICATE or same_lines >= SAME_LINES or cosine:
            action, kind, score = "merge", "duplicate", max(body_sim, same_lines, cosine)
        elif title_sim >= SAME_SUBJECT:
            action, kind, score = "supersede", "replaced", title_sim
        else:
            continue
        evidence: dict[str, Any] = {
            "words_shared": round(body_sim, 3),
            "titles_shared": round(title_sim, 3),
            "lines_shared": round(same_lines, 3),
            "shared_lines": shared[:MAX_EVIDENCE],
            "only_in_other": only[:MAX_EVIDENCE],
            "dates": {"keep": newer.created or newer.updated, "other": older.created or older.updated},
        }
        if cosine:
            evidence["meaning"] = round(cosine, 3)
        if changed:
            evidence["changed"] = [list(pair) for pair in changed[:MAX_EVIDENCE]]
        proposals.append(Proposal(action, kind, newer.ref(), older.ref(), score, newer.project, evidence))
    remembered = _declined(store)
    proposals += [
        p
        for p in _stale_sessions(rows, cutoff, project, superseded)
        if not _restored(store, p.other.id, p.other.path, remembered)
    ]
    said_no = {} if declined else remembered
    asked = len(proposals)
    proposals = [p for p in proposals if p.key not in said_no or said_no[p.key] != _stamps(store, p)]
    hidden = asked - len(proposals)
    proposals.sort(key=lambda p: (-p.score, p.key))
    used: set[str] = set()
    chosen: list[Proposal] = []
    for proposal in proposals:
        if proposal.keep.id in used or proposal.other.id in used:
            continue
        used |= {proposal.keep.id, proposal.other.id}
        chosen.append(proposal)
    order = {"merge": 0, "supersede": 1, "archive": 2}
    chosen.sort(key=lambda p: (order[p.action], -p.score, p.key))
    return Plan("meaning" if meaning is not False and _has_engine(store) else "words", chosen, len(rows), hidden)


def decline(store: Store, proposals: Iterable[Proposal]) -> None:
    """Remember that the person said no to these proposals (state/tidy-declined.json, this
    machine only): `plan_tidy` leaves each out until one of its notes changes."""
    said_no = _declined(store)
    for proposal in proposals:
        said_no[proposal.key] = _stamps(store, proposal)
    _save_declined(store, said_no)


def _stamps(store: Store, proposal: Proposal) -> dict[str, str]:
    """What a proposal was made of: a digest of each of its notes' files (an edit by hand that
    leaves `updated` alone is a change too)."""
    return {side: _file_stamp(store, ref.path) for side, ref in (("keep", proposal.keep), ("other", proposal.other))}


def _file_stamp(store: Store, path: str) -> str:
    """A digest of a note's file; '' when it is gone (a proposal about it is not made any more)."""
    try:
        return hashlib.sha256(safe_path(store, path).read_bytes()).hexdigest()[:16]
    except (OSError, ValueError):
        return ""


def _save_declined(store: Store, said_no: dict[str, dict[str, str]]) -> None:
    atomic_write_text(store.state_dir / DECLINED_FILE, json.dumps(said_no, indent=1, sort_keys=True) + "\n")


def _declined(store: Store) -> dict[str, dict[str, str]]:
    try:
        data = json.loads((store.state_dir / DECLINED_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}  # none yet, or a file broken by hand: everything is asked again
    if not isinstance(data, dict):
        return {}
    return {str(k): v for k, v in data.items() if isinstance(v, dict)}


def _has_engine(store: Store) -> bool:
    # lazy: semantic only when asked about
    from anamnesis.search import engine_for

    return engine_for(store) is not None


def _stale_sessions(
    rows: list[_Row], cutoff: str, project: str | None, superseded: set[str]
) -> list[Proposal]:
    """Old session notes most of whose substance a later fact note holds."""
    facts: dict[str | None, list[_Row]] = defaultdict(list)
    for row in rows:
        if row.type in ("semantic", "procedural") and len(row.words) >= MIN_FACT_WORDS:
            facts[row.project].append(row)
    postings: dict[str | None, dict[str, list[int]]] = {}
    for key, members in facts.items():
        table: dict[str, list[int]] = defaultdict(list)
        for n, fact in enumerate(members):
            for word in fact.words:
                table[word].append(n)
        postings[key] = table
    found: list[Proposal] = []
    for session in rows:
        if session.type != "episodic" or (session.created or session.updated) >= cutoff:
            continue
        if project is not None and session.project != project:
            continue
        members = facts.get(session.project, [])
        table = postings.get(session.project, {})
        counts: Counter[int] = Counter()
        for word in session.words:
            for n in table.get(word, ()):
                counts[n] += 1
        best: tuple[float, _Row] | None = None
        for n, hits in counts.items():
            fact = members[n]
            share = hits / len(fact.words)
            if share < LIVES_ON or (fact.created or fact.updated) < (session.created or session.updated)[:10]:
                continue
            if best is None or (share, fact.path) > (best[0], best[1].path):
                best = (share, fact)
        if best is None:
            continue
        share, fact = best
        in_fact = [
            line
            for line in _lines(session.body)
            if (w := words(line)) and len(w & fact.words) >= LIVES_ON * len(w)
        ]
        evidence = {
            "fact_words_in_session": round(share, 3),
            "lines_in_both": in_fact[:MAX_EVIDENCE],
            "dates": {"keep": fact.created or fact.updated, "other": session.created or session.updated},
        }
        found.append(
            Proposal("archive", "stale-session", fact.ref(), session.ref(), share, session.project, evidence)
        )
    return found


# -- applying ---------------------------------------------------------------------------


@dataclass
class Applied:
    """What happened to one proposal."""

    key: str
    outcome: Outcome
    detail: str

    def to_dict(self) -> dict[str, str]:
        """A JSON-ready view."""
        return asdict(self)


def read_plan(text: str) -> list[Proposal]:
    """The proposals of a plan as `--json` wrote it (or a bare list of them); UsageError if it is not one."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"the plan is not JSON ({exc.msg} at line {exc.lineno})") from None
    if isinstance(data, dict):
        if data.get("version", PLAN_VERSION) != PLAN_VERSION:
            raise UsageError(
                f"plan version {data.get('version')!r} is not one this anamnesis reads ({PLAN_VERSION})"
            )
        data = data.get("proposals")
    if not isinstance(data, list):
        raise UsageError("the plan holds no list of proposals (write one with `anamnesis tidy --json`)")
    return [Proposal.from_dict(item) for item in data]


def _find(store: Store, note_id: str) -> str | None:
    with open_index(store) as index:
        index.refresh()
        return index.path_of_id(note_id)


def _archived_path(store: Store, note_id: str, path: str) -> str | None:
    """Where an archived note with this id is, if it is archived (at its old path first)."""
    candidate = f"{ARCHIVE_DIR}/{path}"
    full = safe_path(store, candidate)
    if full.is_file():
        return candidate
    folder = store.memory / ARCHIVE_DIR
    for found in sorted(folder.rglob(f"*{glob.escape(note_id)}*.md")) if folder.is_dir() else []:
        return relpath_of(store, found)
    return None


def model_unready(store: Store) -> str | None:
    """Why a merge cannot be written by the person's own model now (none set up, no Claude Code
    binary, no key), or None when it can."""
    from anamnesis.agents import config_of, readiness  # lazy: only merges written by a model

    config = config_of(store)
    if not config.enabled:
        return "no model is set up (`anamnesis summary enable` names yours: Claude Code or an API key)"
    return readiness(store, config)


def model_merge(store: Store, keep: Note, other: Note) -> str:
    """The person's own model (as set up for session summaries: `claude -p` or their key) writes
    one text from both notes; what it is sent and what it answers are redacted. Raises
    SummaryError when it is not set up or fails."""
    # lazy: the model path loads only for a merge that asks for it
    from anamnesis.agents import SummaryError, ask_model, clean_output, config_of
    from anamnesis.store import redact  # lazy: only a merge written by a model sends text anywhere

    why = model_unready(store)
    if why is not None:
        raise SummaryError(why)
    prompt = (
        f"First note: {redact(keep.title)}\n\n{redact(keep.body)}\n\n"
        f"Second note: {redact(other.title)}\n\n{redact(other.body)}\n"
    )
    text = clean_output(ask_model(store, config_of(store), prompt, MERGE_SYSTEM))
    if not text.strip():
        raise SummaryError("the model answered nothing")
    return text


def apply_proposal(store: Store, proposal: Proposal, *, model: bool = False) -> Applied:
    """Apply one proposal as one commit, or say why not (already done, or no longer true).

    `model`: a merge also gets a text the person's own model wrote from both notes, on top of
    the note, which still keeps every line of both below it (nothing is ever dropped)."""
    key = proposal.key
    if proposal.action == "archive":
        return _archive(store, proposal)
    keep_path, other_path = _find(store, proposal.keep.id), _find(store, proposal.other.id)
    if keep_path is None or other_path is None:
        gone = proposal.keep if keep_path is None else proposal.other
        return Applied(key, "stale", f"{gone.title!r} ({gone.id}) is no longer in the memory")
    keep = load_note(store, keep_path)  # first: a note gone since is NoteNotFound, a skipped proposal
    keep_text = safe_path(store, keep_path).read_text(encoding="utf-8", errors="replace")
    if proposal.other.id in keep.supersedes:
        return Applied(key, "already", f"{keep_path} already supersedes {proposal.other.id}")
    other = load_note(store, other_path)
    if keep.id in other.supersedes:  # a hand-edited plan swapped the two: each would hide the other
        return Applied(key, "skipped", f"{other_path} supersedes {keep_path}: the other way round would make a loop")
    if (keep.project, keep.type) != (other.project, other.type):  # a plan is a file: it may say anything
        return Applied(
            key,
            "skipped",
            f"{keep_path} and {other_path} are not of one project and type"
            f" ({keep.project or 'global'} {keep.type}, {other.project or 'global'} {other.type}):"
            " tidy only joins notes of the same project and type",
        )
    body = None
    by_model = ""
    if proposal.action == "merge":
        _shared, only = _shared_and_differing(keep.body, other.body)
        only = _in_their_fences(only, other.body)
        body = keep.body
        if only:
            day = (other.created or other.updated)[:10]
            body = (
                keep.body.rstrip("\n")
                + f"\n\n{MARKER} [[{other.id}]] ({other.title}, {day})\n\n"
                + "\n".join(only)
                + "\n"
            )
        if model:
            from anamnesis.agents import SummaryError  # lazy: only merges written by a model

            try:
                body = f"{MODEL_MERGE}\n\n{model_merge(store, keep, other)}\n\n{body.lstrip()}"
                by_model = " (with a model-written merge on top)"
            except SummaryError as exc:
                by_model = f" (line by line: the model merge failed: {exc})"
        if body == keep.body:
            body = None
    try:  # only over the text read above: an edit made meanwhile (a model merge takes a while) stays
        update_note(store, keep_path, body=body, add_supersedes=[proposal.other.id], expected_text=keep_text)
    except NoteChanged:
        return Applied(key, "stale", f"{keep_path} changed while tidy worked on it; nothing was written, run tidy again")
    what = "merged into" if proposal.action == "merge" else "superseded by"
    return Applied(key, "applied", f"{other_path} {what} {keep_path}{by_model}")


def _archive(store: Store, proposal: Proposal) -> Applied:
    key = proposal.key
    with write_lock(store, "tidy archive"):
        machine = require_writable(store)
        path = _find(store, proposal.other.id)
        if path is None:
            if _archived_path(store, proposal.other.id, proposal.other.path):
                return Applied(key, "already", f"{proposal.other.path} is archived")
            return Applied(
                key, "stale", f"{proposal.other.title!r} ({proposal.other.id}) is no longer in the memory"
            )
        if _find(store, proposal.keep.id) is None:
            return Applied(
                key, "stale", f"the note it lives on in ({proposal.keep.id}) is no longer in the memory"
            )
        if _restored(store, proposal.other.id, path):
            return Applied(key, "skipped", f"{path} was restored from the archive: it is not archived again")
        kind = load_note(store, path).type
        if kind != "episodic":  # a plan is a file: it may say anything
            return Applied(key, "skipped", f"{path} is a {kind} note: tidy archives only session notes")
        target = f"{ARCHIVE_DIR}/{path}"
        if safe_path(store, target).exists():
            raise UsageError(f"{target} exists already; nothing was archived")
        data = safe_path(store, path).read_bytes()
        write_units(
            store,
            {path: None, target: data},
            f"{machine}: tidy: archive {path} (lives on in {proposal.keep.path})",
            path,
        )
    return Applied(key, "applied", f"{path} archived to {target}")


def apply_plan(store: Store, proposals: Iterable[Proposal], *, model: bool = False) -> list[Applied]:
    """Apply every proposal, one commit each; a proposal that fails is reported and the rest go on."""
    done: list[Applied] = []
    for proposal in proposals:
        try:
            done.append(apply_proposal(store, proposal, model=model))
        except AnamnesisError as exc:  # a plan is a file: one proposal may name anything
            done.append(Applied(proposal.key, "skipped", str(exc)))
    return done


def save_proposed(store: Store, plan: Plan) -> Path:
    """Keep a plan an agent proposed for the person to read and apply: state/tidy/proposed-<time>.json."""
    folder = store.state_dir / "tidy"
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S%fZ")
    path = folder / f"proposed-{stamp}.json"
    atomic_write_text(path, json.dumps(plan.to_dict(), indent=2, ensure_ascii=False) + "\n")
    for old in sorted(folder.glob("proposed-*.json"))[:-KEPT_PLANS]:  # an agent may ask often: keep the latest
        old.unlink(missing_ok=True)
    return path


def list_archived(store: Store) -> list[str]:
    """The memory/-relative paths of every archived note."""
    folder = store.memory / ARCHIVE_DIR
    return sorted(relpath_of(store, p) for p in folder.rglob("*.md")) if folder.is_dir() else []


def _names(ref: str, archived: str) -> bool:
    """Whether `ref` names the archived note at `archived`: its path (archived or old), its file
    name, or its id (the end of the file name); a fragment of a name is no name."""
    name = archived.rsplit("/", 1)[-1]
    stem = name.rsplit(".", 1)[0]
    whole = (archived, archived.removeprefix(f"{ARCHIVE_DIR}/"), name, stem)
    return ref in whole or (is_note_id(ref) and stem.endswith(f"-{ref}"))


def restore_archived(store: Store, ref: str) -> str:
    """Move an archived note back where it was (one commit); its path now. `ref`: its archived path,
    its old path, or its id."""
    ref = ref.strip().removeprefix("memory/")
    with write_lock(store, "tidy restore"):
        machine = require_writable(store)
        matches = [p for p in list_archived(store) if _names(ref, p)]
        if not matches:
            raise NoteNotFound(f"no archived note matches {ref!r} (see `anamnesis tidy --archived`)")
        if len(matches) > 1:
            raise UsageError(f"{ref!r} matches {len(matches)} archived notes: {', '.join(matches[:5])}")
        source = matches[0]
        target = source.removeprefix(f"{ARCHIVE_DIR}/")
        data = safe_path(store, source).read_bytes()
        target = _where_its_project_is(target, parse_note(data.decode("utf-8", "replace"), target).project)
        if safe_path(store, target).exists():
            raise UsageError(f"{target} exists already; nothing was restored")
        write_units(
            store, {source: None, target: data}, f"{machine}: tidy: restore {target} from the archive", target
        )
        _remember_restored(store, target, parse_note(data.decode("utf-8", "replace"), target).id)
    return target


def _where_its_project_is(path: str, project: str | None) -> str:
    """`path` under the folder of the note's project: a project renamed on another machine while
    the note lay in the archive moved its notes, and this one rejoins them."""
    parts = path.split("/")
    if project and len(parts) > 2 and parts[0] == PROJECTS_DIR and parts[1] != project_folder(project):
        return "/".join([PROJECTS_DIR, project_folder(project), *parts[2:]])
    return path


RESTORED = "restored:"  # a key of the declined file: a session the person took back out of the archive


def _remember_restored(store: Store, path: str, note_id: str) -> None:
    """A session restored from the archive (now at `path`) is the person's answer: not proposed
    (nor archived by an old plan) again while it stays as it is."""
    said_no = _declined(store)
    said_no[RESTORED + note_id] = {"note": _file_stamp(store, path)}
    _save_declined(store, said_no)


def _restored(store: Store, note_id: str, path: str, remembered: dict[str, dict[str, str]] | None = None) -> bool:
    """Whether the note was restored from the archive here and has not changed since (`remembered`:
    the declined file, when the caller has read it already)."""
    stamp = (remembered if remembered is not None else _declined(store)).get(RESTORED + note_id)
    return stamp is not None and stamp.get("note") == _file_stamp(store, path)


def describe_proposal(proposal: Proposal) -> list[str]:
    """A proposal as lines for a terminal: what, why, and the evidence."""
    keep, other = proposal.keep, proposal.other
    head = {
        "merge": f"merge {other.path}\n   into {keep.path}",
        "supersede": f"{keep.path}\n   supersedes {other.path}",
        "archive": f"archive {other.path}\n   (lives on in {keep.path})",
    }[proposal.action]
    lines = [f"{proposal.kind} · {proposal.project or 'global'} · score {proposal.score:.2f}", f"   {head}"]
    dates = proposal.evidence.get("dates") or {}
    lines.append(
        f"   {keep.title!r} ({str(dates.get('keep', ''))[:10]}) / {other.title!r} ({str(dates.get('other', ''))[:10]})"
    )
    for name in ("shared_lines", "lines_in_both"):
        for line in proposal.evidence.get(name, [])[:3]:
            lines.append(f"   = {line.strip()[:100]}")
    for line in proposal.evidence.get("only_in_other", [])[:3]:
        lines.append(f"   + {line.strip()[:100]}")
    return lines
