"""Secret redaction: every kind of credential is masked; ordinary text is left alone.

The corpus (tests/data/secrets) holds fake credentials of over a hundred kinds,
each in three lengths and many contexts, and look-alikes that must survive.
"""

from __future__ import annotations

import gc
import json
import time
from collections import defaultdict
from pathlib import Path

import pytest
from data.secrets import corpus
from transcripts import SECRETS, typical

from anamnesis.store.redaction import count_redactions, redact, redact_field, redact_note_fields

ROOT = Path(__file__).resolve().parents[2]
VARIANTS = corpus.secret_variants()
BY_KIND: dict[str, list[corpus.Variant]] = defaultdict(list)
for _variant in VARIANTS:
    BY_KIND[_variant.kind].append(_variant)
LOOKALIKES = corpus.lookalikes()


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
        "the net user base grows fast",
        "echo done | tee build.log",
        "echo 'hello world' | git hash-object --stdin",
        'echo "$SUDO_PASSWORD" | sudo -S systemctl restart nginx',
        "sudo -S reads the password from standard input",
        "cat <<EOF > notes.txt\nrestart the workers\nEOF",
        "expect \"yes/no\" { send \"yes\\r\" }",
        "arn:aws:secretsmanager:eu-west-1:123456789012:secret:prod/orders/db-AbC123",
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


# ---------------------------------------------------------------------------
# The corpus


def test_the_corpus_is_big_and_varied() -> None:
    assert len(BY_KIND) >= 40
    assert len(VARIANTS) >= 40 * 3 * 4
    fixed = {str(spec["kind"]) for spec in corpus.kinds() if spec.get("fixed_length")}
    for kind, variants in BY_KIND.items():
        lengths = {len(v.secret) for v in variants}
        assert len(lengths) >= 2 or kind in fixed, f"{kind}: one length only"
    assert len({v.secret for v in VARIANTS}) > len(VARIANTS) // 20


@pytest.mark.parametrize("kind", sorted(BY_KIND))
def test_every_variant_of_every_kind_is_redacted(kind: str) -> None:
    failures = []
    for variant in BY_KIND[kind]:
        for redactor in (redact, redact_field):
            out = redactor(variant.text)
            leaked = corpus.leaks(variant.secret, out)
            if leaked or count_redactions(out) < 1:
                failures.append(
                    f"{redactor.__name__} [{variant.context}] {variant.text[:80]!r} -> {out[:120]!r}"
                )
    assert not failures, f"{len(failures)} of {2 * len(BY_KIND[kind])} leaked:\n" + "\n".join(failures[:10])


def test_all_kinds_at_once_in_one_text() -> None:
    blob = "\n\n".join(v.text for v in VARIANTS[::3])
    out = redact(blob)
    leaked = {v.kind for v in VARIANTS[::3] if corpus.leaks(v.secret, out)}
    assert not leaked


@pytest.mark.parametrize("lookalike", LOOKALIKES, ids=[f"{x.name}-{i % 3}" for i, x in enumerate(LOOKALIKES)])
def test_lookalikes_survive(lookalike: corpus.Lookalike) -> None:
    assert redact(lookalike.text) == lookalike.text
    if lookalike.fields:
        assert redact_field(lookalike.text) == lookalike.text


def test_corpus_redaction_is_stable() -> None:
    for variant in VARIANTS[::7]:
        once = redact(variant.text)
        assert redact(once) == once, variant.kind
        field = redact_field(variant.text)
        assert redact_field(field) == field, variant.kind


# ---------------------------------------------------------------------------
# Precision: how often ordinary text is redacted


def _ordinary_texts() -> dict[str, str]:
    texts = {"tests/data/secrets/ordinary.md": corpus.ordinary_text()}
    for path in [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]:
        texts[str(path.relative_to(ROOT))] = path.read_text(encoding="utf-8")
    for path in sorted((ROOT / "anamnesis").rglob("*.py")):
        if path.name != "redaction.py":  # its comments spell out credential shapes on purpose
            texts[str(path.relative_to(ROOT))] = path.read_text(encoding="utf-8")
    session = typical()
    session.prompt("Now rotate the API keys and check the token refresh path")
    session.bash("git log --oneline -3 && kubectl get pods -n orders", "3 pods Running")
    texts["transcripts.typical"] = session.text()
    return texts


def false_positives() -> tuple[int, int, list[str]]:
    """(redactions made, non-empty lines looked at, the lines) over ordinary text."""
    made, lines, where = 0, 0, []
    for name, text in _ordinary_texts().items():
        lines += sum(1 for line in text.splitlines() if line.strip())
        for before, after in zip(text.splitlines(), redact(text).splitlines(), strict=False):
            extra = count_redactions(after) - count_redactions(before)
            if extra > 0:
                made += extra
                where.append(f"{name}: {before.strip()[:100]}")
    return made, lines, where


def test_false_positive_rate_on_ordinary_text() -> None:
    made, lines, where = false_positives()
    rate = made / lines
    print(f"\nfalse positives: {made} redactions in {lines} lines of ordinary text ({rate:.3%})")
    print("\n".join(where))
    assert rate < 0.001, "\n".join(where)


# ---------------------------------------------------------------------------
# Derived fields


