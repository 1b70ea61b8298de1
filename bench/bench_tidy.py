"""How well `anamnesis tidy` finds what needs tidying, on a generated store with planted cases.

    python bench/bench_tidy.py                       # 2,000 notes, words only
    python bench/bench_tidy.py --semantic MODEL_DIR  # the same store, then with semantic search on

The store holds 2,000 notes: corpus notes (bench/corpus.py: engineering prose
over 7 projects, every type) and, planted among them (all in one project and
type per case, with their own dates):

- duplicates: a note and a later copy with one paragraph dropped, about one
  word in ten of another paragraph changed, a sentence added and one title
  word changed (expected: merge);
- replaced notes: a note and a later one with nearly the same title (a word
  added) and a new body that says the value changed (expected: supersede);
- stale sessions: a session note 90 days old with an outcome and decisions,
  and a fact note written a day later from its decisions and part of its
  outcome (expected: archive the session);

and, as decoys that must not be proposed: pairs of notes of one project and
type that share one paragraph and a few title words, the same session and
fact pairs but only 5 days old, and old sessions no fact took anything from.

Found: planted cases with a proposal of the right action for the right pair.
False: proposals that match no planted case. Then the plan is applied, and
applied again: the second time must change nothing (no commit).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from anamnesis.base.notes import Note, note_relpath, render_note
from bench.corpus import PROJECTS, VOCAB, VOCAB_CUM, make_note

DAY = 86_400


@dataclass
class Planted:
    """The planted cases: (action, id a, id b), and how many notes the store has."""

    cases: list[tuple[str, str, str]] = field(default_factory=list)
    notes: int = 0


def _stamp(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def _sentence(rng: random.Random, size: int) -> str:
    words = rng.choices(VOCAB, cum_weights=VOCAB_CUM, k=size)
    text = " ".join(words)
    return text[0].upper() + text[1:] + "."


def _paragraphs(body: str) -> list[str]:
    return [p for p in body.split("\n\n") if p.strip() and not p.startswith("# ")]


def _note(
    base: Note, *, note_id: str, title: str, body: str, kind: str, project: str | None, when: float
) -> Note:
    return Note(
        path=note_relpath(kind, title, note_id, project),
        id=note_id,
        type=kind,
        title=title,
        body=body,
        project=project,
        tags=list(base.tags),
        created=_stamp(when),
        updated=_stamp(when),
        machine="bench",
        source="bench",
    )


def build(memory: Path, total: int = 2000, per_kind: int = 60, seed: int = 7) -> Planted:
    """Write the store's notes under `memory` (no git) and return what was planted."""
    rng = random.Random(seed)
    now = time.time()
    planted = Planted()
    notes: list[Note] = []
    serial = 0

    def next_id(prefix: str) -> str:
        nonlocal serial
        serial += 1
        return f"{prefix}{serial:08d}"

    def base(kind: str) -> Note:
        note = make_note(rng, 100_000 + serial)
        note.type, note.project = kind, rng.choice(PROJECTS)
        return note

    for _ in range(per_kind):  # duplicates
        kind = rng.choice(("semantic", "procedural"))
        original = base(kind)
        when = now - rng.randint(20, 200) * DAY
        first = _note(
            original,
            note_id=next_id("d"),
            title=original.title,
            body=original.body,
            kind=kind,
            project=original.project,
            when=when,
        )
        paragraphs = _paragraphs(original.body)
        if len(paragraphs) > 2:
            paragraphs.pop(rng.randrange(len(paragraphs)))
        words = paragraphs[0].split()
        for slot in rng.sample(range(len(words)), max(1, len(words) // 10)):
            words[slot] = rng.choices(VOCAB, cum_weights=VOCAB_CUM)[0]
        paragraphs[0] = " ".join(words)
        paragraphs.append(_sentence(rng, 14))
        title_words = original.title.split()
        title_words[rng.randrange(len(title_words))] = rng.choice(VOCAB[40:200])
        title = " ".join(title_words).capitalize()
        second = _note(
            original,
            note_id=next_id("d"),
            title=title,
            body="\n\n".join(paragraphs) + "\n",
            kind=kind,
            project=original.project,
            when=when + rng.randint(1, 30) * DAY,
        )
        notes += [first, second]
        planted.cases.append(("merge", first.id, second.id))
    for _ in range(per_kind):  # replaced
        original = base("semantic")
        when = now - rng.randint(20, 200) * DAY
        key = rng.choice(("pool_size", "timeout_seconds", "replicas", "retry_limit", "batch_size"))
        old_value, new_value = rng.randint(2, 50), rng.randint(51, 200)
        old_body = original.body.rstrip() + f"\n\nCurrent value: `{key} = {old_value}`.\n"
        fresh = "\n\n".join(_sentence(rng, rng.randint(30, 70)) for _ in range(rng.randint(2, 4)))
        new_body = f"{fresh}\n\nCurrent value: `{key} = {new_value}` (it was {old_value}).\n"
        first = _note(
            original,
            note_id=next_id("r"),
            title=original.title,
            body=old_body,
            kind="semantic",
            project=original.project,
            when=when,
        )
        second = _note(
            original,
            note_id=next_id("r"),
            title=f"{original.title} now",
            body=new_body,
            kind="semantic",
            project=original.project,
            when=when + rng.randint(1, 30) * DAY,
        )
        notes += [first, second]
        planted.cases.append(("supersede", first.id, second.id))

    def session_and_fact(age_days: int, plant: bool) -> None:
        original = base("episodic")
        project = original.project
        when = now - age_days * DAY
        paragraphs = _paragraphs(original.body)
        outcome = paragraphs[0]
        decisions = [_sentence(rng, rng.randint(8, 16)) for _ in range(2)]
        body = (
            f"## Ask\n\n{_sentence(rng, 12)}\n\n## Outcome\n\n{outcome}\n\n## Decisions\n\n"
            + "".join(f"- {d}\n" for d in decisions)
            + "\n## Commands run\n\n- `make test`\n- `git push`\n\n## Session\n\n"
            + f"- project `{project}`\n"
        )
        session = _note(
            original,
            note_id=next_id("s"),
            title=_sentence(rng, 6)[:-1],
            body=body,
            kind="episodic",
            project=project,
            when=when,
        )
        kept = " ".join(outcome.split()[: rng.randint(20, 40)])
        fact = _note(
            original,
            note_id=next_id("f"),
            title=decisions[0][:60].rstrip(". "),
            kind="semantic",
            body="\n".join(decisions) + f"\n\n{kept}.\n",
            project=project,
            when=when + DAY,
        )
        notes.extend([session, fact])
        if plant:
            planted.cases.append(("archive", session.id, fact.id))

    for _ in range(per_kind):  # stale sessions
        session_and_fact(rng.randint(60, 200), plant=True)
    decoys = per_kind * 2 // 3
    for _ in range(decoys):  # recent sessions that live on in a fact: too young to archive
        session_and_fact(5, plant=False)
    for _ in range(decoys):  # near misses: one paragraph and a few title words in common
        kind = rng.choice(("semantic", "procedural"))
        one, two = base(kind), base(kind)
        shared = _paragraphs(one.body)[0]
        title = " ".join(one.title.split()[:2] + two.title.split()[2:]).capitalize()
        when = now - rng.randint(20, 200) * DAY
        notes.append(
            _note(
                one,
                note_id=next_id("n"),
                title=one.title,
                body=one.body,
                kind=kind,
                project=one.project,
                when=when,
            )
        )
        notes.append(
            _note(
                two,
                note_id=next_id("n"),
                title=title,
                body=two.body.rstrip() + f"\n\n{shared}\n",
                kind=kind,
                project=one.project,
                when=when + DAY,
            )
        )
    for _ in range(decoys):  # old sessions nothing took anything from
        original = base("episodic")
        notes.append(
            _note(
                original,
                note_id=next_id("o"),
                title=original.title,
                body=original.body,
                kind="episodic",
                project=original.project,
                when=now - rng.randint(60, 300) * DAY,
            )
        )
    i = 0
    while len(notes) < total:  # the rest: corpus notes
        notes.append(make_note(rng, i))
        i += 1
    for note in notes:
        path = memory / note.path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(render_note(note), encoding="utf-8")
    planted.notes = len(notes)
    return planted


def score(plan: dict, planted: Planted) -> dict[str, object]:  # type: ignore[type-arg]
    """Found, missed and false proposals of a plan against the planted cases."""
    expected = {(action, frozenset((a, b))) for action, a, b in planted.cases}
    got = {(p["action"], frozenset((p["keep"]["id"], p["other"]["id"]))) for p in plan["proposals"]}
    found = expected & got
    false = got - expected
    by_action = {
        action: f"{sum(1 for a, _ in found if a == action)}/{sum(1 for a, _ in expected if a == action)}"
        for action in ("merge", "supersede", "archive")
    }
    return {
        "planted": len(expected),
        "found": len(found),
        "found_share": round(len(found) / len(expected), 3),
        "proposals": len(got),
        "false": len(false),
        "false_share": round(len(false) / max(1, len(got)), 3),
        "by_action": by_action,
        "false_examples": [sorted(pair) for _action, pair in list(false)[:5]],
    }


def run(total: int, semantic: Path | None, seed: int) -> dict[str, object]:
    from anamnesis.app.tidy import apply_plan, plan_tidy, read_plan
    from anamnesis.base import repo
    from anamnesis.base.git import git_out
    from anamnesis.base.paths import open_store
    from anamnesis.search.index import open_index
    from anamnesis.store.operations import init_store

    report: dict[str, object] = {"notes": total}
    with tempfile.TemporaryDirectory(prefix="bench-tidy-") as tmp:
        store = open_store(Path(tmp) / "home")
        init_store(store)
        planted = build(store.memory, total, seed=seed)
        repo.commit_all(store, "bench: tidy corpus")
        with open_index(store) as index:
            index.refresh()
        modes: list[tuple[str, bool]] = [("words", False)]
        if semantic is not None:
            from anamnesis.search.semantic import enable_semantic as enable
            from anamnesis.search.semantic import update_vectors

            started = time.perf_counter()
            enable(store, semantic)
            update_vectors(store)
            report["embed_seconds"] = round(time.perf_counter() - started, 1)
            modes.append(("meaning", True))
        plans = {}
        for name, meaning in modes:
            started = time.perf_counter()
            plan = plan_tidy(store, meaning=meaning).to_dict()
            report[name] = {"seconds": round(time.perf_counter() - started, 2), **score(plan, planted)}
            plans[name] = plan
        last = plans[modes[-1][0]]
        proposals = read_plan(json.dumps(last))
        head = git_out(store.memory, "rev-parse", "HEAD")
        started = time.perf_counter()
        first = apply_plan(store, proposals)
        report["apply_seconds"] = round(time.perf_counter() - started, 1)
        report["applied"] = sum(1 for r in first if r.outcome == "applied")
        report["commits"] = int(git_out(store.memory, "rev-list", "--count", f"{head}..HEAD"))
        head = git_out(store.memory, "rev-parse", "HEAD")
        second = apply_plan(store, proposals)
        report["second_apply"] = {
            "outcomes": sorted({r.outcome for r in second}),
            "commits": int(git_out(store.memory, "rev-list", "--count", f"{head}..HEAD")),
        }
        again = plan_tidy(store, meaning=modes[-1][1]).to_dict()
        report["proposals_after_apply"] = len(again["proposals"])
    return report


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--notes", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--semantic", type=Path, help="a model folder: also run with semantic search on")
    args = parser.parse_args()
    print(json.dumps(run(args.notes, args.semantic, args.seed), indent=2))


if __name__ == "__main__":
    main()
