"""SessionStart injection and UserPromptSubmit recall against a real store and index."""

from __future__ import annotations

import datetime as dt
import subprocess
from pathlib import Path

import pytest

from anamnesis.agents.inject import MAX_BUDGET, Item, allocate, build_context
from anamnesis.agents.recall import build_recall, remember_shown
from anamnesis.agents.transcript import MEMORY_CLOSE, MEMORY_OPEN
from anamnesis.base.notes import Note, note_relpath
from anamnesis.base.paths import Store
from anamnesis.base.settings import load_settings, save_settings
from anamnesis.base.text import trim
from anamnesis.search.index import open_index
from anamnesis.store.operations import create_note, save_note

PROJECT = "github.com/acme/orders"


def _checkout(tmp_path: Path, branch: str = "main") -> Path:
    repo = tmp_path / "orders"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", "-b", branch, str(repo)], check=True)
    subprocess.run(
        ["git", "-C", str(repo), "remote", "add", "origin", "https://github.com/acme/orders.git"], check=True
    )
    return repo


def _note(
    store: Store, kind: str, title: str, body: str, project: str | None, days_old: float = 0, **extra: object
) -> Note:
    """A note saved with an `updated` time in the past (as if written days ago)."""
    when = dt.datetime.now(dt.UTC) - dt.timedelta(days=days_old)
    stamp = when.replace(microsecond=0).isoformat().replace("+00:00", "Z")
    from anamnesis.base.notes import new_id

    note_id = new_id()
    note = Note(
        path=note_relpath(kind, title, note_id, project),
        id=note_id,
        type=kind,
        title=title,
        body=body,
        project=project if kind != "preference" else None,
        created=stamp,
        updated=stamp,
        extra=dict(extra),
    )
    return save_note(store, note, commit=False)


def test_empty_store_injects_nothing(store: Store, tmp_path: Path) -> None:
    assert build_context(store, _checkout(tmp_path)) == ("", [])


def test_sections_in_order(store: Store, tmp_path: Path) -> None:
    repo = _checkout(tmp_path)
    _note(store, "preference", "Answer in British English", "Use British spelling everywhere.", None)
    _note(store, "semantic", "Orders use pg_bouncer", "Transaction mode, pool 20.", PROJECT)
    _note(store, "procedural", "Deploy orders", "Run make deploy ENV=staging first.", PROJECT)
    _note(
        store,
        "episodic",
        "Fixed the pool timeout",
        "## Ask\nfix it\n## Outcome\ndone",
        PROJECT,
        files=["src/pool.py"],
    )
    _note(store, "semantic", "Billing uses Kafka", "Unrelated project.", "github.com/acme/billing")
    text, shown = build_context(store, repo)
    assert text.startswith(MEMORY_OPEN) and text.rstrip().endswith(MEMORY_CLOSE)
    assert f"project `{PROJECT}`" in text and "branch `main`" in text
    prefs = text.index("## Your preferences")
    proj = text.index("## Notes for this project")
    sess = text.index("## Recent sessions")
    assert (
        prefs < text.index("British spelling") < proj < text.index("pg_bouncer") < sess < text.index("fix it")
    )
    assert "Billing uses Kafka" not in text
    assert len(shown) == 4
    assert "⚠" not in text


def test_relevance_beats_recency(store: Store, tmp_path: Path) -> None:
    """An older note about the current branch and recent files outranks newer unrelated ones."""
    repo = _checkout(tmp_path, branch="feature/refund-webhook")
    for i in range(15):
        _note(
            store,
            "semantic",
            f"Generic fact number {i}",
            f"Something about logging level {i}.",
            PROJECT,
            days_old=1,
        )
    _note(
        store,
        "semantic",
        "Refund webhook signature check",
        "Verify the HMAC of refund webhooks.",
        PROJECT,
        days_old=60,
    )
    _note(
        store,
        "semantic",
        "Ledger reconciliation",
        "The reconcile_ledger job runs nightly.",
        PROJECT,
        days_old=90,
    )
    _note(
        store, "episodic", "Worked on the ledger", "touched it", PROJECT, files=["jobs/reconcile_ledger.py"]
    )
    text, _shown = build_context(store, repo)
    project_part = text[text.index("## Notes for this project") : text.index("## Recent sessions")]
    titles = [line for line in project_part.splitlines() if line.startswith("### ")]
    assert "Refund webhook signature check" in titles[0] or "Refund webhook signature check" in titles[1]
    assert any("Ledger reconciliation" in t for t in titles[:2])
    assert len(titles) == 10  # the cap; the rest are the most recent generic ones


