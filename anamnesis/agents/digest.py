"""What a session decided and what it left open, found in its transcript without a model.

Pure functions over what `transcript.summarize` collected: the assistant's
texts (compaction summaries among them), the session's last plan (TodoWrite)
and how its last commands ended. Decisions are sentences or bullets with a
decision cue ("decided", "going with", "root cause", …); open items are
unchecked boxes, TODOs, next steps, things still needed, the plan's
unfinished steps and commands that were still failing when the session ended.
Both lists are deduplicated (on normalised text, and a decision said twice in
other words is kept once), one line each, and bounded; later statements win
over earlier ones.

The lists say how things stand at the end of the session, not at some point in
its middle: an open item is dropped once the session later did it (a later
tool call that worked acted on most of its words, or a later sentence says it
done, or a later box ticks it); a command that failed is not open once a later
run over the same or a wider scope passed; a tool call that failed and was not
redone (an Edit refused, an MCP call that errored) is an open item; and a
request the user typed that nothing later carried out is one too, unless the
session called it off. What the session turned away from (a decision reversed
or corrected, a plan called off) is dropped with the open items it left.

Every line comes from text redacted whole: the summary's prompts, commands,
plan and failures are (see `transcript.redact_summary`), and each assistant
text is redacted here before a line is taken from it and cut.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from anamnesis.agents.transcript import words_of
from anamnesis.store import redact

MAX_DECISIONS = 8
MAX_OPEN = 8
MAX_ITEM = 200
MAX_FAILING = 2  # failing commands shown among the open items
MIN_PLAN = 4  # unfinished plan steps kept even when the texts name many open items
RECENT_RESULTS = 10  # command results at the session's end looked at for failures
MIN_ITEM = 8  # shorter candidates are fragments, not statements
SETTLED = 2 / 3  # share of an open item's words a later action or "done" sentence must hold
ADDRESSED = 2  # words of a request later actions must hold for it to count as done
SAME_DECISION = 0.5  # share of two decisions' words they have in common: said twice
MIN_SAME = 3  # and at least this many words in common
MAX_REQUEST = 400  # longer prompts are not judged sentence by sentence
# Words too common to tell one item from another.
_COMMON = frozenset(
    """the and for with that this then than from into onto when once also just make made run ran rerun
    fix fixed add added use used using get set let should would could will can now need needs needed
    still again all any some more most one two its it's our your their there here what which who not
    yet todo next step steps item items work done have has had been being are was were is be please
    sure okay thanks thank you want wanted like way ones before after about over under out off""".split()
)
_DONE = re.compile(
    r"\b(?:done|fixed|now|made|added|updated|completed?|finished|passe[sd]|passing|succeeded|works|"
    r"working|resolved|re-?ran|ran|applied|merged|deployed|green|in place)\b|\b[a-z]{3,}ed\b",
    re.I,
)
_REQUEST = re.compile(
    r"^(?:(?:please|pls|plz|also|and|now|then|next|ok(?:ay)?|finally|lastly|oh|so|btw|hey|plus)[,:]?\s+)*"
    r"(?:(?:can|could|would|will) you\s+(?:also\s+)?(?:please\s+)?)?"
    r"(?:(?:do(?:n'?t| not) forget|remember|make sure|be sure)\s+(?:you\s+)?(?:to\s+)?)?"
    r"(?:(?:we|you) (?:should|need to|must|have to)\s+(?:also\s+)?|i'?d like (?:you )?to\s+|i want you to\s+)?"
    r"(?:make|add|fix|change|update|remove|delete|rename|refactor|implement|write|create|move|bump|run|"
    r"re-?run|deploy|set|enable|disable|revert|retry|migrate|install|replace|use|switch|drop|increase|"
    r"decrease|raise|lower|limit|configure|wire|document|build|commit|push|merge|backfill|clean|split|"
    r"extract|convert|upgrade|downgrade|pin|restart|rotate|schedule|send|notify|open|close|tag)\b",
    re.I,
)
_DECISION = re.compile(
    r"\b(?:decided|decision|we'll use|we will use|i'll use|let's use|going with|went with|chose|chosen|"
    r"switched to(?! (?:the )?(?:main|master|develop|trunk|branch)\b)|switching to|instead of|the fix is|the fix was|root cause|settled on|opted (?:for|to))\b",
    re.I,
)
_OPEN = re.compile(
    r"(?:\bTODO\b|\bFIXME\b|\bnext steps?\b|\bstill (?:need|needs|needed|fails|failing|broken|to do|open)\b|"
    r"\bremaining (?:work|items?|tasks?|steps?|issues?|failures?|todos?)\b|\bremaining:|\bremains to\b|"
    r"\bnot yet\b|\bfollow[- ]?ups?\b|\bleft to do\b|\byet to be\b|\bopen questions?\b|\bpending tasks?\b|"
    r"^\W*open items?:)",
    re.I,
)
# A sentence turning away from something decided or planned: what follows the cue is dropped
# ("instead of Redis"); with nothing after it ("abandoning it"), the latest decision is.
_REVERSAL = re.compile(
    r"\b(?:instead of|rather than|no longer|abandon(?:ed|ing|s)?|scrap(?:ped|ping|s)?|revert(?:ed|ing|s)?|"
    r"back(?:ed|ing)? out(?: of)?|drop(?:ped|ping|s)? (?:the|that|this)|chang(?:ed|e|ing) (?:my|our) minds?|"
    r"actually,? no|scratch (?:that|the|this)|never ?mind|nvm|not (?:going|gonna) (?:to )?use|forget about|let'?s not|"
    r"undo(?= (?:it|that|this|those|these|everything|all|the (?:change|changes|edit|edits|last))\b)|"
    r"do(?:n'?t| not) (?:switch|move|migrate|change|go)(?: (?:over )?to)?|"
    r"(?:try|trying|take|taking) (?:a different|another) (?:approach|way|tack)|"
    r"(?:that|this|it) (?:didn'?t|did not|doesn'?t|does not) (?:work|help|fix it)|"
    r"(?:that|this|it)(?:'s| is| was) (?:wrong|incorrect|not right)|you(?:'re| are) wrong|"
    r"on second thoughts?|(?:i|we) (?:was|were) (?:wrong|mistaken)|my (?:mistake|bad)|"
    r"cancel (?:that|this|it|the)|put (?:it|that|this|them|everything) back|back (?:it|that|this|them) out|"
    r"roll (?:it|that|this|them) back|(?:skip|forget) (?:it|that|this)|do(?:n'?t| not) bother|"
    r"^\W*(?:no|nope|nah)\b[,.!]?\s+(?:it'?s|its|it is|it should be|should be|make it)\b[^.;!?]*|"
    r"^\W*wrong \w+)\b",
    re.I,
)
# A turning away that names what it turns from before the cue ("redis is overkill here", "so that's a
# dead end"): the words of its clause before the cue are what is dropped.
_DISMISSED = re.compile(
    r"\b(?:(?:is|was|are|seems?|feels?|'s)\s+)?(?:overkill|a dead end|not worth it|too (?:complex|complicated|much work))\b",
    re.I,
)
# Words that point at what was said without naming it ("go down that road", "the retry stuff").
_REFERENTS = frozenset(
    "road path route idea thing things stuff approach plan option change changes how down before usual originally".split()
)
# A sentence turning back or away that names what it turns to, not from ("back to Redis", "use Redis
# after all", "use LaunchDarkly instead", "no, stay on Gmail SMTP"): what it turns away from is the
# latest decision.
_RETURN = re.compile(
    r"(?:\b(?:go(?:ing)?|went|switch(?:ed|ing)?|mov(?:e|ed|ing)|chang(?:e|ed|ing)|revert(?:ed|ing)?) back to|"
    r"^\W*back to|\bafter all|\binstead(?! of)|"
    r"^\W*(?:no|nope|nah|wait)\b.{0,40}?\b(?:stay(?:ing)? (?:on|with)|keep(?: using)?|stick (?:with|to))|"
    r"^\W*(?:(?:let'?s|lets|just|ok|okay|so|then|we'?ll)\s+)*(?:stay|stick)\s+(?:on|with|to))\b",
    re.I,
)
# A sentence naming what it replaces, in other words than a reversal's ("replaced Redis with a
# Postgres table", "moving off Redis to Postgres", "drop Redis, we'll use Postgres", "stop using
# Redis"): the group `old` is what was turned away from, never what it is replaced with.
_REPLACED = re.compile(
    r"\b(?:replac(?:e|ed|es|ing)|swap(?:ped|ping|s)?(?: out)?|trad(?:e|ed|es|ing))\s+"
    r"(?P<old>[^,;:.!?\u2014]{1,60}?)\s+(?:with|by|for)\b"
    r"|\b(?:switch(?:ed|es|ing)?|mov(?:e|ed|es|ing)|migrat(?:e|ed|es|ing)|port(?:ed|ing)?|go(?:ing)?|went)"
    r"(?:\s+[\w-]+){0,3}?\s+(?:from|off(?: of)?)\s+"
    r"(?P<source>[^,;:.!?\u2014]{1,60}?)(?=\s+(?:to|onto|in favou?r of)\b|[,;:.!?\u2014]|$)"
    r"|\b(?:drop(?:ped|ping|s)?|ditch(?:ed|es|ing)?|get(?:ting)? rid of|got rid of|rip(?:ped|ping)? out|"
    r"stop(?:ped|ping)? using|no more|won'?t (?:be )?us(?:e|ing)|not using)\s+"
    r"(?P<gone>[^,;:.!?\u2014]{1,60}?)(?=\s+(?:and|in favou?r of|for now)\b|[,;:.!?\u2014]|$)",
    re.I,
)
# A correction naming the wrong value: "the port is 5433, not 5432".
_NOT_THAT = re.compile(r"(?:,|\s)\s*not\s+(?!(?:a|an|the|to|be|yet|sure|so|really|just|only|quite|even)\b)([\w.:/-]+)", re.I)
_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?!\w|\.\d)")
# "we use yarn here, not npm": what is used, then what is not (a word, not only a value).
_USE_NOT = re.compile(r"\b(?:use|uses|using|go with|want)\b[^,.;!?]{1,40},?\s+not\s+([\w.:/-]+)", re.I)
_VALUE = re.compile(r"\d|\w[._/:]\w")  # "5432", "db.internal", "v2/api": a value, not a word ("not slow")
_OPEN_LEAD = re.compile(r"^\W*(?:TODO|FIXME|next steps?|follow[- ]?ups?|remaining|open items?|still to do|left to do)\b\W*", re.I)
_CLAUSE_END = re.compile(r"[,;:.!?()\u2014\u2013]|\s-\s|\s(?:and|but|so|because|since)\s")
REJECTED_WORDS = 4  # content words after a reversal cue that name what was turned away from
SAME_ITEM = 0.8  # share of the shorter open item's words the other holds when both say the same thing
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
_WORDS_IN_ORDER = re.compile(r"[a-z0-9]{3,}")
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


def _same_item(one: str, other: str) -> bool:
    """Whether two open items say the same thing in other words ("- [ ] Load-test with 150 req/min",
    "Still to do: load-test with 150 req/min."): the words of the shorter are nearly all in the other."""
    if set(re.findall(r"\d+", one)) != set(re.findall(r"\d+", other)):
        return False  # "task 28" and "task 29", "150 req/min" and "300 req/min": other items
    a, b = _item_words(one), _item_words(other)
    shared, small = len(a & b), min(len(a), len(b))
    return small > 0 and shared >= min(2, small) and shared >= SAME_ITEM * small


def _not_restated(lines: Sequence[str], plan: Sequence[str]) -> list[str]:
    """`lines` with each item said once: not again when a step of the plan says it, and of two
    lines that say the same thing, the one that says more, where the later one was."""
    kept: list[str] = []
    for line in reversed(lines):
        if any(_same_item(line, step) for step in plan):
            continue
        same = next((i for i, other in enumerate(kept) if _same_item(line, other)), None)
        if same is None:
            kept.append(line)
        elif len(_item_words(line)) > len(_item_words(kept[same])):
            kept[same] = line
    return kept[::-1]


def failing_at_end(results: Sequence[tuple[str, bool]], limit: int = MAX_FAILING) -> list[str]:
    """Commands among the session's last results whose latest run failed (probes like grep aside)
    and that no later run that passed covered (`_covers`: `pytest -q tests/x.py` after
    `pytest tests/x.py::test_y`, `cd web && npm run build | tail` after `npm run build`)."""
    recent = list(results[-RECENT_RESULTS:])
    last: dict[str, int] = {}
    for i, (command, _failed) in enumerate(recent):
        key = " ".join(command.split())
        last.pop(key, None)  # keep the order of last runs
        last[key] = i
    failing = []
    for i in last.values():
        command, failed = recent[i]
        if not failed or _program(command) in _NO_CHECK:
            continue
        if any(not later_failed and _covers(later, command) for later, later_failed in recent[i + 1 :]):
            continue
        failing.append(command)
    return failing[-limit:]


def _program(command: str) -> str:
    """The program the command's last `&&`/`;` step runs (`cd x && pytest -q` runs pytest)."""
    words = re.split(r"&&|;", command)[-1].split()
    while words and ("=" in words[0] or words[0] in ("sudo", "env", "time", "nice")):
        words = words[1:]
    return words[0].rsplit("/", 1)[-1] if words else ""


