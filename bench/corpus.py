"""A deterministic corpus of realistic notes for benchmarks (seeded, no network).

    python bench/corpus.py --home /tmp/bench-home --notes 10000 [--seed 7]

Notes are 150-600 words of engineering prose mixed with code words
(snake_case, dotted.names, CamelCase, file paths), spread over projects,
types and tags, written in the store's own format and committed.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from anamnesis.base.notes import NOTE_TYPES, Note, note_relpath, render_note

WORDS = (
    "the a service request cache database migration deploy rollback latency timeout retry queue worker "
    "schema index query connection pool thread lock config environment secret token session user account "
    "billing invoice payment webhook endpoint handler router middleware test fixture mock benchmark release "
    "branch commit review merge conflict build pipeline container image cluster node replica shard backup "
    "restore metric alert dashboard log trace span error exception panic crash memory leak cpu disk network "
    "dns certificate proxy gateway load balancer rate limit feature flag experiment rollout canary hotfix "
    "because when after before during while should must never always usually fixed broke changed added "
    "removed decided agreed learned noticed found measured improved slower faster simpler safer cleaner"
).split()
CODE_WORDS = (
    "parse_config load_settings pg_bouncer.pool_size src/app/main.py HttpClient RetryPolicy "
    "user_id order.total_amount tests/test_api.py ConnectionPool make_request get_or_create "
    "settings.DATABASE_URL docker-compose.yml api/v2/orders JsonEncoder cache.ttl_seconds "
    "worker.concurrency scripts/deploy.sh SessionManager validate_input redis.maxmemory "
    "k8s/deployment.yaml EventBus retry_with_backoff pkg/server/handler.go TokenBucket"
).split()
PROJECTS = [f"github.com/acme/{name}" for name in ("api", "web", "billing", "infra", "mobile", "search")] + [
    "gitlab.com/side/dotfiles",
    "github.com/oss/parser",
]
FUNCTION_WORDS = (
    "the a to of and in is for on that with it this we was be as at by not but when after".split()
)
SYLLABLES = "ka ri to ne sa mo lu pe vi da ro chi ten gar bel mon sta fi qua dor lin ex pro tra ver".split()


def _vocabulary() -> tuple[list[str], list[float]]:
    """A Zipf-distributed vocabulary: function words first, then domain words, then a long tail.

    Real prose is Zipfian: a handful of words are everywhere, most words are
    rare. A flat vocabulary would make every query match most notes.
    """
    rng = random.Random(11)
    content = [w for w in WORDS if w not in FUNCTION_WORDS]
    rng.shuffle(content)
    tail = sorted({"".join(rng.choices(SYLLABLES, k=rng.randint(2, 4))) for _ in range(4000)})
    rng.shuffle(tail)
    words = FUNCTION_WORDS + content[:40] + tail[:300] + content[40:] + tail[300:]
    cumulative, total = [], 0.0
    for rank in range(len(words)):
        total += 1.0 / (rank + 1.5) ** 1.05
        cumulative.append(total)
    return words, cumulative


VOCAB, VOCAB_CUM = _vocabulary()
VERBS = "get set load save parse build make fetch send read write sync check run start stop open close find".split()
NOUNS = "config user order token session cache queue event record index client server request file note".split()


def _code_vocabulary() -> tuple[list[str], list[float]]:
    """Identifiers, dotted names and paths, Zipf-distributed like the prose.

    A real store mentions a few identifiers often and thousands rarely; the
    hand-picked CODE_WORDS (what the benchmark queries for) are spread over
    the ranking (every 15th place), so queries range from common to rare.
    """
    rng = random.Random(13)
    made: set[str] = set()
    for verb in VERBS:
        for noun in NOUNS:
            made.add(f"{verb}_{noun}")
            made.add(f"{verb.capitalize()}{noun.capitalize()}")
            made.add(f"{noun}.{verb}_{rng.choice(NOUNS)}")
            made.add(f"src/{noun}/{verb}_{rng.choice(NOUNS)}.py")
    tail = sorted(made - set(CODE_WORDS))
    rng.shuffle(tail)
    words = []
    for rank, word in enumerate(CODE_WORDS):
        words.extend(tail[rank * 14 : rank * 14 + 14])
        words.append(word)
    words.extend(tail[len(CODE_WORDS) * 14 :])
    cumulative, total = [], 0.0
    for rank in range(len(words)):
        total += 1.0 / (rank + 3) ** 1.05
        cumulative.append(total)
    return words, cumulative


CODE_VOCAB, CODE_CUM = _code_vocabulary()
TAGS = (
    "postgres redis kafka auth perf ci deploy testing security frontend backend infra docs bug design".split()
)


def make_note(rng: random.Random, i: int) -> Note:
    """One reproducible note."""
    kind = rng.choices(NOTE_TYPES, weights=(5, 3, 4, 1))[0]
    project = None if kind == "preference" or rng.random() < 0.1 else rng.choice(PROJECTS)
    title_words = rng.sample(WORDS[:120], rng.randint(3, 7))
    if rng.random() < 0.4:
        title_words.append(rng.choices(CODE_VOCAB, cum_weights=CODE_CUM)[0])
    title = " ".join(title_words).capitalize()
    paragraphs = []
    remaining = rng.randint(150, 600)
    while remaining > 0:
        size = min(remaining, rng.randint(30, 90))
        words = rng.choices(VOCAB, cum_weights=VOCAB_CUM, k=size)
        for slot in range(size):
            if rng.random() < 0.02:
                words[slot] = rng.choices(CODE_VOCAB, cum_weights=CODE_CUM)[0]
        sentence = " ".join(words)
        paragraphs.append(sentence[0].upper() + sentence[1:] + ".")
        remaining -= size
    body = f"# {title}\n\n" + "\n\n".join(paragraphs) + "\n"
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(1_750_000_000 + i * 600 + rng.randint(0, 599)))
    return Note(
        path=note_relpath(kind, title, f"b{i:09d}", project),
        id=f"b{i:09d}",
        type=kind,
        title=title,
        body=body,
        project=project,
        tags=rng.sample(TAGS, rng.randint(0, 3)),
        created=stamp,
        updated=stamp,
        machine="bench",
        source="corpus",
    )


def generate(memory: Path, count: int, seed: int = 7, start: int = 0) -> list[str]:
    """Write `count` notes under `memory` (no git); return their relative paths."""
    rng = random.Random(seed * 1_000_003 + start)
    paths = []
    for i in range(start, start + count):
        note = make_note(rng, i)
        path = memory / note.path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(render_note(note), encoding="utf-8")
        paths.append(note.path)
    return paths


def build_store(home: Path, count: int, seed: int = 7) -> Path:
    """An initialised store at `home` holding `count` committed corpus notes."""
    from anamnesis.base.git import run_git
    from anamnesis.base.paths import open_store
    from anamnesis.store.operations import init_store

    store = open_store(home)
    init_store(store)
    if count:
        generate(store.memory, count, seed)
        run_git(store.memory, "add", "-A")
        run_git(store.memory, "commit", "-q", "-m", f"bench: {count} corpus notes")
    return home


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--home", type=Path, required=True)
    parser.add_argument("--notes", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    started = time.perf_counter()
    build_store(args.home, args.notes, args.seed)
    print(f"{args.notes} notes in {args.home} ({time.perf_counter() - started:.1f}s)")


if __name__ == "__main__":
    main()