def test_recency_orders_equally_relevant_notes(store: Store, tmp_path: Path) -> None:
    repo = _checkout(tmp_path)
    _note(store, "semantic", "Old fact", "old", PROJECT, days_old=200)
    _note(store, "semantic", "New fact", "new", PROJECT, days_old=0)
    text, _ = build_context(store, repo)
    assert text.index("New fact") < text.index("Old fact")


def test_budget_trims_bodies_instead_of_dropping_notes(store: Store, tmp_path: Path) -> None:
    repo = _checkout(tmp_path)
    for i in range(5):
        _note(store, "preference", f"Rule {i}", ("Rule text. " * 300), None)
    for i in range(8):
        _note(store, "semantic", f"Long fact {i}", ("Fact text about orders. " * 400), PROJECT)
    for i in range(3):
        _note(store, "episodic", f"Session {i}", ("## Ask\n" + "Session text. " * 400), PROJECT)
    text, shown = build_context(store, repo)
    assert len(text) <= 6000
    assert len(shown) == 16  # every note kept, each trimmed
    assert text.count(" …") >= 16
    big, big_shown = build_context(store, repo, budget=9000)
    assert 6000 < len(big) <= 9000 and len(big_shown) == 16


def test_budget_is_configurable_and_capped(store: Store, tmp_path: Path) -> None:
    repo = _checkout(tmp_path)
    for i in range(30):
        _note(store, "semantic", f"Fact {i}", "Orders fact. " * 500, PROJECT)
    settings = load_settings(store)
    settings["inject_budget"] = 3000
    save_settings(store, settings)
    assert len(build_context(store, repo)[0]) <= 3000
    settings["inject_budget"] = 50_000
    save_settings(store, settings)
    text, _ = build_context(store, repo)
    assert 9000 < len(text) <= MAX_BUDGET


def test_many_preferences_cannot_overflow(store: Store, tmp_path: Path) -> None:
    repo = _checkout(tmp_path)
    for i in range(40):
        _note(
            store, "preference", f"A rather long preference title number {i} " + "x" * 150, "y" * 3000, None
        )
    text, shown = build_context(store, repo, budget=2000)
    assert len(text) <= 2000
    assert 0 < len(shown) < 40


def test_conflict_warning_last(store: Store, tmp_path: Path) -> None:
    repo = _checkout(tmp_path)
    _note(store, "semantic", "Fine fact", "fine", PROJECT)
    mine = _note(store, "procedural", "Deploy checklist", "top\nmiddle\nbottom\n", PROJECT)
    text = (store.memory / mine.path).read_text().replace(
        "middle\n", "<<<<<<< desk\nmiddle a\n======= lap\nmiddle b\n=======\nmiddle c\n>>>>>>> srv\n"
    )
    (store.memory / mine.path).write_text(text)
    bad = store.memory / "projects" / "x" / "facts" / "clash-aaaaaaaaaa.md"
    bad.parent.mkdir(parents=True)
    bad.write_text(
        "---\ntitle: Clash\ntype: semantic\nproject: x\n---\n<<<<<<< HEAD\nmine\n=======\ntheirs\n>>>>>>> peer\n"
    )
    with open_index(store) as index:
        index.refresh()
    text, _ = build_context(store, repo)
    warning = text.index("⚠ 1 note of this project is in a sync conflict")
    assert warning > text.index("Fine fact")  # after the notes, where it is read last
    said = text[warning:]
    # This project's note by title, id and versions, and how the user resolves it.
    assert f"“Deploy checklist” (id `{mine.id}`" in said and "all 3 versions kept: desk, lap, srv" in said
    assert "`anamnesis resolve ID --keep MACHINE`" in said
    # Another project's note is only counted.
    assert "1 note of other projects is in a sync conflict too" in said and "clash" not in said
    small, _ = build_context(store, repo, budget=800)
    assert len(small) <= 800 and "in a sync conflict" in small