_REDIRECT = re.compile(r"^(?:\d?[<>]{1,2}&?\d*|&>{1,2})(?P<target>.*)$")


# Ways of running a program that run the same thing: `python -m pytest`, `uv run pytest`, `npx jest`.
_RUNNERS = {
    ("python", "-m"), ("python3", "-m"), ("uv", "run"), ("poetry", "run"), ("pipenv", "run"), ("pdm", "run"),
    ("hatch", "run"), ("rye", "run"), ("bundle", "exec"), ("pnpm", "exec"), ("npx", ""), ("bunx", ""),
}  # fmt: skip
_SCRIPT_RUNNERS = {"npm", "pnpm", "yarn", "bun"}  # `npm test`, `npm run test`, `pnpm test`, `yarn test`: one script
_SCRIPT_ALIASES = {"t": "test", "tst": "test"}
# Build steps that run another step first: `mvn verify` runs the tests `mvn test` ran.
_WIDER: dict[tuple[str, str], frozenset[str]] = {
    ("mvn", "test"): frozenset({"package", "verify", "install", "deploy"}),
    ("mvnw", "test"): frozenset({"package", "verify", "install", "deploy"}),
    ("gradle", "test"): frozenset({"build", "check"}),
    ("gradlew", "test"): frozenset({"build", "check"}),
}
# Options that choose which tests or files a run takes (what follows them narrows it).
_SELECTORS = frozenset(
    "k m e t g p filter grep testNamePattern t run only tests deselect ignore ignore-glob select exclude "
    "package features test-path-pattern testPathPattern project".split()
)
# Commands that move files about or look at them: one that failed is not a check left failing.
_HOUSEKEEPING = frozenset("git rm mv cp mkdir rmdir touch chmod chown ln cd ls cat echo kill pkill source export".split())
_NO_CHECK = _HOUSEKEEPING | _PROBES  # a failed run of these is no check left failing