def test_note_fields_are_redacted_for_any_writer() -> None:
    token = "npm_" + "Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1Wx"
    title, body, tags = redact_note_fields(
        f"{token} for the release", f"publish with\n\n    {token}\n", ["release", token]
    )
    assert token not in title and title.startswith("[REDACTED:npm-token]")
    assert token not in body and "[REDACTED:npm-token]" in body
    assert tags == ["release", "redacted"]
    assert redact_note_fields(None, None) == (None, None, None)
    long_title, _b, _t = redact_note_fields(("x " * 120) + token, "b")
    assert long_title is not None and len(long_title) <= 200 and token not in long_title


def test_a_field_is_stricter_than_a_body() -> None:
    bare = "Zx81Kq0Wm3Np5Rt7Vy9Bc2Df"  # 24 random characters, no prefix, no secret word
    assert redact(f"rotate {bare} today") == f"rotate {bare} today"
    assert bare not in redact_field(f"rotate {bare} today")


def test_a_pem_body_without_its_begin_line_is_redacted() -> None:
    body = next(v for v in BY_KIND["bare-pem-body"] if v.context.startswith("1:"))
    out = redact(body.text)
    assert body.secret not in out and "$ echo done" in out and "[REDACTED:private-key]" in out


def test_base64_of_ordinary_text_survives_but_not_next_to_a_secret_word() -> None:
    blob = "VGhlIGRlcGxveSBmaW5pc2hlZCB3aXRob3V0IGVycm9ycw=="
    assert redact(f"echo {blob} | base64 -d") == f"echo {blob} | base64 -d"
    assert blob not in redact(f"the api key is {blob}")


# ---------------------------------------------------------------------------
# Linear time on big inputs

_FILLERS = [
    "a.", "-", "a.b-c_", "A", "aB3", "ab1/", "\n", " ", "=", "MII", "eyJa.", "sk-", "Q~",
    "-----BEGIN PRIVATE KEY-----\n", "PuTTY-User-Key-File-2: ", "Private-Lines: 3\n", "key ", "api key ",
    "token: ", "password=", "--password ", "x://a:", "://a@", "Authorization: ", "Bearer ", "cookie: a=",
    "AAAAAAAAAAAAAAAAAAAAAAAA", "0123456789:", "\"auth\": \"", "export A_TOKEN=", "mysql -p", "login a password ",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaAZDO", "Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MGFiY2RlZmdoaWprbG1ub3BxcnN0dXZ3eHl6\n",
    "echo 'a' | sudo -S ", "echo a ", "| passwd ", "sudo -S <<< 'a' ", "<<<", "chpasswd <<EOF\n", "passwd\n",
    "expect \"password:\" ", "send \"a\" ", "mongosh -p ", "sqlplus a/", "a:5432:b:c:d .pgpass ",
    "arn:aws:iam::123456789012:", "h1:", "data:image/png;base64,", "0x", "/nix/store/", "//", "$a",
]  # fmt: skip


def _redaction_seconds(filler: str, size: int) -> float:
    """CPU seconds this thread spends redacting `size` characters of `filler` followed by two secrets
    (thread time with the garbage collector off: other tests sharing the cores do not count)."""
    text = filler * (size // len(filler)) + " password=Hunter2Hunter2 --token abcdef0123456789"
    gc.disable()
    try:
        started = time.thread_time()
        out = redact_field(text)
        elapsed = time.thread_time() - started
    finally:
        gc.enable()
    assert "Hunter2Hunter2" not in out and "abcdef0123456789" not in out
    return elapsed


@pytest.mark.timeout(120)
@pytest.mark.parametrize("filler", _FILLERS)
def test_anything_is_redacted_in_linear_time(filler: str) -> None:
    # Eight times the text must cost about eight times as much, not sixty-four (quadratic): the ratio
    # catches a super-linear pattern at sizes that stay cheap, the absolute bound a slow linear one.
    # A busy machine can still slow one run down, so a big run over the bound gets a second try.
    redact_field(filler + " password=Hunter2Hunter2")  # warm-up, so the first timing is not inflated
    small = _redaction_seconds(filler, 25_000)
    bound = 24 * small + 0.01
    big = _redaction_seconds(filler, 200_000)
    if big >= bound:
        big = min(big, _redaction_seconds(filler, 200_000))
    assert big < bound, f"{small:.3f} s for 25 kB but {big:.3f} s for 200 kB of {filler!r}"
    assert big < 6, f"{big:.1f} s for 200 kB of {filler!r}"


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("open myapp://Zx81Kq0Wm3Np5Rt7Vy9Bc2Df/x in the title", "myapp://[REDACTED"),
        ("ls /nix/store/9q3rk7sk1n2yv5bqzlj2g4mgj8rcbv4c-openssl-3.0.9", "/nix/store/9q3rk7sk1n2yv5bqzlj2g4mgj8rcbv4c-"),
    ],
)
def test_a_title_with_a_redacted_part_stays_readable(text: str, kept: str) -> None:
    assert kept in redact_field(text)