def test_trim_and_allocate() -> None:
    assert trim("short", 100) == "short"
    cut = trim("word " * 100, 50)
    assert len(cut) <= 50 and cut.endswith(" …")
    items = [Item("a", "### a", "x" * 10), Item("b", "### b", "y" * 5000), Item("c", "### c", "z" * 5000)]
    kept = allocate(items, 1000)
    assert [i.path for i in kept] == ["a", "b", "c"]
    assert kept[0].shown == 10  # short notes whole
    assert abs(kept[1].shown - kept[2].shown) <= 1  # long ones share fairly
    assert sum(len(i.render()) for i in kept) <= 1000


# -- recall ----------------------------------------------------------------------------


def test_recall_finds_a_matching_note(store: Store) -> None:
    note = create_note(
        store,
        type="procedural",
        title="Rotate the pg_bouncer credentials",
        body="Run scripts/rotate.sh then restart pgbouncer.",
        project=PROJECT,
    )
    text, shown = build_recall(store, "how do I rotate the pg_bouncer credentials again?", session_id="s1")
    assert shown == [note.path]
    assert text.startswith(MEMORY_OPEN) and f"`{note.path}`" in text and "scripts/rotate.sh" in text
    assert len(text) <= 2000


def test_recall_prints_nothing_without_a_good_match(store: Store) -> None:
    create_note(store, type="semantic", title="Kafka retention", body="Seven days.", project=PROJECT)
    assert build_recall(store, "please rename this variable to something clearer", session_id="s") == ("", [])
    assert build_recall(store, "/compact", session_id="s") == ("", [])
    assert build_recall(store, "ok", session_id="s") == ("", [])


def test_recall_skips_notes_already_shown(store: Store) -> None:
    note = create_note(
        store, type="semantic", title="Kafka retention policy", body="Seven days.", project=PROJECT
    )
    remember_shown(store, "s2", [note.path], replace=True)
    assert build_recall(store, "what is the kafka retention policy?", session_id="s2") == ("", [])
    assert build_recall(store, "what is the kafka retention policy?", session_id="other")[1] == [note.path]


def test_recall_budget_and_count(store: Store) -> None:
    for i in range(6):
        create_note(
            store,
            type="semantic",
            title=f"Kafka consumer lag note {i}",
            body="kafka consumer lag " * 300,
            project=PROJECT,
        )
    text, shown = build_recall(store, "why is the kafka consumer lag growing", session_id="s3")
    assert len(shown) == 3 and len(text) <= 2000


def test_recall_can_be_turned_off(store: Store) -> None:
    create_note(store, type="semantic", title="Kafka retention policy", body="Seven days.", project=PROJECT)
    settings = load_settings(store)
    settings["recall"]["enabled"] = False
    save_settings(store, settings)
    assert build_recall(store, "what is the kafka retention policy?") == ("", [])


@pytest.mark.parametrize(
    ("prompt", "finds"),
    [
        ("", False),
        ("   ", False),
        ("a" * 100_000, False),
        ('"unbalanced (( AND OR NOT * -', False),
        ("NEAR(x y) ^ : ;", False),
        ('"kafka retention (( AND OR NOT * - policy?', True),
        ("NEAR(kafka retention) ^ : policy;", True),
    ],
)
def test_recall_survives_odd_prompts(store: Store, prompt: str, finds: bool) -> None:
    """Search syntax in a prompt is read as words: no error, and the words still recall their note."""
    note = create_note(store, type="semantic", title="Kafka retention policy", body="Seven days.", project=PROJECT)
    text, shown = build_recall(store, prompt, session_id="odd")
    if finds:
        assert shown == [note.path] and "Kafka retention policy" in text
    else:
        assert (text, shown) == ("", [])


def test_recall_prefers_this_project_over_other_projects_deploy_notes(store: Store, tmp_path: Path) -> None:
    repo = _checkout(tmp_path)
    here = create_note(
        store, type="procedural", title="Deploying orders", body="make deploy ENV=prod, then watch the canary.", project=PROJECT
    )
    for other in ("github.com/acme/web", "github.com/acme/billing", "github.com/acme/infra"):
        create_note(
            store, type="procedural", title="Deploying to production", body="Deploy with make deploy to production.", project=other
        )
    _text, shown = build_recall(store, "how do I deploy this to production?", session_id="d1", cwd=str(repo))
    assert shown == [here.path]
    remember_shown(store, "d1", shown)  # as the hook does
    assert build_recall(store, "how do I deploy this to production?", session_id="d1", cwd=str(repo)) == ("", [])