def _run_of(command: str) -> tuple[str, list[str], list[str], list[str]]:
    """(program, its words that name no path, its path words, the values of its options) of the
    command's last `&&`/`;` step, before any pipe, without redirections: what a run of it covers.
    The program is the one a runner runs (`python -m pytest`, `uv run pytest`: pytest); npm's
    kin are one program and `run` is left out (`npm run test`, `pnpm test`: npm test)."""
    step = re.split(r"&&|;|\|\|", command)[-1]
    step = re.split(r"(?<!\|)\|(?!\|)", step)[0]
    try:  # quoted words whole: `SMTP_PASSWORD="$(op read …)" python x.py` runs python
        words = shlex.split(step)
    except ValueError:
        words = step.split()
    while words and ("=" in words[0] or words[0] in ("sudo", "env", "time", "nice")):
        words = words[1:]
    if words:
        words = [words[0].rsplit("/", 1)[-1], *words[1:]]
    while len(words) > 1 and ((words[0], words[1]) in _RUNNERS or (words[0], "") in _RUNNERS):
        words = words[1:] if (words[0], "") in _RUNNERS else words[2:]
        words = [words[0].rsplit("/", 1)[-1], *words[1:]] if words else words
    if not words:
        return "", [], [], []
    program, rest = words[0], words[1:]
    if program in _SCRIPT_RUNNERS:
        program = "npm"
        rest = rest[1:] if rest[:1] == ["run"] or rest[:1] == ["run-script"] else rest
        rest = [_SCRIPT_ALIASES.get(rest[0], rest[0]), *rest[1:]] if rest else rest
    names: list[str] = []
    paths: list[str] = []
    values: list[str] = []
    skip = after_option = False
    for word in rest:
        if skip:
            skip = False
            continue
        redirect = _REDIRECT.match(word)
        if redirect:
            skip = not redirect.group("target")  # `> out.log`: the next word is where to
            continue
        if word.startswith("-"):
            option, _eq, value = word.partition("=")
            if _eq and option.lstrip("-") in _SELECTORS:  # `--ignore=tests/slow` narrows the run
                values.append(f"{option}={value}")
            after_option = not _eq and word.lstrip("-") in _SELECTORS
            continue
        if "/" in word or "::" in word or word == "." or re.search(r"\.\w+$", word):
            paths.append(word)
        else:
            (values if after_option else names).append(word)
        after_option = False
    return program, names, paths, values