def test_a_value_that_only_starts_like_a_variable_is_still_a_secret() -> None:
    assert redact("export DB_PASSWORD=$DB_PASS") == "export DB_PASSWORD=$DB_PASS"
    assert "x9(-a%k2" not in redact("SECRET_KEY = '$x9(-a%k2m=q7&w@4!hz0l_u+8c^r)d#3y5n*j6p1g-t'")


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("my password: DB_PASSWORD='Zq8wLmn3pX7k'", "Zq8wLmn3pX7k"),
        ('the password: SMTP_PASS="Zq8wLmn3pX7k"', "Zq8wLmn3pX7k"),
        ('token -> GH_TOKEN="Zq8wLmn3pX7k"', "Zq8wLmn3pX7k"),
        ("The staging DB password: DB_PASSWORD='correct horse battery staple'", "horse battery"),
        ("password = PGPASSWORD=Zq8wLmn3pX7k psql -h db", "Zq8wLmn3pX7k"),
    ],
)
def test_a_secret_word_followed_by_a_named_assignment_masks_that_names_value(text: str, secret: str) -> None:
    """The value after "password:" can be another assignment: its value is the secret, not its name."""
    masked = redact(text)
    assert secret not in masked and "[REDACTED]" in masked, masked


def test_an_aws_secret_key_beside_its_access_key_id_is_masked_slashes_and_all() -> None:
    """Its slashes cut it into pieces too short to look random on their own."""
    for text in (
        "AKIAIOSFODNN7EXAMPLE secret wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "id,secret\nAKIA4Q7XJ2M9ZP3LKQWE,Zq8wLmn3/pX7kR2s/Tb9vYc4Nd1Hf6Jg0Ke5Wa3U",
    ):
        masked = redact(text)
        assert "[REDACTED:aws-secret-key]" in masked and "/K7MDENG/" not in masked and "/pX7kR2s/" not in masked
    path = "src/components/SomethingVeryLongNamedHere/index.tsx"  # a path near a key id stays a path
    assert path in redact(f"see {path} and AKIA4Q7XJ2M9ZP3LKQWE")


# ---------------------------------------------------------------------------
# Values written other than `name = value`: each case got through before


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        # a name/value pair, a block's default, a call's argument
        ('variable "db_password" {\n  type    = string\n  default = "Vq7#mPz2kLw9"\n}', "Vq7#mPz2kLw9"),
        ("env:\n  - name: DB_PASSWORD\n    value: Vq7#mPz2kLw9", "Vq7#mPz2kLw9"),
        ('"environment": [{"name": "DB_PASSWORD", "value": "Vq7#mPz2kLw9"}]', "Vq7#mPz2kLw9"),
        ("define('DB_PASSWORD', 'Vq7#mPz2kLw9');", "Vq7#mPz2kLw9"),
        ('os.Setenv("DB_PASSWORD", "Vq7#mPz2kLw9")', "Vq7#mPz2kLw9"),
        ('conn.set_password("Vq7#mPz2kLw9")', "Vq7#mPz2kLw9"),
        ('ds.setPassword("Vq7#mPz2kLw9");', "Vq7#mPz2kLw9"),
        ("requests.get(url, auth=('admin', 'Vq7#mPz2kLw9'))", "Vq7#mPz2kLw9"),
        ("auth = HTTPBasicAuth('admin', 'Vq7#mPz2kLw9')", "Vq7#mPz2kLw9"),
        # camelCase and short names
        ('dbPass = "Kq8LmZ3xWp0RtYv7Bn2Cs5Dj"', "Kq8LmZ3xWp0RtYv7Bn2Cs5Dj"),
        ('db_pw = "Vq7#mPz2kLw9"', "Vq7#mPz2kLw9"),
        ("PW=Vq7#mPz2kLw9", "Vq7#mPz2kLw9"),
        ('db-pw: db_pw = "Vq7#mPz2kLw9"', "Vq7#mPz2kLw9"),
        ("my PAT is nvlztz6zjxd3qlvnyriix5nilvqa3leqfngs7upsrwdhcbkqf3mp", "nvlztz6zjxd3qlvnyriix5nil"),
        # after white space only, or after more words
        ("ALTER USER app WITH PASSWORD 'Vq7#mPz2kLw9';", "Vq7#mPz2kLw9"),
        ("log in as admin with password Vq7#mPz2kLw9", "Vq7#mPz2kLw9"),
        ("The password for the staging box is: Vq7#mPz2kLw9", "Vq7#mPz2kLw9"),
        ("set -gx DB_PASSWORD Vq7#mPz2kLw9", "Vq7#mPz2kLw9"),
        # YAML block scalars and tags
        ("password: |\n  Vq7#mPz2kLw9\n", "Vq7#mPz2kLw9"),
        ("db:\n  password: >-\n    Vq7#mPz2kLw9\n  host: db", "Vq7#mPz2kLw9"),
        ("password: !unsafe 'Vq7#mPz2kLw9'", "Vq7#mPz2kLw9"),
        # a secret split over lines
        ('"private_key": "Kq8LmZ3xWp0Rt"\n  + "Yv7Bn2Cs5Dj"', "Yv7Bn2Cs5Dj"),
        # markdown tables
        ("| name | value |\n|---|---|\n| DB_PASSWORD | Vq7#mPz2kLw9 |", "Vq7#mPz2kLw9"),
        ("| env | password |\n|---|---|\n| prod | Vq7#mPz2kLw9 |\n| staging | Hx4!nRt8Qa |", "Hx4!nRt8Qa"),
        # a Kubernetes Secret's data, whatever its keys are called
        (
            "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\ndata:\n"
            "  DATABASE_URL: cG9zdGdyZXM6Ly9hcHA6VnE3I21QejJrTHc5QGRiL2FwcA==\n",
            "cG9zdGdyZXM6Ly9hcHA6VnE3I21QejJrTHc5QGRiL2FwcA",
        ),
        # commands
        ("ssh-keygen -t ed25519 -N 'Vq7#mPz2kLw9' -f ~/.ssh/deploy", "Vq7#mPz2kLw9"),
        ("CREATE USER 'app'@'%' IDENTIFIED BY 'Vq7#mPz2kLw9';", "Vq7#mPz2kLw9"),
        ("net use Z: \\\\fs01\\share /user:ACME\\admin Vq7#mPz2kLw9", "Vq7#mPz2kLw9"),
        # any scheme in an Authorization header; Vault's older tokens; an OpenVPN static key
        (
            "curl -H 'Authorization: Splunk 03f91d80-f7be-4c39-a1a9-7c0de4f91904' https://splunk:8088/",
            "03f91d80-f7be-4c39-a1a9-7c0de4f91904",
        ),
        ("vault login s.rX5W25oL7tcLMg9awm8jQtdl", "rX5W25oL7tcLMg9awm8jQtdl"),
        (
            "-----BEGIN OpenVPN Static key V1-----\n"
            + "\n".join(f"{i:x}e1de30ca67dbeb4c29d9936dae96f9{i:x}" for i in range(16))
            + "\n-----END OpenVPN Static key V1-----",
            "9e1de30ca67dbeb4c29d9936dae96f99",
        ),
    ],
)
def test_a_value_written_other_than_name_equals_value_is_redacted(text: str, secret: str) -> None:
    for redactor in (redact, redact_field):
        out = redactor(text)
        assert secret not in out and count_redactions(out) >= 1, out
        assert redactor(out) == out