def test_recall_shows_another_projects_note_only_when_clearly_better(store: Store, tmp_path: Path) -> None:
    repo = _checkout(tmp_path)
    create_note(store, type="semantic", title="Kafka basics", body="We run kafka.", project=PROJECT)
    elsewhere = create_note(
        store,
        type="procedural",
        title="Kafka consumer lag alert tuning",
        body="The kafka consumer lag alert fires at 10k messages; tune it in alerts/kafka.yaml.",
        project="github.com/acme/infra",
    )
    _text, shown = build_recall(store, "tune the kafka consumer lag alert threshold", session_id="d2", cwd=str(repo))
    assert elsewhere.path in shown


def test_recall_from_a_project_the_memory_holds_nothing_of_weighs_every_project_alike(
    store: Store, tmp_path: Path
) -> None:
    """With no note of its own, a project has no answer to prefer: other projects' notes that bear
    on the prompt are shown as they would be outside any project, not one at most."""
    backups = create_note(
        store,
        type="procedural",
        title="ClickHouse backups with clickhouse-backup",
        body="Nightly clickhouse-backup to the object store, kept 30 days.",
        project="github.com/acme/ingest",
    )
    velero = create_note(
        store,
        type="procedural",
        title="Velero: cluster backups and restores",
        body="Velero backs up every cluster namespace nightly.",
        project="github.com/acme/platform",
    )
    prompt = "what backups exist for the clusters and for clickhouse"
    _text, shown = build_recall(store, prompt, session_id="n1", cwd=str(_checkout(tmp_path)))
    assert set(shown) == {backups.path, velero.path}

    # Once the project holds a note, it is this project's answer that counts again.
    create_note(store, type="semantic", title="Orders stack", body="Orders runs on Postgres.", project=PROJECT)
    _text, shown = build_recall(store, prompt, session_id="n2", cwd=str(tmp_path / "orders"))
    assert len(shown) <= 1


def test_recall_answers_a_short_code_word_and_ignores_an_everyday_word_in_passing(store: Store) -> None:
    """A code word names one thing, even alone and only in a note's body; one everyday word of a
    prompt met in passing is a coincidence ('what is 17 times 23' and a note that retries 3 times)."""
    flags = create_note(
        store,
        type="procedural",
        title="Feature flags in the web app",
        body="Read a flag with the useFlag hook; defaults live in flags.ts.",
        project=PROJECT,
    )
    create_note(
        store,
        type="semantic",
        title="Webhook delivery",
        body="A failed webhook is retried 3 times.",
        project=PROJECT,
    )
    assert build_recall(store, "useFlag", session_id="c1")[1] == [flags.path]
    assert build_recall(store, "what is 17 times 23", session_id="c2") == ("", [])


def test_recall_weighs_a_prompts_rare_words_over_words_every_note_holds(store: Store) -> None:
    """In a memory where every note is about kafka, 'kafka' says nothing; the rare word decides."""
    for topic in ("retention", "partitions", "replication", "schema registry"):
        create_note(
            store, type="semantic", title=f"Kafka {topic}", body=f"Kafka {topic} notes.", project=PROJECT
        )
    acls = create_note(
        store,
        type="procedural",
        title="Kafka ACLs",
        body="Kafka ACLs are granted with the acl script.",
        project=PROJECT,
    )
    _text, shown = build_recall(store, "how do we grant kafka acls to a new service?", session_id="r1")
    assert shown == [acls.path]


def test_keyword_recall_reads_past_the_padding_of_a_long_question(store: Store) -> None:
    """'actually', 'since yesterday', 'usually': in a small memory, the one note that happens to
    use such words made each weigh like a tool's name, and a question padded with them was
    answered with that note instead of the one about its subject."""
    answer = create_note(
        store,
        type="procedural",
        title="Pin a workload to x86 nodes",
        body="Graviton nodes are arm64: a pod with a native x86 dependency needs a nodeSelector on amd64.",
        project=PROJECT,
    )
    create_note(
        store,
        type="episodic",
        title="Session: retro notes",
        body="We actually usually merge since yesterday, and I wonder whether it helped.",
        project=PROJECT,
    )
    for topic in ("retention", "partitions", "replication", "billing", "alerts", "dashboards"):
        create_note(store, type="semantic", title=f"Kafka {topic}", body=f"Kafka {topic} notes.", project=PROJECT)
    prompt = "since yesterday I actually wonder whether my pod usually lands on graviton nodes"
    assert build_recall(store, prompt, session_id="p1")[1] == [answer.path]  # not the retro's padding
    # padding alone is still no question: a prompt of everyday words stays silent
    assert build_recall(store, "I actually wonder whether it usually happens since yesterday", session_id="p2") == (
        "",
        [],
    )