def _covers(later: str, failed: str) -> bool:
    """Whether a run of `later` that passed shows `failed` passes now: the same program with the
    same subcommand and arguments (or the first of them: `cargo test` after `cargo test foo`),
    over the same paths or folders holding them (or over all), not narrowed by an option the
    failed run did not have (`pytest a.py` covers `pytest a.py -k slow`, not the other way)."""
    program, names, paths, values = _run_of(later)
    failed_program, failed_names, failed_paths, failed_values = _run_of(failed)
    if not program or program != failed_program:
        return False
    whole_tree = "." in paths or "./" in paths  # `mypy .` covers `mypy src`
    wider = names[:1] and failed_names[:1] and names[0] in _WIDER.get((program, failed_names[0]), ())
    if names != failed_names and not wider and not ((names or whole_tree) and failed_names[: len(names)] == names):
        return False
    if not set(values) <= set(failed_values):
        return False
    return all(
        p in (".", "./") or any(p == q or q.startswith(p.rstrip("/") + "/") or q.startswith(p + "::") for q in failed_paths)
        for p in (path[:-4] if path.endswith("/...") else path for path in paths)
    )


def _content(text: str) -> set[str]:
    return {w for w in words_of(text) if w not in _COMMON}


def _item_words(line: str) -> set[str]:
    """The words of an open item that tell what it is about: without the words that only say it is
    open ("Remaining:", "TODO", "still need to") or ask for it ("Replace", "Add"), which a tool call
    that does it never holds."""
    text = _OPEN.sub(" ", line).lstrip(" \t-*:")
    text = _REQUEST.sub(" ", text, count=1) if _REQUEST.match(text) else text
    return _content(text) or _content(line)