@pytest.mark.parametrize(
    "text",
    [
        "public key: age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p",
        "password: !vault |\n  $ANSIBLE_VAULT;1.1;AES256\n  62313365396662343061393464336163383764373764613633653634306231386433626436623361\n",
        "DbPassword:\n  password: !Ref DbPassword",
        "| setting | meaning |\n|---|---|\n| password | the database password |\n| token_ttl | 3600 |",
        "| env | password |\n|---|---|\n| prod | `$DB_PASSWORD` |\n| dev | none |",
        "env:\n  - name: DB_PASSWORD\n    valueFrom:\n      secretKeyRef:\n        name: db\n        key: password",
        'variable "db_password" {\n  type      = string\n  sensitive = true\n}',
        'get_secret("prod/orders/db")',
        'os.getenv("API_TOKEN", "")',
        'label = _("password", "Enter your password")',
        "update the password policy to require 14 characters",
        "switch the auth token to OAuth2, then set the key to SHA256withRSA",
        "add the token to the Authorization header and pin the key to v2.3.1",
        "Branches: main / release-2.3\nRatio: 16 / 9\nsee: docs / README.md",
        "the wifi key is in the drawer; wifi key rotation is monthly",
        "token: str = os.environ['TOKEN']\napi_key: str = get_key()\ntoken_count: int = 4096",
        "the token count was 4096 for that prompt",
        "token VARCHAR2(64) NOT NULL",
        "kind: ConfigMap\ndata:\n  LOG_LEVEL: debug\n  REGION: eu-west-1",
        "curl -H 'Authorization: Bearer $TOKEN' https://api.example.com",
    ],
)
def test_names_and_values_that_are_no_secret_survive(text: str) -> None:
    assert redact(text) == text


@pytest.mark.parametrize(
    "text",
    [
        "wrong one, the db password is actually Xy7!pQ2rT9-new since tuesday",
        "the staging password is now S3cretPass!9 after the rotation",
        "api key was just AKfj38fhW9dk3kdf9, I rotated it",
    ],
)
def test_a_value_said_after_is_now_or_is_actually_is_masked(text: str) -> None:
    """ "the password is actually X" is "the password is X" with a word between: masked the same way,
    and an ordinary word there ("the password is now rotated") is left alone like after a bare "is"."""
    secret = next(w for w in text.replace(",", " ").split() if any(c.isdigit() for c in w) and len(w) >= 8)
    assert secret not in redact(text)


@pytest.mark.parametrize(
    "text", ["the password is now rotated", "the token is now stored in vault", "the secret is actually fine"]
)
def test_an_ordinary_word_after_is_now_survives(text: str) -> None:
    assert redact(text) == text


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("the vault passphrase is: correct horse battery staple", "horse battery staple"),
        ('GPG passphrase "blue-elephant-dances-at-midnight"', "elephant-dances"),
        ("seed phrase: abandon ability able about above absent absorb abstract", "ability able about"),
        ("wpa passphrase is 'sunny day at the lake'", "sunny day"),
        ("log in with admin / ToN!UC6KwM1n", "ToN!UC6KwM1n"),
        ("Logged in as alice@example.com / Xyz123!. Then ran it", "Xyz123"),
        ("vault login token=s.mBimJcmXNqCgIsDRdLmIVb", "mBimJcmXNqCgIsDRdLmIVb"),  # letters only: not code
    ],
)
def test_passphrases_of_words_logins_in_prose_and_random_dotted_values_are_masked(text: str, secret: str) -> None:
    assert secret not in redact(text), redact(text)


