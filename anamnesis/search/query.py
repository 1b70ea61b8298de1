"""What a search query asks for: its terms, phrases and exclusions.

Queries are natural language by default: an agent asks "how do we rotate the
staging certificates?", a person types `pg pool size`, a note holds
`docker run --rm -it`. So no word is required; stop words are set apart as
`function_terms` (ranking uses them only to find notes that share no content
word with the query: see `anamnesis.search.ranking`); words
with punctuation (`parse_config`, `a.b.c`, `src/app/main.py`, `--no-deps`)
are phrases of their parts, so they match exactly that sequence; a command
line is also kept whole as one phrase, to reward the note that holds it.

The explicit syntax stays for people who want it: `"a phrase"`, `prefix*`,
`NOT word`, and `-word` where it cannot be a command-line flag (see
`_is_exclusion`). Ranking is not done here: see `anamnesis.search.ranking`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

MAX_TERMS = 32

_WORD_RE = re.compile(r"[^\W_]+", re.UNICODE)
_TOKEN_RE = re.compile(r'(-?)"([^"]*)"?|(\S+)')
_CAMEL_RE = re.compile(r"[a-z0-9][A-Z]")
_APOSTROPHE_RE = re.compile(r"(?<=[^\W\d_])['’](?=[^\W\d_])")

STOPWORDS = frozenset(
    (
        "a about after all also am an and any are as at be been being but by can could did do does doing "
        "done for from had has have having he her here hers him his how i if in into is it its itself "
        "just me my no nor not of off on once only or other our ours out over own please same she should "
        "so some such than that the their theirs them then there these they this those through to too "
        "under until up us very was we were what when where which while who whom why will with would "
        "you your yours let lets "
        # contractions, after their apostrophe is dropped
        "whats dont doesnt didnt isnt arent wasnt werent cant couldnt shouldnt wouldnt wont im ive id "
        "youre weve thats theres heres hows wheres whys ill theyre"
    ).split()
)

# Words engineers write both ways: a query with one also finds notes with the other.
_SAME = (
    "k8s kubernetes|db database|pg postgres postgresql|prod production|env environment|config configuration"
    "|repo repository|auth authentication|creds credentials|cert certificate|deps dependencies"
    "|dev development|docs documentation|perf performance|js javascript|ts typescript|py python"
    "|tf terraform|mac macos osx|arm64 aarch64|x86 amd64 x86-64|win windows|msg message|err error"
    "|pw password passwd|dir directory|app application|infra infrastructure|impl implementation"
    "|req request|res response|ws websocket|vm virtual-machine|tls ssl|pr pull-request|mr merge-request"
    "|ci continuous-integration|oom out-of-memory|ttl time-to-live|sso single-sign-on|ui user-interface"
    "|async asynchronous|sync synchronous|regex regexp|cron crontab|gc garbage-collection|lb load-balancer"
)
SAME_AS: dict[str, tuple[tuple[str, ...], ...]] = {}
for _group in _SAME.split("|"):
    _forms = [tuple(w.split("-")) for w in _group.split()]
    for _form in _forms:
        SAME_AS[" ".join(_form)] = tuple(f for f in _forms if f != _form)

# Programs whose single-dash arguments are flags, not exclusions (`ls -la`, `tar -xzf`).
_COMMANDS = frozenset(
    (
        "apt apt-get brew cargo cat chmod chown cp curl docker docker-compose du find gcc git go grep "
        "gunicorn head helm java journalctl jq kubectl less ls make mkdir mv mypy node npm npx openssl "
        "pg_dump pip pip3 pipx pnpm podman poetry ps psql pytest python python3 redis-cli rm rsync ruff "
        "scp sed sort ssh sudo systemctl tail tar terraform uv uvicorn wc wget xargs yarn zip unzip "
        "ansible ansible-playbook aws az gcloud gh kubectx mysql sqlite3 tmux nc dig"
    ).split()
)


@dataclass(frozen=True)
class Term:
    """One thing to look for: a word, or a phrase of word parts in order."""

    parts: tuple[str, ...]
    prefix: bool = False
    quoted: bool = False  # the user quoted it: an exact phrase
    code: bool = False  # a code word, path, flag or command line: punctuation was inside
    weight: float = 1.0
    variants: tuple[tuple[str, ...], ...] = ()  # other spellings that count as this term
    joined: bool = False  # words of the query that are also a term one by one ("merge request")

    def fts(self) -> str:
        """The term as an FTS5 phrase, or a group of its spellings (safe: quotes doubled)."""
        main = _phrase(self.parts) + ("*" if self.prefix else "")
        if not self.variants:
            return main
        return "(" + " OR ".join([main, *(_phrase(v) for v in self.variants)]) + ")"

    @property
    def text(self) -> str:
        return " ".join(self.parts)


@dataclass
class Query:
    """A parsed query: terms to rank by, exclusions, and the command line it holds."""

    raw: str
    terms: list[Term] = field(default_factory=list)
    excluded: list[Term] = field(default_factory=list)
    dash_excluded: list[Term] = field(default_factory=list)  # from `-word`: dropped if they leave nothing
    command: Term | None = None  # the longest run of command-line tokens, as one phrase
    function_terms: list[Term] = field(default_factory=list)  # its stop words ("how", "where", "up")
    only_stop_words: bool = False  # "the a of", "what is it": words to find, but no meaning to rank by

    @property
    def empty(self) -> bool:
        return not self.terms

    def match_any(self) -> str | None:
        """An FTS5 expression matching notes with any of the terms, minus exclusions."""
        if not self.terms:
            return None
        joined = " OR ".join(dict.fromkeys(t.fts() for t in self.terms))
        expr = f"({joined})" if len(self.terms) > 1 else joined
        for term in self.excluded:
            expr = f"{expr} NOT {term.fts()}"
        return expr

    def match_function_only(self, words: list[Term]) -> str | None:
        """An FTS5 expression for notes holding one of `words` but none of the terms, minus exclusions."""
        if not words or not self.terms:
            return None
        expr = "(" + " OR ".join(dict.fromkeys(t.fts() for t in words)) + ")"
        for term in [*self.terms, *self.excluded]:
            expr = f"{expr} NOT {term.fts()}"
        return expr

    def match_all(self) -> str | None:
        """An FTS5 expression requiring every term (the `--all` mode)."""
        if not self.terms:
            return None
        expr = " AND ".join(dict.fromkeys(t.fts() for t in self.terms))
        for term in self.excluded:
            expr = f"({expr}) NOT {term.fts()}"
        return expr


def _phrase(parts: tuple[str, ...]) -> str:
    return '"' + " ".join(p.replace('"', '""') for p in parts) + '"'


def _code_term(text: str, parts: list[str]) -> Term:
    """A code word as a term that also finds its longer forms and its CamelCase parts.

    `kgo.CooperativeSticky` finds `kgo.CooperativeStickyBalancer` (a prefix on
    the last part: people paste partial identifiers) and `DuplicatePrepared`
    finds the hidden column's `duplicate prepared` split; flags stay exact
    (`--rm` must not find `rmdir`).
    """
    bare = text.strip("`'\"()[]{}<>,;:!?")
    if _is_flag(bare):
        return Term(tuple(parts), code=True)
    camel = max((w for w in _WORD_RE.findall(bare) if _CAMEL_RE.search(w)), key=len, default="")
    variants = ((tuple(split_camel(camel)),) if camel else ()) + SAME_AS.get(" ".join(parts), ())
    prefix = len(parts[-1]) >= 3
    if prefix:  # the word as written, once more: a note holding it ranks above its longer forms
        variants = (tuple(parts), *variants)
    return Term(tuple(parts), prefix=prefix, code=True, variants=variants)


def without_dash_exclusions(query: Query) -> Query:
    """The query with its `-word` exclusions read as words to find instead (a flag after all)."""
    kept = [t for t in query.excluded if t not in query.dash_excluded]
    terms = query.terms + [t for t in query.dash_excluded if t not in query.terms]
    return Query(
        raw=query.raw,
        terms=terms[:MAX_TERMS],
        excluded=kept,
        command=query.command,
        function_terms=[t for t in query.function_terms if t not in terms],
    )


def _parts(token: str) -> list[str]:
    return [p.lower() for p in _WORD_RE.findall(_APOSTROPHE_RE.sub("", token))]


def _is_flag(token: str) -> bool:
    return len(token) > 1 and token[0] == "-" and (token[1].isalnum() or token[1] == "-")


def _is_exclusion(token: str, index: int, tokens: list[str]) -> bool:
    """`-word` excludes only where it cannot be a flag of a command line.

    In `docker run --rm -it`, `ls -la` or `goose -dir db/migrations`, the dash
    words are part of what the note holds: excluding them would exclude the
    very note. So a dash word is an exclusion only in a query of plain words
    (no other flag, no code word, no program name before it), and only when
    it is a real word of three letters or more. `NOT word` always excludes.
    """
    if token.startswith("--") or not _is_flag(token):
        return False
    word = token[1:]
    if len(word) < 3 or not word.isalpha():
        return False
    others = tokens[:index] + tokens[index + 1 :]
    if any(_is_flag(t) or _is_code(t) for t in others):
        return False
    return not any(t.lower() in _COMMANDS for t in tokens[:index])


def _is_code(token: str) -> bool:
    core = token.strip("?!,;:()[]{}<>'\"`")
    if _is_flag(core):
        return True
    inner = core.rstrip(".")
    if re.search(r"[^\W_][_./:\\=@#$%+~-]+[^\W_]", inner) or "::" in inner:
        return True
    return bool(_CAMEL_RE.search(inner)) or bool(re.search(r"[A-Za-z]\d|\d[A-Za-z]", inner))


def _command_phrase(run: list[tuple[list[str], bool]]) -> list[str]:
    """The words of a command-line run up to its last flag or code word."""
    last = max((i for i, (_parts, code) in enumerate(run) if code), default=-1)
    if last < 1:
        return []
    return [part for parts, _code in run[: last + 1] for part in parts]


def parse_query(raw: str) -> Query:
    """Parse what a person or an agent typed; never raises."""
    query = Query(raw=raw)
    tokens: list[tuple[str, bool, bool]] = []  # text, quoted, negated-by-dash
    for match in _TOKEN_RE.finditer(raw):
        if match.group(2) is not None:
            tokens.append((match.group(2), True, bool(match.group(1))))
        else:
            tokens.append((match.group(3), False, False))
    plain = [text for text, quoted, _neg in tokens if not quoted]
    seen: set[tuple[tuple[str, ...], bool]] = set()
    run: list[tuple[list[str], bool]] = []  # the current run of command-line tokens: parts, is_code
    best: list[str] = []
    negate_next = False
    plain_index = -1
    for text, quoted, dash_negated in tokens:
        if not quoted:
            plain_index += 1
        if not quoted and text == "NOT":
            negate_next = True
            continue
        negate = negate_next or dash_negated
        negate_next = False
        dash_word = not quoted and not negate and _is_exclusion(text, plain_index, plain)
        if dash_word:
            negate, text = True, text[1:]
        prefix = not quoted and text.endswith("*")
        code = not quoted and _is_code(text)
        parts = _parts(text)
        # a run of command-line tokens: a program, its words and flags (`pip install --no-deps`)
        bare = text.strip("`'\"")
        if not quoted and not negate and parts and (run or bare.lower() in _COMMANDS or _is_flag(bare)):
            run.append((parts, code))
            if run[0][0][0] in _COMMANDS or any(_is_flag(t) for t in plain):
                best = max(best, _command_phrase(run), key=len)
        else:
            run = []
        if not parts:
            continue
        if negate:
            term = Term(tuple(parts), prefix=prefix, quoted=quoted)
            query.excluded.append(term)
            if dash_word:
                query.dash_excluded.append(term)
            continue
        if not quoted and not code and not prefix and len(parts) == 1:
            word = parts[0]
            if word in STOPWORDS or (len(word) < 2 and not word.isdigit()):
                if len(word) >= 2 and all(t.parts != (word,) for t in query.function_terms):
                    query.function_terms.append(Term((word,)))
                continue
        key = (tuple(parts), prefix)
        if key in seen:
            continue
        seen.add(key)
        if code and not prefix:
            query.terms.append(_code_term(text, parts))
        else:
            same = SAME_AS.get(" ".join(parts), ()) if not quoted and not prefix else ()
            query.terms.append(Term(tuple(parts), prefix=prefix, quoted=quoted, code=code, variants=same))
    if not query.terms and not query.excluded:
        # only stop words ("how to"): search for them rather than for nothing
        query.function_terms = []
        query.only_stop_words = True
        for text, quoted, _neg in tokens:
            parts = _parts(text)
            if parts and (tuple(parts), False) not in seen:
                seen.add((tuple(parts), False))
                query.terms.append(Term(tuple(parts), quoted=quoted))
    _add_spelled_out(query, tokens, seen)
    if len(best) >= 2:
        query.command = Term(tuple(best), code=True)
    query.terms = query.terms[:MAX_TERMS]
    query.function_terms = query.function_terms[:MAX_TERMS]
    return query


def _add_spelled_out(
    query: Query, tokens: list[tuple[str, bool, bool]], seen: set[tuple[tuple[str, ...], bool]]
) -> None:
    """Words in a row that are the long form of a short one ("merge request", "load balancer"):
    one more term, their phrase, that also finds the short form, as `mr` finds "merge request"."""
    words: list[list[str]] = []
    for i, (text, quoted, negated) in enumerate(tokens):
        excluded = negated or text.startswith("-") or (i > 0 and tokens[i - 1][0] == "NOT")
        words.append([] if quoted or excluded or text == "NOT" else _parts(text))
    for size in (2, 3):
        for start in range(len(words) - size + 1):
            run = words[start : start + size]
            if any(len(parts) != 1 for parts in run):
                continue
            form = tuple(parts[0] for parts in run)
            variants = SAME_AS.get(" ".join(form))
            if variants and (form, False) not in seen:
                seen.add((form, False))
                query.terms.append(Term(form, variants=variants, joined=True))


def split_camel(word: str) -> list[str]:
    """`ConfigLoader` -> ['config', 'loader'] (empty when there is nothing to split)."""
    parts = re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+", word)
    return [p.lower() for p in parts] if len(parts) > 1 else []