def _checked(texts: Sequence[str], seqs: Sequence[int]) -> dict[str, int]:
    """The boxes ticked (`- [x] …`), by normalised text -> the last time one was."""
    ticked: dict[str, int] = {}
    for seq, text in zip(seqs, texts, strict=True):
        if "[x]" not in text and "[X]" not in text:
            continue
        for line in text.splitlines():
            box = _BOX.match(line)
            if box and box.group(1) != " ":
                ticked[_key(redact(line[box.end() :]))] = seq
    return ticked


def _share(words: set[str], seen: Mapping[str, int], after: int) -> float:
    """The share of `words` seen (acted on, or said done) after time `after`."""
    return sum(1 for w in words if seen.get(w, -1) > after) / len(words) if words else 0.0


def _said_done(texts: Sequence[str], seqs: Sequence[int]) -> dict[str, int]:
    """word -> the last time a sentence saying something was done (not left open) held it."""
    said: dict[str, int] = {}
    for seq, text in zip(seqs, texts, strict=True):
        for line in _without_code(text).splitlines():
            if _BOX.match(line) or _heading(line) is not None:
                continue  # a checkbox or a heading says nothing was done
            for sentence in _SENTENCE_END.split(line):
                if _DONE.search(sentence) and not _OPEN.search(sentence):
                    for word in _content(sentence):
                        said[word] = seq
    return said


