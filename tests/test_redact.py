"""Secret redaction: every kind of credential is masked; ordinary text is left alone."""

from __future__ import annotations

import pytest
from transcripts import SECRETS

from anamnesis.redact import count_redactions, redact


@pytest.mark.parametrize(("kind", "text", "secret"), SECRETS, ids=[s[0] for s in SECRETS])
def test_secret_is_redacted(kind: str, text: str, secret: str) -> None:
    out = redact(text)
    assert secret not in out, f"{kind} leaked: {out!r}"
    assert count_redactions(out) >= 1


@pytest.mark.parametrize(("kind", "text", "secret"), SECRETS, ids=[s[0] for s in SECRETS])
def test_secret_is_redacted_inside_prose(kind: str, text: str, secret: str) -> None:
    out = redact(f"Before that, I ran:\n\n    {text}\n\nand it worked; then `{text}` again.")
    assert secret not in out


def test_everything_at_once() -> None:
    blob = "\n".join(text for _k, text, _s in SECRETS)
    out = redact(blob)
    for kind, _text, secret in SECRETS:
        assert secret not in out, kind


@pytest.mark.parametrize(
    "text",
    [
        "Fix the connection pool timeout in the orders service",
        "max_tokens=1000 and author: Jane Doe",
        "password = os.environ['DB_PASSWORD']",
        "token_count: 12",
        "git commit 3f5e9a1c2b7d8e0f4a6b1c3d5e7f9a0b2c4d6e8f",
        "NODE_ENV=production",
        "PATH=/usr/local/bin:/usr/bin",
        "see https://docs.example.org/guide#section",
        "ssh://git@github.com/acme/api.git",
        "export PASSWORD=$DB_PASS",
        "git push -u origin main",
        "docker run -u 1000:1000 app",
        "mysql -u root -p shop",
        "ssh -p 2222 build.internal",
        "sort_key = lambda row: row[0]",
        'cache_key = f"user:{uid}"',
    ],
)
def test_ordinary_text_survives(text: str) -> None:
    assert redact(text) == text


def test_user_and_host_of_a_url_are_kept() -> None:
    out = redact("postgres://app:pw12345@db.internal:5432/app")
    assert out == "postgres://app:[REDACTED]@db.internal:5432/app"


def test_redaction_is_stable() -> None:
    blob = "\n".join(text for _k, text, _s in SECRETS)
    once = redact(blob)
    assert redact(once) == once


@pytest.mark.timeout(60)
@pytest.mark.parametrize("filler", ["a.", "-", "a.b-c_"])
def test_long_runs_of_name_characters_do_not_stall_redaction(filler: str) -> None:
    # Unbounded key-name runs made this quadratic: 40,000 characters of "a.a.a." took minutes,
    # long enough for Claude Code to kill the SessionEnd hook and lose the note.
    text = filler * (60_000 // len(filler)) + " password=Hunter2Hunter2 --token abcdef0123456789"
    out = redact(text)
    assert "Hunter2Hunter2" not in out and "abcdef0123456789" not in out