@pytest.mark.parametrize(
    "text",
    [
        "the passphrase is stored in the vault",
        "passphrase: see 1Password",
        "sign in with GitHub / Google",
        "log in to the CI/CD dashboard",
        "token=self.accessToken",
        "key=window.XMLHttpRequest.prototype",
    ],
)
def test_prose_about_passphrases_and_logins_and_attribute_access_survive(text: str) -> None:
    assert redact(text) == text


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("PGPASSWORD=Zk9p2LqW7xQ psql -h wh.internal -U app", "PGPASSWORD=[REDACTED] psql -h wh.internal -U app"),
        ("RESTIC_PASSWORD='Zk9#p2LqW7' restic -r s3:bucket snapshots", "RESTIC_PASSWORD=[REDACTED] restic -r s3:bucket snapshots"),
        ("BW_SESSION=Zk9p2LqW7xQabcdefGHIJ bw get password x", "BW_SESSION=[REDACTED] bw get password x"),
        ("DB_PASSWORD=correct horse battery", "DB_PASSWORD=[REDACTED]"),  # an unquoted value of words, not a command
    ],
)
def test_a_command_run_with_a_secret_variable_set_keeps_the_command(text: str, kept: str) -> None:
    assert redact(text) == kept


@pytest.mark.parametrize(
    "text",
    [
        "smtp login fails with app password vtqzmxkplwrbhdye since yesterday",
        "set the smtp password to vtqz mxkp lwrb hdye",
    ],
)
def test_an_app_password_of_random_letters_near_its_word_is_masked(text: str) -> None:
    out = redact(text)
    assert "vtqz" not in out and "hdye" not in out and "[REDACTED]" in out, out


def test_words_beside_a_password_word_are_not_taken_for_one() -> None:
    for text in (
        "password reset flow uses bcrypt with cost 12 in auth/service.py",
        "the login page at /login uses the LoginForm2 component; passwords are hashed with argon2id",
        "set the password policy to require 14 characters, see RFC-8018 and troubleshooting notes",
    ):
        assert redact(text) == text


# A tester's probe (tests/data/secrets/probe.json): 209 fake secrets of kinds and phrasings beyond
# the corpus, pasted as developers paste them (tool configs, CLI flags, other languages, client
# constructors, aligned output), and 71 look-alikes. These still get through; each is left out
# on purpose (docs/claude-code.md, "What redaction does not catch").
PROBE = json.loads((ROOT / "tests" / "data" / "secrets" / "probe.json").read_text(encoding="utf-8"))
PROBE_KNOWN_LEAKS = frozenset(
    (
        "bundler-env",  # a lower-case user:token pair after a host's name
        "keycloak-bind-credential",  # a value inside a JSON array
        "postfix-sasl-passwd-app-pw",  # sasl_passwd's `[host]:port user:app-password`
        "gcp-sa-json-base64-decode",  # base64 of a JSON that holds a key
        "asana-pat-bare",
        "shadow-sha512",  # only the crypt salt remains
        "openvpn-auth-user-pass",  # a password alone on the line after the file's name
    )
)


def _probe_leaked(secret: str, out: str) -> bool:
    pieces = [secret[i : i + 8] for i in range(max(1, len(secret) - 7))]
    return secret in out or any(len(p) == 8 and not p.isalpha() and p in out for p in pieces)


def test_a_testers_probe_of_new_kinds_of_secrets_is_masked_and_its_look_alikes_kept() -> None:
    leaked = {case["kind"] for case in PROBE["secrets"] if _probe_leaked(case["secret"], redact(case["text"]))}
    assert leaked <= PROBE_KNOWN_LEAKS, sorted(leaked - PROBE_KNOWN_LEAKS)
    changed = [case["name"] for case in PROBE["ordinary"] if redact(case["text"]) != case["text"]]
    assert changed == []
    assert len(PROBE["secrets"]) - len(leaked) >= 202


# Passwords said in a sentence, in many languages, and other secrets given in prose (a tester's
# finding: each of these reached git).
STATED = [
    ("Пароль от базы: Kielbasa#Krakow24", "Kielbasa#Krakow24"),
    ("Пароль від сервера: Vyshnia_Sadok_2024!", "Vyshnia_Sadok_2024!"),
    ("パスワード: Sakura#Tokyo2024", "Sakura#Tokyo2024"),
    ("データベースの密码：Panda#Beijing2024", "Panda#Beijing2024"),
    ("비밀번호: Kimchi#Seoul2024", "Kimchi#Seoul2024"),
    ("la password è Girasole!Tramonto7", "Girasole!Tramonto7"),
    ("Heslo k serveru je Kocour*Mlyn93", "Kocour*Mlyn93"),
    ("sunucunun şifresi: Kartal#Deniz9921", "Kartal#Deniz9921"),
    ("a jelszó: AlmaFa_Kert_2023x", "AlmaFa_Kert_2023x"),
    ("Adgangskoden til routeren er Smorrebrod77!Kbh", "Smorrebrod77!Kbh"),
    ("Passordet er Fjord#Lys4242", "Fjord#Lys4242"),
    ("Mật khẩu là HoaSen_Ha-Noi88", "HoaSen_Ha-Noi88"),
    ("Kata sandi VPN: Rendang#Padang55x", "Rendang#Padang55x"),
    ("كلمة المرور هي Sahara#Nakhl4471", "Sahara#Nakhl4471"),
    ("הסיסמה היא Tapuz#Zahav8812", "Tapuz#Zahav8812"),
    ("ο κωδικός είναι Elia#Thalassa77", "Elia#Thalassa77"),
    ("Parola pentru server este Castel#Bran1999", "Castel#Bran1999"),
    ("echo 'deploy:Walrus-B64-Pw-91' | base64", "Walrus-B64-Pw-91"),
    ("printf 'deploy:Walrus-B64-Pw-91' | base64", "Walrus-B64-Pw-91"),
    ("Creds for the vendor portal: jane.doe@acme.io / Pel1can-Harbor#", "Pel1can-Harbor#"),
    ("the wifi is Acme-Guest with key tulip-orbit-ferry-2291", "tulip-orbit-ferry-2291"),
    ("Restore the test wallet from: abandon orbit tiger velvet crane mushroom lemon harbor sunset violin cabin ritual",
     "abandon orbit tiger velvet crane mushroom lemon harbor sunset violin cabin ritual"),
    ("X-Acme-Gate: agw1.7f3Kq9Lm2Zp8Rt5Vx0Yc", "agw1.7f3Kq9Lm2Zp8Rt5Vx0Yc"),
    ("Licence key for the build box: ACME-LIC-4F7Q-9ZK2-MX8R-T3VB-77PL", "4F7Q-9ZK2-MX8R"),
]  # fmt: skip
SAID_NOT_SECRET = [
    "password-protected service even on loopback: other local users",
    "the YAML tag stays: `password: !unsafe '…'`",
    "- **Password hashes**: crypt(3) and `.htpasswd` lines",
    "Пароль должен быть длиннее 12 символов",
    "seed: 42 for every run, so the test is reproducible",
    "the wallet screen shows the balance and the last five payments in a list",
    "X-Request-Id: 42",
    "License: MIT, see LICENSE-2024-11-27 in the repo",
    "the wifi in the office is slow since the key card readers were replaced",
    "la password è scaduta ieri, l'ho cambiata",
]