def _distinct_decisions(decided: Sequence[str]) -> list[str]:
    """The latest of each decision, one said twice in other words kept once (the later one)."""
    kept: list[tuple[str, set[str]]] = []
    for line in reversed(decided):
        words = _content(_DECISION.sub(" ", line))
        same = any(
            len(words & other) >= MIN_SAME and len(words & other) >= SAME_DECISION * len(words | other)
            for _line, other in kept
        )
        if not same:
            kept.append((line, words))
    return [line for line, _words in reversed(kept)]


def _terms(text: str) -> set[str]:
    """The content words of `text` and its numbers, however short ("retry 5 times": 5)."""
    return _content(text) | set(_NUMBER.findall(text))


def _named(text: str) -> list[str]:
    """The words of `text`, in order, that name something (not "that road", "the retry stuff")."""
    words = [w for raw in _WORDS_IN_ORDER.findall(text.lower()) for w in _content(raw) if w not in _REFERENTS]
    return words + [n for n in _NUMBER.findall(text) if n not in words]


def _reversals(said: Iterable[tuple[int, str]]) -> list[tuple[int, set[str], set[str]]]:
    """(when, the words turned away from, the sentence's words) for each sentence that reverses
    something; the words are empty when the sentence names nothing ("abandoning it"). A plan's
    own words ("TODO: revert the debug logging") reverse nothing yet."""
    found: list[tuple[int, set[str], set[str]]] = []
    for seq, text in said:
        for line in _without_code(text).splitlines():
            for sentence in _SENTENCE_END.split(line.strip()):
                if _OPEN.search(sentence):
                    continue
                replaced = list(_REPLACED.finditer(sentence))
                named = [w for m in replaced for w in _named(m.group("old") or m.group("source") or m.group("gone"))]
                dismissed = list(_DISMISSED.finditer(sentence))
                for m in dismissed:  # "redis is overkill here": what comes before
                    named += _named(_CLAUSE_END.split(sentence[: m.start()])[-1])
                cues = list(_REVERSAL.finditer(sentence))
                if not cues:
                    if not named:
                        named = [
                            w
                            for m in (*_NOT_THAT.finditer(sentence), *_USE_NOT.finditer(sentence))
                            if _VALUE.search(m.group(1)) or m.re is _USE_NOT
                            for w in _named(m.group(1))
                        ]
                    if named:
                        found.append((seq, set(named[:REJECTED_WORDS]), _content(sentence)))
                    elif replaced or dismissed or _RETURN.search(sentence):
                        found.append((seq, set(), _content(sentence)))  # "ditch it", "a dead end"
                    continue
                before = _content(sentence[: cues[0].start()])
                for cue in cues:  # "actually no, let's not use Redis": the cue that names it
                    clause = _CLAUSE_END.split(sentence[cue.end() :], maxsplit=1)[0]
                    named += [w for w in _named(clause) if w not in before]
                if not named:  # "that's wrong, the port is 5433 not 5432": what it corrects
                    named = [w for m in _NOT_THAT.finditer(sentence) for w in _named(m.group(1))]
                found.append((seq, set(named[:REJECTED_WORDS]), _content(sentence)))
    return found


def _turned_away(
    decided: Sequence[tuple[int, str]],
    opened: Sequence[tuple[int, str]],
    reversals: Sequence[tuple[int, set[str], set[str]]],
    typed: Sequence[int] = (),
    asked: Sequence[tuple[int, str, set[str]]] = (),
    plan: tuple[int, Sequence[str]] = (-1, ()),
) -> tuple[set[str], set[str]]:
    """The decisions and open items (by line) that a later sentence turned away from: a decision
    made before it that holds a word it rejects (or, when it names nothing, the latest decision
    before it), and an open item, a request (`asked`) or a step of the plan (set at `plan[0]`)
    stated before it that holds one of those words. A prompt (typed at one of `typed`) that turns
    away from what it names nothing of ("never mind, let's not do that", "revert all of that")
    drops what was planned and left open since the prompt before it, and what that prompt asked;
    of the decisions, only one made since that prompt ("ok cool never mind then" after a side
    question leaves the fix decided before it). A request you call off by one of its words ("nvm
    the retry stuff") is called off."""
    dropped: set[str] = set()
    stale: set[str] = set()
    when_planned, steps = plan
    for when, rejected, words in reversals:
        earlier = [(seq, line) for seq, line in decided if seq < when and line not in dropped]
        since = -1
        if rejected:
            hit = [line for _seq, line in earlier if rejected & _terms(line)]
        else:
            if when in typed:
                since = max((seq for seq in typed if seq < when), default=-1)
                earlier = [(seq, line) for seq, line in earlier if seq > since]
            hit = [earlier[-1][1]] if earlier else []
            rejected = set().union(*(_content(_DECISION.sub(" ", line)) - words for line in hit))
        dropped.update(hit)
        stale.update(line for seq, line in opened if seq < when and (seq > since >= 0 or rejected & _content(line)))
        for seq, sentence, asked_words in asked:
            enough = len(rejected & asked_words) >= (1 if when in typed else min(ADDRESSED, len(asked_words)))
            if seq < when and (seq == since or enough):
                stale.add(sentence)
        if when_planned < when:
            stale.update(step for step in steps if when_planned > since >= 0 or rejected & _content(step))
    return dropped, stale