def test_keyword_recall_finds_the_note_a_long_chatty_prompt_names_in_passing(store: Store) -> None:
    """Words no note holds ('marketing', 'agency', 'reasoning') cannot tell notes apart; each
    weighed an average word, so a long prompt buried the one word that names its note."""
    answer = create_note(
        store,
        type="semantic",
        title="Product search is Postgres full-text with unaccent, not Elasticsearch",
        body="Catalog search runs on Postgres tsvector with unaccent and pg_trgm; no extra cluster to run.",
        project=PROJECT,
    )
    for topic in ("refunds", "invoices", "coupons", "shipping", "taxes", "webhooks"):
        create_note(store, type="semantic", title=f"Shop {topic}", body=f"How the shop handles {topic}.", project=PROJECT)
    prompt = (
        "the marketing people want better results on the catalog page, and they keep asking why we "
        "didn't go with elasticsearch like their last agency did. remind me what the reasoning was"
    )
    assert build_recall(store, prompt, session_id="l1")[1] == [answer.path]
    # words that name nothing here still never answer alone
    assert build_recall(store, "remind the marketing agency about their reasoning", session_id="l2") == ("", [])


def test_recall_keeps_quiet_on_small_talk_and_sums_even_when_a_title_holds_the_word(store: Store) -> None:
    """'good morning!' is a greeting and '17 times 23' a sum, whichever note's title says 'this
    morning' or 'times': the word in a title must not make small talk an answer."""
    create_note(
        store,
        type="episodic",
        title="Why the api pods restarted this morning",
        body="OOMKilled after the memory limit was lowered.",
        project=PROJECT,
    )
    create_note(store, type="preference", title="Times in UTC", body="Write every timestamp in UTC.")
    create_note(store, type="semantic", title="UPS power-off order", body="NAS first, then the switch.")
    for prompt in ("good morning!", "what is 17 times 23", "what's 2 to the power of 10", "hello, thank you"):
        assert build_recall(store, prompt, session_id="t1") == ("", []), prompt
    # the same words still count inside a prompt that is about something
    _text, shown = build_recall(store, "why did the api pods restart this morning?", session_id="t2")
    assert len(shown) == 1


def test_recall_finds_a_code_word_spelt_in_camel_case_and_dotted(store: Store) -> None:
    """The prompt's words reach the search as typed: `kgo.CooperativeSticky` finds the note that
    calls `kgo.CooperativeStickyBalancer()` (lowercased first, it found nothing)."""
    kafka = create_note(
        store,
        type="semantic",
        title="Kafka client switched to franz-go",
        body="- `kgo.Balancers(kgo.CooperativeStickyBalancer())`: incremental rebalances on deploy",
        project=PROJECT,
    )
    create_note(store, type="semantic", title="Sticky sessions", body="The load balancer pins a cookie.", project=PROJECT)
    assert build_recall(store, "kgo.CooperativeSticky", session_id="k1")[1] == [kafka.path]


def test_keyword_recall_shows_the_note_a_code_word_of_the_prompt_names(store: Store) -> None:
    """A code word in a note's title names it: enough alone, however many other words the prompt
    has that no note holds ('test_settlement_cutoff is failing again but CI is green, any idea?')."""
    flaky = create_note(
        store,
        type="semantic",
        title="Flaky test_settlement_cutoff is a timezone bug",
        body="It fails between 00:00 and 02:00 local time: the cutoff uses a naive datetime.now().",
        project=PROJECT,
    )
    create_note(store, type="semantic", title="Release checklist", body="Tag, changelog, deploy.", project=PROJECT)
    prompt = "test_settlement_cutoff is failing again on my machine but CI is green, any idea?"
    assert build_recall(store, prompt, session_id="n1")[1] == [flaky.path]


def test_keyword_recall_reads_a_verbs_other_forms(store: Store) -> None:
    """'failing' finds 'fails' and 'stored' finds 'stores', but 'stored' is not 'story'."""
    from anamnesis.agents.recall import held

    assert held(["failing", "stored", "policy"], "the export fails; state stores; policies") == ["failing", "stored", "policy"]
    assert held(["stored"], "a story about it") == []