@pytest.mark.parametrize(("text", "secret"), STATED, ids=[t[:24] for t, _s in STATED])
def test_a_secret_stated_in_a_sentence_is_redacted(text: str, secret: str) -> None:
    assert secret not in redact(text), redact(text)


@pytest.mark.parametrize("text", SAID_NOT_SECRET)
def test_sentences_about_passwords_keys_and_seeds_survive(text: str) -> None:
    assert redact(text) == text


@pytest.mark.parametrize(
    "text",
    [
        "aws secret wJalrXUtnFEMI/K7MDENG/\n  bPx9fiC3Yk2QmZ7rT8vW",
        'TOKEN="k9Qz7XvB2mR4tW8pL1sD\\\n  6fH3jK5nP0qY"',
        "key = sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z\n  Qa8Ws2Ed4Rf6Tg8Yh0Uj\n  Zk3Xl5Cm7Vn9Bq1Wp3Er",
    ],
)
def test_the_rest_of_a_secret_wrapped_onto_the_next_lines_is_masked(text: str) -> None:
    masked = redact(text)
    for piece in ("bPx9fiC3Yk2QmZ7rT8vW", "6fH3jK5nP0qY", "Qa8Ws2Ed4Rf6Tg8Yh0Uj", "Zk3Xl5Cm7Vn9Bq1Wp3Er"):
        assert piece not in masked, masked


def test_a_line_of_words_after_a_masked_secret_stays() -> None:
    text = "export GITHUB_TOKEN=ghp_16C7e42F292c6912E7710c838347Ae178B4a\ndeploy_prod\nmake_release_notes"
    assert redact(text).endswith("\ndeploy_prod\nmake_release_notes")


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("Unseal Key 1: Ljo06+/qRkQyT5oBiAOk/kEmrewPaqSKrOcna/mSQrk=", "kEmrewPaqSKrOcna"),
        ("when sudo prompts, type k2m9*l#O-ZW~ and hit enter", "k2m9*l#O-ZW~"),
        ("if the keychain asks, enter Tq7#vLp2wz", "Tq7#vLp2wz"),
        ("Mein Passwort lautet copperpepper88!", "copperpepper88!"),
    ],
)
def test_a_secret_typed_at_a_prompt_or_cut_by_slashes_is_masked_whole(text: str, secret: str) -> None:
    assert secret not in redact(text) and "[REDACTED" in redact(text)


@pytest.mark.parametrize(
    "text",
    [
        "when the build asks, type yes and hit enter",
        "if the login prompts, enter your name",
        "see /usr/lib/x86_64-linux-gnu/libssl.so.3 and https://example.com/a/b/c",
    ],
)
def test_an_answer_at_a_prompt_that_is_no_password_stays(text: str) -> None:
    assert redact(text) == text