def requests(prompts: Sequence[str], prompt_seqs: Sequence[int]) -> list[tuple[int, str, set[str]]]:
    """(when, sentence, its words) for each sentence of a prompt that asks for a change ("make the
    notify step retry twice"); long prompts are not judged."""
    found = []
    for seq, prompt in zip(prompt_seqs, prompts, strict=True):
        if len(prompt) > MAX_REQUEST:
            continue
        for sentence in _SENTENCE_END.split(" ".join(prompt.split())):
            words = _terms(_REQUEST.sub(" ", sentence, count=1)) if _REQUEST.match(sentence) else set()
            if len(words) >= 2:
                found.append((seq, sentence, words))
    return found


def requests_left(
    asked: Sequence[tuple[int, str, set[str]]],
    acted: Mapping[str, int],
    first: int | None = None,
    cancelled: Iterable[str] = (),
    typed: Sequence[int] = (),
    changed: Sequence[int] = (),
) -> list[str]:
    """The requests (see `requests`) that no later tool call that worked acted on (saying "done"
    is not doing it), latest last. The first prompt (typed at `first`) is what the whole session
    works on: any tool call that worked after it counts as carrying it out. A request the session
    later turned away from (`cancelled`) is not left undone.

    The turn a prompt starts (until the next prompt, of those typed at `typed`) is where it is
    carried out: there, a change (a file written or a changing command, at one of `changed`) and
    a call that worked acting on one word of the request are enough ("add a health check
    endpoint" → `routes/health.py`); a change alone is not (the turn may finish earlier work)."""
    last_act = max(acted.values(), default=-1)
    skip = set(cancelled)

    def changed_in_turn(seq: int) -> bool:
        end = min((p for p in typed if p > seq), default=None)
        return any(seq < c and (end is None or c < end) for c in changed)

    def done(seq: int, words: set[str]) -> bool:
        hits = sum(1 for w in words if acted.get(w, -1) > seq)
        if hits >= min(ADDRESSED, len(words)) or (seq == first and last_act > seq):
            return True
        return hits >= 1 and changed_in_turn(seq)

    return [
        one_line(f"Asked, not done: {sentence.rstrip('.')}")
        for seq, sentence, words in asked
        if sentence not in skip and not done(seq, words)
    ]


def failed_calls(failures: Mapping[tuple[str, str], str]) -> list[str]:
    """One line for each tool call that failed and was not done since (already redacted)."""
    out = []
    for (tool, target), error in failures.items():
        what = f"{tool_name(tool)} of `{one_line(target, 120)}`" if target else tool_name(tool)
        out.append(one_line(f"{what} failed: {error}"))
    return out


def tool_name(tool: str) -> str:
    """`mcp__server__tool` as `server.tool` (MCP), other tools as they are named."""
    if tool.startswith("mcp__"):
        return ".".join(part for part in tool[5:].split("__") if part)
    return tool


