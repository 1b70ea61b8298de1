"""What a session decided and what it left open, found in its transcript without a model.

Pure functions over what `transcript.summarize` collected: the assistant's
texts (compaction summaries among them), the session's last plan (TodoWrite)
and how its last commands ended. Decisions are sentences or bullets with a
decision cue ("decided", "going with", "root cause", …); open items are
unchecked boxes, TODOs, next steps, things still needed, the plan's
unfinished steps and commands that were still failing when the session ended.
Both lists are deduplicated (on normalised text), one line each, and bounded;
later statements win over earlier ones.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

MAX_DECISIONS = 8
MAX_OPEN = 8
MAX_ITEM = 200
MAX_FAILING = 2  # failing commands shown among the open items
MIN_PLAN = 4  # unfinished plan steps kept even when the texts name many open items
RECENT_RESULTS = 10  # command results at the session's end looked at for failures
MIN_ITEM = 8  # shorter candidates are fragments, not statements

_DECISION = re.compile(
    r"\b(?:decided|decision|we'll use|we will use|i'll use|let's use|going with|went with|chose|chosen|"
    r"switched to|switching to|instead of|the fix is|the fix was|root cause|settled on|opted (?:for|to))\b",
    re.I,
)
_OPEN = re.compile(
    r"(?:\bTODO\b|\bFIXME\b|\bnext steps?\b|\bstill (?:need|needs|needed|fails|failing|broken|to do|open)\b|"
    r"\bremaining (?:work|items?|tasks?|steps?|issues?|failures?|todos?)\b|\bremaining:|\bremains to\b|"
    r"\bnot yet\b|\bfollow[- ]?ups?\b|\bleft to do\b|\byet to be\b|\bopen questions?\b|\bpending tasks?\b)",
    re.I,
)
_OPEN_HEADING = re.compile(
    r"\b(?:pending tasks?|next steps?|todos?|to do|open items?|open questions?|remaining|follow[- ]?ups?|"
    r"left to do|still to do|not done|unfinished|known issues?)\b",
    re.I,
)
_DECISION_HEADING = re.compile(r"\b(?:decisions?|decided|design choices?|key choices?)\b", re.I)
_BULLET = re.compile(r"^\s*(?:[-*+•]|\d{1,2}[.)])\s+")
_BOX = re.compile(r"^\s*(?:[-*+]|\d{1,2}[.)])?\s*\[( |x|X)\]\s+")
_HEADING = re.compile(
    r"^\s*(?:#{1,6}\s+(?P<md>.+?)\s*#*|\*\*(?P<bold>[^*]{2,80})\*\*:?|(?P<colon>[^.!?]{2,80}):)\s*$"
)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z`*\"'(])")
# Commands whose non-zero exit is an answer ("no match", "differs"), not a failure.
_PROBES = {
    "grep",
    "egrep",
    "fgrep",
    "rg",
    "find",
    "test",
    "[",
    "ls",
    "which",
    "diff",
    "cmp",
    "command",
    "type",
}


@dataclass
class Digest:
    """The decisions and open items of one session, each one line."""

    decisions: list[str] = field(default_factory=list)
    open_items: list[str] = field(default_factory=list)


def one_line(text: str, limit: int = MAX_ITEM) -> str:
    """`text` on one line without markdown emphasis, cut to `limit` characters with …."""
    line = " ".join(text.replace("**", "").replace("__", "").split()).strip()
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"


def _key(text: str) -> str:
    return " ".join(re.sub(r"[^\w]+", " ", text.lower()).split())


def _without_code(text: str) -> str:
    """The text with fenced code blocks removed (a TODO in code is not the session's)."""
    return re.sub(r"^\s*(```|~~~).*?(?:^\s*\1[^\n]*$|\Z)", "", text, flags=re.M | re.S)


def _heading(line: str) -> str | None:
    bullet = _BULLET.match(line)
    if bullet and not line.rstrip().endswith(":"):
        return None
    match = _HEADING.match(line[bullet.end() :] if bullet else line)  # "7. Pending Tasks:" too
    if not match:
        return None
    return match.group("md") or match.group("bold") or match.group("colon")


def _classify(sentence: str) -> str | None:
    if _OPEN.search(sentence):
        return "open"
    if _DECISION.search(sentence):
        return "decision"
    return None


def statements(text: str) -> list[tuple[str, str]]:
    """(kind, line) for each decision ("decision") or open item ("open") stated in `text`, in order.

    A bullet or checkbox is one statement; prose is split into sentences. Under a
    heading such as "Next steps:" or "Pending Tasks:" every bullet is an open item
    (under "Decisions:" a decision), whether or not it carries a cue itself.
    """
    found: list[tuple[str, str]] = []
    context: str | None = None  # "open"/"decision" while under such a heading
    seen_content = False
    blank_before = False
    for raw in _without_code(text).splitlines():
        if not raw.strip():
            blank_before = True
            continue
        heading = _heading(raw)
        if heading is not None:
            context = (
                "open"
                if _OPEN_HEADING.search(heading)
                else "decision"
                if _DECISION_HEADING.search(heading)
                else None
            )
            seen_content, blank_before = False, False
            continue
        box = _BOX.match(raw)
        bullet = _BULLET.match(raw)
        if box:
            if box.group(1) == " ":
                found.append(("open", raw[box.end() :]))
            seen_content, blank_before = True, False
            continue
        if bullet:
            body = raw[bullet.end() :]
            kind = context or _classify(body)
            if kind:
                found.append((kind, body))
            seen_content, blank_before = True, False
            continue
        if context and seen_content and blank_before:
            context = None  # prose after the list: the heading's section is over
        for sentence in _SENTENCE_END.split(raw.strip()):
            kind = context or _classify(sentence)
            if kind:
                found.append((kind, sentence))
        seen_content, blank_before = True, False
    return [(kind, one_line(line)) for kind, line in found if len(one_line(line)) >= MIN_ITEM]


def _latest_distinct(lines: Iterable[str], limit: int, taken: set[str]) -> list[str]:
    """Up to `limit` lines not seen before (by normalised text), the latest ones, in order."""
    kept: list[str] = []
    for line in reversed(list(lines)):
        key = _key(line)
        if not key or key in taken:
            continue
        taken.add(key)
        kept.append(line)
        if len(kept) >= limit:
            break
    return kept[::-1]


def failing_at_end(results: Sequence[tuple[str, bool]], limit: int = MAX_FAILING) -> list[str]:
    """Commands among the session's last results whose latest run failed (probes like grep aside)."""
    last: dict[str, tuple[str, bool]] = {}
    for command, failed in results[-RECENT_RESULTS:]:
        key = " ".join(command.split())
        last.pop(key, None)  # keep the order of last runs
        last[key] = (command, failed)
    failing = [cmd for cmd, failed in last.values() if failed and _program(cmd) not in _PROBES]
    return failing[-limit:]


def _program(command: str) -> str:
    """The program the command's last `&&`/`;` step runs (`cd x && pytest -q` runs pytest)."""
    words = re.split(r"&&|;", command)[-1].split()
    while words and ("=" in words[0] or words[0] in ("sudo", "env", "time", "nice")):
        words = words[1:]
    return words[0].rsplit("/", 1)[-1] if words else ""


def digest(
    texts: Iterable[str],
    todos: Sequence[tuple[str, str]] = (),
    results: Sequence[tuple[str, bool]] = (),
) -> Digest:
    """The session's decisions and open items.

    `texts` are the assistant's texts and compaction summaries in order; `todos`
    the last plan as (step, status); `results` the last commands as (command,
    failed). Open items list failing commands first, then the plan's unfinished
    steps, then what the texts left open.
    """
    decided: list[str] = []
    stated_open: list[str] = []
    for text in texts:
        for kind, line in statements(text):
            (stated_open if kind == "open" else decided).append(line)
    taken: set[str] = set()
    failing = [
        one_line(f"`{one_line(cmd, 120)}` still fails at the end of the session")
        for cmd in failing_at_end(results)
    ]
    failing = _latest_distinct(failing, MAX_FAILING, taken)
    plan: list[str] = []
    for step, status in todos:
        if status == "completed" or not step.strip():
            continue
        suffix = " (in progress)" if status == "in_progress" else ""
        plan.append(one_line(step, MAX_ITEM - len(suffix)) + suffix)
    room = MAX_OPEN - len(failing)
    from_texts = _latest_distinct(stated_open, room, set(taken) | {_key(p) for p in plan})
    plan_room = max(min(MIN_PLAN, room), room - len(from_texts))
    plan = _latest_distinct(plan[::-1], plan_room, taken)[::-1]  # the plan's first steps come first
    from_texts = _latest_distinct(from_texts, room - len(plan), taken)
    decisions = _latest_distinct(decided, MAX_DECISIONS, set(taken))
    return Digest(decisions=decisions, open_items=failing + plan + from_texts)