# A second tester's probe (written after the first was masked): passwords given by their place
# (a login call's argument, a CSV or INSERT column, Redis AUTH, a Wi-Fi QR code, smbclient, a DSN,
# a URL whose user is an e-mail address), and said without a colon in other languages.
PLACED_PASSWORDS = [
 ('server = smtplib.SMTP_SSL("smtp.gmail.com", 465)\nserver.login("alerts@acme.com", "Saturn@cobalt5091")', "Saturn@cobalt5091"),
 ("ftp = FTP('ftp.acme.com')\nftp.login('uploader', 'Orbit@rocket4985')", "Orbit@rocket4985"),
 ('$conn = new mysqli("localhost", "root", "Copper.cobalt3368", "shop");', "Copper.cobalt3368"),
 ("conn = pymysql.connect('10.0.0.8', 'report', 'Marble!copper7131', 'sales')", "Marble!copper7131"),
 ('Connection c = DriverManager.getConnection("jdbc:mysql://db:3306/app", "root", "iKCZ+r74huKj=R");', "iKCZ+r74huKj=R"),
 ('Connection c = DriverManager.getConnection(url, "root", "9#^*g36BoBohZk");', "9#^*g36BoBohZk"),
 ('client.get(url).basic_auth("admin", Some("Rocket#pepper4154")).send().await?;', "Rocket#pepper4154"),
 ('await client.LoginAsync("svc_sync", "Orbit.willow2793");', "Orbit.willow2793"),
 ("INSERT INTO users (email, password, role) VALUES ('admin@acme.com', 'Winter.willow3652', 'admin');", "Winter.willow3652"),
 ("username,password,last_login\njdoe,Falcon@marble4530,2024-04-30\nasmith,Cobalt_cactus6030,2024-04-29", "Falcon@marble4530"),
 ("username,password,last_login\njdoe,Falcon@marble4530,2024-04-30\nasmith,Cobalt_cactus6030,2024-04-29", "Cobalt_cactus6030"),
 ("user,pass\nroot,mRm7h4pgsX-&%_", "mRm7h4pgsX-&%_"),
 ("try Marble$raven6800 as the admin password, I set it yesterday", "Marble$raven6800"),
 ("127.0.0.1:6379> AUTH Summer_saturn9563\nOK\n127.0.0.1:6379> KEYS *", "Summer_saturn9563"),
 ("WIFI:T:WPA;S:AcmeGuest;P:Saturn!orbit3837;;", "Saturn!orbit3837"),
 ("net use Z: \\\\fs01\\finance UzmMO7k+YcJ*3m /user:CORP\\jdoe /persistent:no", "UzmMO7k+YcJ*3m"),
 ("smbclient //fs01/share -U 'CORP\\jdoe%=H5kMg#ybx254G' -c 'ls'", "=H5kMg#ybx254G"),
 ("EMAIL_URL=smtp+tls://postmaster@mg.acme.io:IBqpYVvCthG1QT6eN5@smtp.mailgun.org:587", "IBqpYVvCthG1QT6eN5"),
 ("MAIL_URL=smtp://noreply@acme.io:Winter_raven3815@smtp.office365.com:587", "Winter_raven3815"),
 ("lftp ftp://jdoe@acme.com:Nickel#tango7674@ftp.acme.com", "Nickel#tango7674"),
 ('db, err := sql.Open("mysql", "app:Harbor!summer6514@tcp(127.0.0.1:3306)/orders?parseTime=true")', "Harbor!summer6514"),
 ("spring.datasource.url=jdbc:oracle:thin:app/Nickel!harbor9913@//ora01:1521/ORCLPDB1", "Nickel!harbor9913"),
 ("Sunucunun şifresi 6eAtfp6H0OcG-x olarak ayarlandı", "6eAtfp6H0OcG-x"),
 ("数据库密码是NifiR!7p6L290@，请不要提交到仓库。", "NifiR!7p6L290@"),
 ("usuario root, clave Willow*falcon8940", "Willow*falcon8940"),
 ("логин admin, пароль — Orbit!willow7840", "Orbit!willow7840"),
 ("Мій пароль Nickel.lemon5117", "Nickel.lemon5117"),
 ("salasana on Orbit$ridge8243", "Orbit$ridge8243"),
 ("सर्वर का पासवर्ड Pepper#cactus7958 है", "Pepper#cactus7958"),
 ("รหัสผ่านคือ Lemon_marble8416", "Lemon_marble8416"),
 ("서버 비번 Maple.summer5205 이에요", "Maple.summer5205"),
 ("관리자 비밀번호는 7^NaymUweymCI0 입니다", "7^NaymUweymCI0"),
 ("Mật khẩu là &#e1eSmnM0hd*t", "&#e1eSmnM0hd*t"),
]
PLACED_LOOKALIKES = ["server.login(user, password)", "conn = pymysql.connect('10.0.0.8', 'report', 'reports', 'sales')", "name,version,license\nrequests,2.31.0,Apache-2.0",
        "username,password\njdoe,<set in vault>", "INSERT INTO users (email, password) VALUES ('a@b.io', crypt('x'))", "try pytest-xdist as the runner", "AUTH required", "ftp.login('anonymous', 'guest@example.com')",
        "connect('db.internal.example.com', 5432)", "DriverManager.getConnection(url, user, pass)", "the password is stored in the vault", "Пароль пользователя хранится в Vault"]


@pytest.mark.parametrize(("text", "secret"), PLACED_PASSWORDS)
def test_a_password_given_by_its_place_or_in_another_language_is_masked(text: str, secret: str) -> None:
    assert secret not in redact(text), redact(text)


@pytest.mark.parametrize("text", PLACED_LOOKALIKES)
def test_what_sits_in_a_passwords_place_but_is_none_stays(text: str) -> None:
    assert redact(text) == text