def digest(
    texts: Sequence[str],
    todos: Sequence[tuple[str, str]] = (),
    results: Sequence[tuple[str, bool]] = (),
    *,
    text_seqs: Sequence[int] | None = None,
    actions: Sequence[tuple[int, str]] = (),
    prompts: Sequence[str] = (),
    prompt_seqs: Sequence[int] = (),
    failures: Mapping[tuple[str, str], str] | None = None,
    todos_seq: int = -1,
    changed: Sequence[int] = (),
) -> Digest:
    """The session's decisions and open items, as they stand at its end.

    `texts` are the assistant's texts and compaction summaries in order, as
    written (each is redacted whole here before a line is taken from it);
    `todos` the last plan as (step, status) and `todos_seq` when it was set; `results` the last commands as
    (command, failed); `text_seqs` when each text was said, `actions` what the
    latest tool calls that worked acted on and when, `prompts` (redacted)
    and `prompt_seqs` the user's prompts and when, `failures` the tool calls
    that failed and were not redone, `changed` when a file was changed (see
    `transcript.SessionSummary`). Open
    items list failed calls and failing commands first, then the plan's
    unfinished steps, then requests left undone, then what the texts left open.
    """
    seqs = list(text_seqs) if text_seqs is not None and len(text_seqs) == len(texts) else list(range(len(texts)))
    decided_when: list[tuple[int, str]] = []
    stated_open: dict[str, tuple[int, str]] = {}  # key -> (when last said, line)
    for seq, text in zip(seqs, texts, strict=True):
        if not statements(text):
            continue  # nothing to take from it: no need to redact it
        for kind, line in statements(redact(text)):  # redacted whole, before any line is cut
            if kind == "open":
                key = _key(_OPEN_LEAD.sub("", line))  # "TODO: wire X" and "Wire X" are one item
                stated_open.pop(key, None)
                stated_open[key] = (seq, line)
            else:
                decided_when.append((seq, line))
    # What the session turned away from later (the assistant's words or the user's) is not how
    # things stand at its end: neither that decision nor the open items of the plan it dropped.
    typed = list(prompt_seqs) if len(prompt_seqs) == len(prompts) else []
    said = [*zip(seqs, texts, strict=True), *(zip(typed, prompts, strict=True) if typed else ())]
    asked = requests(prompts, typed) if typed else []
    steps = [step for step, status in todos if status != "completed"]
    dropped, stale = _turned_away(
        decided_when, list(stated_open.values()), _reversals(said), typed, asked, (todos_seq, steps)
    )
    decided = [line for _seq, line in decided_when if line not in dropped]
    checked = _checked(texts, seqs)
    stated_open = {
        key: (seq, line)
        for key, (seq, line) in stated_open.items()
        if line not in stale and checked.get(_key(_BOX.sub("", line)), -1) <= seq
    }
    acted: dict[str, int] = {}
    if (stated_open or asked) and actions:
        for seq, text in actions:  # word -> the last time a tool call that worked acted on it
            for word in words_of(text) | set(_NUMBER.findall(text)):  # "make it 30 minutes": 30 * 60
                acted[word] = seq
    seen = dict(acted)  # done by a tool call, or said done
    if stated_open:
        for word, seq in _said_done(texts, seqs).items():
            seen[word] = max(seq, seen.get(word, -1))
    still_open = [line for seq, line in stated_open.values() if _share(_item_words(line), seen, seq) < SETTLED]
    undone = requests_left(asked, acted, typed[0] if typed else None, stale, typed, changed)
    taken: set[str] = set()
    failing = failed_calls(failures or {}) + [
        one_line(f"`{one_line(cmd, 120)}` still fails at the end of the session")
        for cmd in failing_at_end(results)
    ]
    failing = _latest_distinct(failing, MAX_FAILING + MAX_FAILING, taken)
    plan: list[str] = []
    for step, status in todos:
        if status == "completed" or not step.strip() or step in stale:
            continue
        suffix = " (in progress)" if status == "in_progress" else ""
        plan.append(one_line(step, MAX_ITEM - len(suffix)) + suffix)
    room = MAX_OPEN - len(failing)
    from_texts = _latest_distinct(_not_restated(still_open + undone, plan), room, set(taken) | {_key(p) for p in plan})
    plan_room = max(min(MIN_PLAN, room), room - len(from_texts))
    plan = _latest_distinct(plan[::-1], plan_room, taken)[::-1]  # the plan's first steps come first
    from_texts = _latest_distinct(from_texts, room - len(plan), taken)
    decisions = _distinct_decisions(_latest_distinct(decided, 3 * MAX_DECISIONS, set(taken)))[-MAX_DECISIONS:]
    return Digest(decisions=decisions, open_items=failing + plan + from_texts)