@pytest.mark.parametrize(
    "text",
    [
        "x-request-id: c4bbcc00-f590-4197-b1ac-78eb35c6c770",
        "X-Amzn-Trace-Id: Root=1-2ac371ba-ecb67d20ac8e75deddd53f3d",
        "x-amz-content-sha256: 0d9e125dc2eabdb65260298ed4a6321c18e6ecf2f19dc2bc772d046d508029bf",
        'client = OpenAI(api_key="YOUR_API_KEY")',
        "api_key: your-api-key-here",
        'token = "REPLACE_ME"',
        'OPENAI_API_KEY="sk-xxxxxxxxxxxxxxxxxxxxxxxx"',
        "class LoginForm(BaseModel):\n    username: str\n    password: SecretStr\n    remember_me: bool = False",
        "anamnesis/store.py,sha256=v9D_xXaMyb25ZG7Dxyt6Fj4gPq6hNGwbARRP3jY0WdY,18234",
        "Digest: SHA-256=r02x093F1hva5Zt/eiZpQbzCQZ0NjATvl62/nflkDfI=",
        "INFO openai: completion id=chatcmpl-emYMuLely46ESZjqJoyfi72BvNYcK tokens=512",
        "https://docs.google.com/document/d/1BhHVIoQ6-68SAZ5VJTUwwDL2u10i-8lcZghyZDktavv/edit",
        '{"kty": "RSA", "kid": "U_ms7kbtROamFGQaHUzXGtEhB8vVCt96CvLqutHaMFo", "use": "sig"}',
        "https://auth.acme.io/authorize?code_challenge=8IL1fj-g5prsjDsAmvP8cBAiXqYJ3jGn0KHb2kc6rm0&state=xyz",
    ],
)
def test_ids_digests_and_placeholders_a_tester_pasted_stay(text: str) -> None:
    assert redact(text) == text


def test_a_placeholder_that_holds_a_random_part_is_still_a_secret() -> None:
    assert "9f8Kq2Lm" not in redact('token = "REPLACE_ME_9f8Kq2Lm"')
    assert "mySecretPass1" not in redact("password: mySecretPass1")
    assert "X-Acme-Gate: [REDACTED" in redact("X-Acme-Gate: agw1.7f3Kq9LmZx2pR8vT4wY6")


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("FEISHU_WEBHOOK=https://open.feishu.cn/open-apis/bot/v2/hook/da6fe8e3-4033-42a1-972a-a2b500f36da5", "da6fe8e3"),
        ("https://logs-01.loggly.com/inputs/94031a4a-02b4-4969-9f89-d6f91899b977/tag/http/", "94031a4a"),
        ("https://hook.eu1.make.com/jnef4604hvnicm0znxq0rq4gzudfynbt", "jnef4604hvnicm0z"),
        ("curl -X POST https://maker.ifttt.com/trigger/door_open/with/key/quGNUSOc-19q-Pltxzv9Zi", "quGNUSOc"),
        ("github-recovery-codes.txt\n\nbbsst-6hagd\ns3k8d-rtzvf\nk0xwb-i3ijq\n", "s3k8d-rtzvf"),
        ("BACKUP VERIFICATION CODES\n1. 3294 6946\n2. 4394 8159\n", "4394 8159"),
        ("Can't scan? Enter this setup key manually: vp2j zj2d 5kje ofx6 zl4y 4gtf mkhz zikw", "5kje ofx6"),
        ('xcrun altool --upload-app -f App.ipa -u dev@acme.com -p "jwzf-oahc-owvy-oree"', "jwzf-oahc"),
        ("$ cat ~/.config/solana/id.json\n[" + ",".join(str(i * 37 % 256) for i in range(64)) + "]", "37,74,111"),
    ],
)
def test_webhook_tokens_recovery_codes_and_key_bytes_are_masked(text: str, secret: str) -> None:
    assert secret not in redact(text), redact(text)


@pytest.mark.parametrize(
    "text",
    [
        "tar -p some-file-name-here",
        "see https://example.com/api/key/list_all_keys_v2_endpoint",
        "data/inputs/train_split_2024_v3_final.csv",
        "Recovery codes are stored in 1Password.\nSee the runbook for details.",
        "numbers = [" + ",".join(str(i) for i in range(64)) + "]",
        "https://git-scm.com/docs/githooks",
    ],
)
def test_what_looks_like_a_webhook_a_code_list_or_key_bytes_but_is_none_stays(text: str) -> None:
    assert redact(text) == text


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("password: correct horse battery staple", "password: [REDACTED]"),
        ("passphrase = tulip orbit ferry violin", "passphrase = [REDACTED]"),
        ("password: see the vault entry", "password: see the vault entry"),
        ("password: not set yet", "password: not set yet"),
        ("Password: use the one in the team vault", "Password: use the one in the team vault"),
    ],
)
def test_a_passphrase_of_plain_words_is_masked_and_an_instruction_is_not(text: str, kept: str) -> None:
    assert redact(text) == kept


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("gh = Github('c1c005c3d2c620c90f5eb61df4860eea51ea429f')", "c1c005c3d2c620c9"),
        ("const client = algoliasearch('7QX2K8L3ZP', '8298728a1e882bc89bba310a314c28db');", "8298728a1e882bc8"),
        ("geocoder = OpenCageGeocode('1f7c93b34dd276cbe078f86f81714fc1')", "1f7c93b34dd276cb"),
        ('mg = Mailgun("mg.acme.io", "16df752f8f68c018816f0b0c32dcf501-fb2b1d52-a40d459d")', "16df752f8f68c018"),
    ],
)
def test_a_key_given_to_a_client_named_after_its_service_is_masked(text: str, secret: str) -> None:
    assert secret not in redact(text), redact(text)


def test_a_commit_id_given_to_git_or_a_repo_name_to_a_client_stays() -> None:
    for text in ("git checkout c1c005c3d2c620c90f5eb61df4860eea51ea429f", "repo = github.get_repo('acme/api')"):
        assert redact(text) == text
