"""Secret redaction: nothing captured from a session reaches git unredacted.

Notes travel to every machine the user owns and live in git history forever,
so a captured session passes through `redact` before it is written, and every
field derived from it (title, file name, tags, branch, touched paths, commit
message, log lines) through the stricter `redact_field`. The rules err on the
side of redacting: a false positive costs a few characters of a note, a false
negative leaks a credential.

Three layers, each built to fail safe:

1. Shaped credentials, recognised anywhere by their provider prefix or
   structure (the kinds secret scanners such as detect-secrets and gitleaks
   look for, written here from the token formats): a length *range* rather
   than an exact length, and the whole run of token characters after the
   prefix is taken, so a token a few characters longer or shorter, or with a
   new character in it, is still caught whole. Private keys with or without
   their `-----BEGIN` line, and DER key material by its first bytes.
2. Context: the value given to a secret-ish name (`password=`, `"token": …`,
   `--api-key …`, `export X_SECRET=…`, `Secret Access Key: …`), headers
   (`Authorization:`, cookies), passwords in URLs and on command lines,
   `.netrc`, `.npmrc`, docker `auths`, query parameters such as `sig=`.
3. Entropy: a random-looking string of 16+ characters within a few words of
   a secret-ish word (key, token, secret, password, auth, credential, api,
   bearer, private …), and any random-looking string of 32+ characters
   mixing upper case, lower case and digits. `redact_field` lowers that bar
   to 20 characters of any two of them, hex included.

What survives on purpose: git SHAs (up to 12, and 40 hex), 64-hex digests
(`sha256:…` image digests too: they name public content), UUIDs, note ids,
base64 of ordinary text (unless a secret word sits next to it), paths, URLs
without credentials, version numbers, long identifiers.

Notes written by an agent or by hand through the store's API (the MCP
`write`/`update` tools, `anamnesis new`) are redacted, not refused, by
`redact_note_fields`: the secret is replaced by a visible `[REDACTED:kind]`
mark and the rest of the note is kept, so a note is never lost to a false
positive and never carries the secret into git.

Every pattern is linear in the length of the text: no unbounded run is
followed by something that can fail and retry from each position (runs are
possessive or bounded, lookbehinds pin where a match may start), the context
rules look around a keyword within a fixed window, and a rule only runs on
text that holds one of its literal needles.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import math
import re
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from itertools import islice, pairwise
from typing import NamedTuple, overload

from anamnesis.base.notes import MAX_TITLE

MASK = "[REDACTED]"
_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def _mark(kind: str) -> str:
    return f"[REDACTED:{kind}]"


class _Lazy:
    """A regular expression compiled on first use: a hook that logs one line pays for a few
    patterns, not for all of them."""

    __slots__ = ("_compiled", "flags", "source")

    def __init__(self, source: str, flags: int = 0) -> None:
        self.source, self.flags = source, flags
        self._compiled: re.Pattern[str] | None = None

    @property
    def pattern(self) -> re.Pattern[str]:
        if self._compiled is None:
            self._compiled = re.compile(self.source, self.flags)
        return self._compiled

    def sub(self, repl: str | Callable[[re.Match[str]], str], text: str) -> str:
        return self.pattern.sub(repl, text)

    def match(self, text: str, pos: int = 0, endpos: int = sys.maxsize) -> re.Match[str] | None:
        return self.pattern.match(text, pos, endpos)

    def fullmatch(self, text: str, pos: int = 0, endpos: int = sys.maxsize) -> re.Match[str] | None:
        return self.pattern.fullmatch(text, pos, endpos)

    def search(self, text: str, pos: int = 0, endpos: int = sys.maxsize) -> re.Match[str] | None:
        return self.pattern.search(text, pos, endpos)

    def finditer(self, text: str, pos: int = 0, endpos: int = sys.maxsize) -> Iterator[re.Match[str]]:
        return self.pattern.finditer(text, pos, endpos)

    def findall(self, text: str) -> list[str]:
        return self.pattern.findall(text)


# ---------------------------------------------------------------------------
# What "random-looking" means

_SEGMENT = _Lazy(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
_VOWEL = _Lazy("[aeiouyAEIOUY]")
_UUID = _Lazy(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_HEX = _Lazy(r"[0-9a-fA-F]+")
_DIGEST_BEFORE = _Lazy(
    r"(?i)(?:sha\d{0,3}|sha-\d{3}|md5|blake\d*|xxh\d*|crc\d*)[:\-=]$"
    # ids a service gives out in the open: a completion's, a document's in its URL, a JWK's, PKCE's
    r"|(?:/document/d/|/file/d/|/spreadsheets/d/|/presentation/d/|/drive/folders/)$"
    r"|\"kid\": ?\"$|(?i:code_challenge|nonce|state|etag|digest)=$"
    r"|(?:ssh-(?:rsa|dss|ed25519|ed448)|ecdsa-sha2-nistp\d+|sk-ssh-ed25519@openssh\.com) $"
    r"|(?<![A-Za-z0-9])h1:$|/nix/store/$|ipfs://$|/ip[fn]s/$"  # go.sum hashes, Nix store paths, IPFS CIDs
    r"|gpg: key $|(?i:key ?id|fingerprint)[:= ]+$"  # an OpenPGP key's id or fingerprint
)
# Public names that look random: what follows them is content's hash or a resource's name.
_PUBLIC_BEFORE = _Lazy(
    r"(?:(?<![A-Za-z0-9])h1:|data:(?:image|font|audio|video)/[\w.+\-]{1,60}(?:;[\w.+=\-]{1,60}){0,4};base64,"
    r"|\barn:aws[\w\-]{0,20}:[\w\-]{1,40}:[\w\-]{0,30}:\d{12}:[\w+=,.@:/\-]{0,200}+)$"
)
PUBLIC_REACH = 320  # how far back _PUBLIC_BEFORE looks
_ETH_ADDRESS = _Lazy(r"0x[0-9a-fA-F]{40}")
_NIX_NAME = _Lazy(r"[0-9a-df-np-sv-z]{32}-[A-Za-z0-9]")  # a Nix store hash (its base32 has no e, o, t, u)
_AGE_RECIPIENT = _Lazy(r"age1[02-9ac-hj-np-z]{58}")  # an age public key (bech32): shared on purpose
_DIGEST = _Lazy(r"(?i)(?:sha\d{1,3}|md5)[:\-][A-Za-z0-9+/=]+")
_PATHISH = _Lazy(r"^(?:\.{0,2}/|~/)|\.[A-Za-z]{1,5}$")


def _entropy(text: str) -> float:
    """Shannon entropy of `text` in bits per character."""
    if not text:
        return 0.0
    total = len(text)
    return -sum(n / total * math.log2(n / total) for n in Counter(text).values())


def _wordy(text: str) -> bool:
    """True when `text` reads as words (an identifier, a path, a slug), not as random characters.

    Split at case changes, digits and punctuation, words give letter segments
    of three letters or more on average and at most two groups of digits;
    random base62/base64 gives segments of one or two letters with digits all
    through.
    """
    segments = _SEGMENT.findall(text)
    letters = [s for s in segments if not s[0].isdigit()]
    if not letters or len(segments) - len(letters) > 2:
        return False
    average = sum(len(s) for s in letters) / len(letters)
    if average >= 3.0:
        return True
    # Short words ("getIdOfX") still have vowels in nearly every segment.
    return average >= 2.4 and sum(1 for s in letters if _VOWEL.search(s)) >= 0.8 * len(letters)


def _decodes_to_text(blob: str) -> bool:
    """True when `blob` is base64 of ordinary printable text rather than of binary key material."""
    data = re.sub(r"[^A-Za-z0-9+/_\-]", "", blob)
    if len(data) < 16:
        return False
    data = data.replace("-", "+").replace("_", "/")
    data = data[: len(data) - len(data) % 4]
    try:
        decoded = base64.b64decode(data, validate=True).decode("utf-8")
    except (binascii.Error, ValueError):
        return False
    printable = sum(1 for c in decoded if c.isprintable() or c in "\t\r\n")
    return bool(decoded) and printable >= 0.97 * len(decoded)


def looks_random(token: str, *, min_len: int = 16, classes: int = 2) -> bool:
    """Could `token` be a generated secret: long, with `classes` or more of upper/lower/digit,
    not made of words, and of high enough entropy?"""
    if len(token) < min_len:
        return False
    lower = any(c.islower() for c in token)
    upper = any(c.isupper() for c in token)
    digit = any(c.isdigit() for c in token)
    if lower + upper + digit < classes or not (lower or upper) or _wordy(token):
        return False
    core = re.sub(r"[^A-Za-z0-9]", "", token)
    if _HEX.fullmatch(core):
        return _entropy(core) >= 3.0
    return _entropy(token) >= (3.3 if len(token) < 20 else 3.5)


def _exempt(token: str, before: str) -> bool:
    """Look-alikes that must survive: digests, git SHAs, UUIDs, Ethereum addresses, Nix store hashes."""
    if _DIGEST_BEFORE.search(before) or _UUID.fullmatch(token) or _DIGEST.fullmatch(token):
        return True
    if _ETH_ADDRESS.fullmatch(token) or _NIX_NAME.match(token) or _AGE_RECIPIENT.fullmatch(token):
        return True
    if token.startswith(("chatcmpl-", "cmpl-")):  # a completion's id, printed in every log line
        return True
    return bool(_HEX.fullmatch(token)) and (len(token) <= 12 or len(token) in (40, 64))


# ---------------------------------------------------------------------------
# Layer 1: shaped credentials

_Check = Callable[[re.Match[str]], bool]


class _Rule(NamedTuple):
    kind: str
    needles: tuple[str, ...]  # lower-case literals; the rule runs only when one is in the text
    pattern: _Lazy
    check: _Check | None


def _body_not_wordy(skip: int) -> _Check:
    """The part of a match after its first `skip` characters holds a digit or does not read as words."""

    def check(match: re.Match[str]) -> bool:
        body = match.group(0)[skip:]
        return any(c.isdigit() for c in body) or not _wordy(body)

    return check


def _random_body(skip: int) -> _Check:
    """The part of a match after its first `skip` characters mixes upper case, lower case and digits
    and looks random (a short prefix such as Vault's `s.` says little on its own)."""

    def check(match: re.Match[str]) -> bool:
        return looks_random(match.group(0)[skip:], classes=3)

    return check


def _not_wordy(match: re.Match[str]) -> bool:
    return not _wordy(match.group(0))


_L = r"(?<![A-Za-z0-9])"  # a token starts after a non-alphanumeric (an underscore or dash is fine)
_B64_LINE_SEP = r"(?:\\r)?(?:\\n)?[ \t\"',+]*\r?\n[ \t\"'>#*+]*|(?:\\r)?\\n"
# First bytes of DER private keys, in base64: PKCS#1 RSA, PKCS#8 (RSA, EC, Ed25519/X25519,
# encrypted), SEC1 EC, OpenSSH ("openssh-key-v1").
_DER_START = (
    r"(?:MII[A-Za-z0-9+/]{3}IBAAK|MII[A-Za-z0-9+/]{3}IBADAN|MII[A-Za-z0-9+/]{2}DBOBgkqhkiG9w0BBQ0w"
    r"|MIG[A-Za-z0-9+/]AgEAMBMGByqGSM49|MHcCAQEE|MIGkAgEBBD|MC4CAQAwBQYDK2V[wx]|b3BlbnNzaC1rZXktdjE)"
)
_PEM_SEP = r"(?:(?:[ \t]*(?:\r?\n|(?:\\r)?\\n))++[ \t]*|[ \t]+)"

# (kind, needles, pattern, check): whole-match replacements for credentials with a recognisable
# shape. Needles are lower-case literals separated by "|" ("" = always run).
_SHAPED_SPECS: list[tuple[str, str, str, _Check | None]] = [
    # Private keys: a PEM block (also JSON-escaped, one-lined or cut short), PuTTY, DER key material.
    (
        "private-key",
        "putty-user-key-file-",
        r"PuTTY-User-Key-File-\d+:[^\n]*(?:\r?\n[ \t]*+(?:[A-Z][A-Za-z0-9\-]*:[^\n]*|[A-Za-z0-9+/=]++))*+",
        None,
    ),
    ("private-key", "private-lines:", r"Private-Lines:[ \t]*\d+(?:\s*+[A-Za-z0-9+/=]{4,}+)++", None),
    (
        "private-key",
        "begin",
        r"(?<!-)-{3,}+[ \t]?BEGIN (?:[A-Za-z0-9]+ )*(?:PRIVATE KEY(?: BLOCK)?|SECRET KEY|Static key V\d)[ \t]?-{3,}+"
        rf"(?:{_PEM_SEP}(?:[A-Z][A-Za-z\-]*:[^\n\\]*|[A-Za-z0-9+/=]++))*+"
        r"(?:(?:[ \t]*(?:\r?\n|(?:\\r)?\\n))*+[ \t]*-{3,}+[ \t]?END [A-Za-z0-9 ]*-{3,}+)?",
        None,
    ),
    (
        "private-key",
        "mii|mig|mhccaqee|mc4caqaw|b3blbnnzac1rzxktdje",
        rf"(?<![A-Za-z0-9+/]){_DER_START}[A-Za-z0-9+/=]{{8,}}+"
        rf"(?:(?:{_B64_LINE_SEP})[A-Za-z0-9+/]{{4,}}+={{0,2}})*+",
        None,
    ),
    ("age-secret-key", "age-secret-key-1", r"AGE-SECRET-KEY-1[0-9A-Za-z]{20,}+", None),
    ("base64-pem", "ls0tls1crudjt", rf"{_L}LS0tLS1CRUdJT[A-Za-z0-9+/=]{{20,}}+", None),
    # Cloud providers.
    (
        "aws-access-key",
        "akia|asia|abia|acca|agpa|aida|aipa|akpa|anpa|anva|apka|aroa|asca",
        rf"{_L}(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AIPA|AKPA|ANPA|ANVA|APKA|AROA|ASCA)[A-Z0-9]{{12,}}+",
        None,
    ),
    (
        "aws-session-token",
        "fwogzxivyxdz|iqojb3jpz2lu",
        rf"{_L}(?:FwoGZXIvYXdz|IQoJb3JpZ2lu)[A-Za-z0-9+/=]{{20,}}+",
        None,
    ),
    ("google-api-key", "aiza", rf"{_L}AIza[A-Za-z0-9_\-]{{25,}}+", None),
    ("google-oauth-secret", "gocspx-", rf"{_L}GOCSPX-[A-Za-z0-9_\-]{{16,}}+", None),
    ("google-oauth-token", "ya29.", rf"{_L}ya29\.[A-Za-z0-9_\-.]{{16,}}+", None),
    ("google-refresh-token", "1//0", r"(?<![A-Za-z0-9/:])1//0[A-Za-z0-9_\-]{20,}+", None),
    ("azure-ad-secret", "q~", r"(?<![A-Za-z0-9_~.\-])[A-Za-z0-9_~.\-]{1,8}Q~[A-Za-z0-9_~.\-]{24,}+", None),
    ("azure-devops-pat", "azdo", rf"{_L}[A-Za-z0-9]{{40,}}AZDO[A-Za-z0-9]{{4,}}+", None),
    ("digitalocean-token", "_v1_", rf"{_L}do[opr]_v1_[A-Za-z0-9]{{32,}}+", None),
    ("alibaba-key", "ltai", rf"{_L}LTAI[A-Za-z0-9]{{12,}}+", None),
    ("tencent-key", "akid", rf"{_L}AKID[A-Za-z0-9]{{24,}}+", None),
    ("yandex-key", "aqvn", rf"{_L}AQVN[A-Za-z0-9_\-]{{30,}}+", None),
    ("heroku-key", "hrku-", rf"{_L}HRKU-[A-Za-z0-9_\-]{{20,}}+", None),
    (
        "flyio-token",
        "fo1_|fm1|fm2",
        rf"{_L}(?:fo1_[A-Za-z0-9_\-]{{30,}}+|fm[12][ar]?_[A-Za-z0-9+/=_\-]{{30,}}+)",
        None,
    ),
    ("render-key", "rnd_", rf"{_L}rnd_[A-Za-z0-9]{{24,}}+", None),
    ("netlify-token", "nfp_|nfc_", rf"{_L}nf[pc]_[A-Za-z0-9]{{30,}}+", None),
    ("supabase-token", "sbp_|sb_secret_", rf"{_L}(?:sbp_|sb_secret_)[A-Za-z0-9_\-]{{24,}}+", None),
    ("planetscale-token", "pscale_", rf"{_L}pscale_(?:tkn|pw|oauth)_[A-Za-z0-9_\-.]{{30,}}+", None),
    ("terraform-token", ".atlasv1.", rf"{_L}[A-Za-z0-9]{{10,20}}\.atlasv1\.[A-Za-z0-9_\-=]{{30,}}+", None),
    ("pulumi-token", "pul-", rf"{_L}pul-[a-f0-9]{{30,}}+", None),
    ("tailscale-key", "tskey-", rf"{_L}tskey-[a-z]+-[A-Za-z0-9\-]{{16,}}+", None),
    ("databricks-token", "dapi", rf"{_L}dapi[a-f0-9]{{28,}}+(?:-\d)?", None),
    ("dynatrace-token", "dt0", rf"{_L}dt0[a-z]\d\d\.[A-Za-z0-9]{{20,}}\.[A-Za-z0-9]{{40,}}+", None),
    # Code hosting, CI, package registries, secret stores.
    (
        "github-token",
        "gh|github_pat_",
        rf"{_L}(?:gh[pousr]_[A-Za-z0-9_]{{20,}}+|github_pat_[A-Za-z0-9_]{{20,}}+)",
        None,
    ),
    (
        "gitlab-token",
        "gl|gr1348941",
        rf"{_L}(?:gl(?:pat|dt|ptt|rt|cbt|ft|imt|soat|agent|oas|ffct|wt|cs)-[A-Za-z0-9_\-.]{{16,}}+"
        r"|GR1348941[A-Za-z0-9_\-]{16,}+)",
        None,
    ),
    ("atlassian-token", "atatt|atctt|atbb", rf"{_L}AT(?:ATT|CTT|BB)[A-Za-z0-9_\-=+/]{{20,}}+", None),
    ("npm-token", "npm_", rf"{_L}npm_[A-Za-z0-9]{{20,}}+", None),
    ("pypi-token", "pypi-", rf"{_L}pypi-[A-Za-z0-9_\-]{{24,}}+", _body_not_wordy(5)),
    ("rubygems-key", "rubygems_", rf"{_L}rubygems_[a-f0-9]{{32,}}+", None),
    ("clojars-token", "clojars_", rf"{_L}CLOJARS_[a-z0-9]{{32,}}+", None),
    ("nuget-key", "oy2", rf"{_L}oy2[a-z0-9]{{40,}}+", None),
    (
        "artifactory-key",
        "akcp|cmvmdgtuojaxoj",
        rf"{_L}(?:AKCp[A-Za-z0-9]{{50,}}+|cmVmdGtuOjAxOj[A-Za-z0-9+/=]{{30,}}+)",
        None,
    ),
    ("docker-hub-token", "dckr_", rf"{_L}dckr_(?:pat|oat)_[A-Za-z0-9_\-]{{20,}}+", None),
    ("buildkite-token", "bk", rf"{_L}bk[a-z]{{2}}_[A-Za-z0-9]{{30,}}+", None),
    ("circleci-token", "ccipat_|ccirut_", rf"{_L}CCI(?:PAT|RUT)_[A-Za-z0-9_]{{24,}}+", None),
    ("sonar-token", "sq", rf"{_L}sq[upa]_[A-Za-z0-9]{{30,}}+", None),
    ("postman-key", "pmak-", rf"{_L}PMAK-[A-Za-z0-9\-]{{30,}}+", None),
    ("vault-token", "hvs.|hvb.|hvr.", rf"{_L}hv[sbr]\.[A-Za-z0-9_\-]{{20,}}+", None),
    ("vault-token", "s.|b.|r.", r"(?<![\w.\-/])[sbr]\.[A-Za-z0-9]{24}(?![\w.\-])", _random_body(2)),
    # a service token names its environment: dp.st.prd.<40 characters>
    ("doppler-token", "dp.", rf"{_L}dp\.(?:pt|st|ct|sa|scim|audit)\.(?:[a-z0-9_\-]{{1,40}}\.)?[A-Za-z0-9]{{20,}}+", None),
    # AI and data services.
    ("anthropic-key", "sk-ant-", rf"{_L}sk-ant-[A-Za-z0-9_\-]{{16,}}+", None),
    ("openai-key", "sk-", r"(?<![A-Za-z0-9\-])sk-(?!ant-)[A-Za-z0-9_\-]{16,}+", _body_not_wordy(3)),
    ("huggingface-token", "hf_|api_org_", rf"{_L}(?:hf_|api_org_)[A-Za-z0-9]{{20,}}+", None),
    ("replicate-token", "r8_", rf"{_L}r8_[A-Za-z0-9]{{30,}}+", None),
    ("groq-key", "gsk_", rf"{_L}gsk_[A-Za-z0-9]{{40,}}+", None),
    ("xai-key", "xai-", rf"{_L}xai-[A-Za-z0-9]{{40,}}+", None),
    ("perplexity-key", "pplx-", rf"{_L}pplx-[A-Za-z0-9]{{32,}}+", None),
    ("langsmith-key", "lsv2_", rf"{_L}lsv2_[a-z]{{2}}_[A-Za-z0-9_]{{24,}}+", None),
    ("pinecone-key", "pcsk_", rf"{_L}pcsk_[A-Za-z0-9_]{{30,}}+", None),
    # Chat, mail, payments and other services.
    ("slack-token", "xox|xapp-", rf"{_L}(?:xox[a-z](?:\.xox[a-z])?|xapp)-[A-Za-z0-9\-]{{10,}}+", None),
    (
        "slack-webhook",
        "hooks.slack.com",
        r"(?i)hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9/_\-]+",
        None,
    ),
    ("discord-webhook", "/api/webhooks/", r"(?i)discord(?:app)?\.com/api/webhooks/\d+/[A-Za-z0-9_\-]+", None),
    # Mailgun's keys since 2023: 32 hex, then two groups of 8 (no UUID, no digest has this shape).
    ("mailgun-key", "-", r"(?<![\w\-])[0-9a-f]{32}-[0-9a-f]{8}-[0-9a-f]{8}(?![\w\-])", None),
    ("zapier-webhook", "hooks.zapier.com", r"(?i)hooks\.zapier\.com/hooks/catch/\d+/[A-Za-z0-9]+", None),
    # Any other service's incoming webhook whose URL is its secret (Mattermost, Rocket.Chat, Gitea, n8n,
    # Feishu, Loggly, IFTTT...): a run of letters and digits as a path segment after /hook(s)/,
    # /webhook(s)/, /inputs/ or /key/, or first on a host named hook.… (make.com).
    (
        "webhook-url",
        "/hook|/webhook|/inputs/|/with/key/|//hook.",
        r"(?i)(?:(?<=/)(?:hooks?|webhooks?)/(?:[\w.\-]{1,40}/){0,3}|(?<=//)hooks?\.[\w.\-]{1,60}/|(?<=/)with/key/)"
        r"(?=[A-Za-z0-9_\-]*\d)(?=[A-Za-z0-9_\-]*[A-Za-z])[A-Za-z0-9_\-]{20,}"
        r"|(?<=/)inputs/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
        None,
    ),
    (
        "teams-webhook",
        "webhook",
        r"(?i)(?:\.webhook\.office\.com/webhookb2|outlook\.office(?:365)?\.com/webhook)/[A-Za-z0-9@/_\-]+",
        None,
    ),
    (
        "discord-bot-token",
        ".",
        rf"{_L}[MNO][A-Za-z0-9_\-]{{20,30}}\.[A-Za-z0-9_\-]{{5,8}}\.[A-Za-z0-9_\-]{{25,45}}+",
        _not_wordy,
    ),
    ("telegram-bot-token", ":", r"(?<![0-9])\d{6,12}:[A-Za-z0-9_\-]{30,}+", _body_not_wordy(6)),
    ("stripe-key", "_live_|_test_|_prod_", rf"{_L}(?:sk|rk|pk)_(?:live|test|prod)_[A-Za-z0-9]{{10,}}+", None),
    ("stripe-webhook-secret", "whsec_", rf"{_L}whsec_[A-Za-z0-9+/=]{{16,}}+", None),
    (
        "square-token",
        "sq0|eaaa",
        rf"{_L}(?:sq0(?:atp|csp|idp)-[A-Za-z0-9_\-]{{16,}}+|EAAA[A-Za-z0-9_\-+/]{{40,}}+)",
        None,
    ),
    ("facebook-token", "eaa", rf"{_L}EAA[A-Za-z0-9]{{30,}}+", _body_not_wordy(3)),
    ("twitter-bearer", "aaaaaaaaaaaaaaaaaaaa", rf"{_L}A{{20,24}}[A-Za-z0-9%]{{30,}}+", None),
    ("sendgrid-key", "sg.", rf"{_L}SG\.[A-Za-z0-9_\-]{{12,}}\.[A-Za-z0-9_\-]{{12,}}+", None),
    ("mailgun-key", "key-", rf"{_L}key-[A-Za-z0-9]{{24,}}+", _body_not_wordy(4)),
    ("mailchimp-key", "-us", rf"{_L}[0-9a-f]{{28,40}}-us\d{{1,2}}(?![0-9])", None),
    ("twilio-key", "sk|ac", rf"{_L}(?:SK|AC)[0-9a-fA-F]{{28,40}}+(?![A-Za-z0-9])", None),
    ("new-relic-key", "nr", rf"{_L}NR(?:AK|AA|II|JS|IQ|RA|SP|UA)-[A-Za-z0-9_\-]{{15,}}+", None),
    ("sentry-token", "sntr", rf"{_L}sntry[a-z]?_[A-Za-z0-9+/=_\-]{{20,}}+", None),
    ("linear-key", "lin_", rf"{_L}lin_(?:api|oauth)_[A-Za-z0-9]{{20,}}+", None),
    ("notion-token", "secret_|ntn_", rf"{_L}(?:secret_|ntn_)[A-Za-z0-9]{{30,}}+", None),
    ("shopify-token", "shp", rf"{_L}shp(?:at|ss|ca|pa|tka)_[A-Za-z0-9]{{20,}}+", None),
    ("figma-token", "fig", rf"{_L}fig[dou]_[A-Za-z0-9_\-]{{30,}}+", None),
    ("airtable-token", "pat", rf"{_L}pat[A-Za-z0-9]{{10,20}}\.[a-f0-9]{{40,}}+", None),
    ("contentful-token", "cfpat-", rf"{_L}CFPAT-[A-Za-z0-9_\-]{{30,}}+", None),
    ("hubspot-token", "pat-", rf"{_L}pat-(?:na|eu|ap)\d-[0-9a-f]{{8}}-[0-9a-f\-]{{27,}}+", None),
    (
        "launchdarkly-key",
        "sdk-|api-|mob-",
        r"(?<![A-Za-z0-9\-])(?:sdk|api|mob)-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
        None,
    ),
    ("flutterwave-key", "flw", rf"{_L}FLW(?:SECK|PUBK)(?:_TEST)?-[A-Za-z0-9]{{20,}}+(?:-X)?", None),
    ("razorpay-key", "rzp_", rf"{_L}rzp_(?:live|test)_[A-Za-z0-9]{{12,}}+", None),
    ("shippo-token", "shippo_", rf"{_L}shippo_(?:live|test)_[A-Za-z0-9]{{30,}}+", None),
    (
        "braintree-token",
        "access_token$",
        r"access_token\$(?:production|sandbox)\$[a-z0-9]{12,}\$[a-f0-9]{24,}+",
        None,
    ),
    # MD5-crypt (`$1$`, Apache's `$apr1$` in .htpasswd): short enough to pass for an ordinary word run.
    (
        "password-hash",
        "$1$|$apr1$",
        r"(?<![\w$])\$(?:1|apr1)\$[./0-9A-Za-z]{1,8}\$[./0-9A-Za-z]{22}(?![./0-9A-Za-z])",
        None,
    ),
    # Plaid's item access token: an environment's name, then a UUID.
    (
        "plaid-access-token",
        "access-",
        r"(?<![\w\-])access-(?:sandbox|development|production)-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
        None,
    ),
    # A BitLocker recovery key: eight groups of six digits (nothing else is written so).
    ("bitlocker-recovery-key", "", r"(?<![\d\-])\d{6}(?:-\d{6}){7}(?![\d\-])", None),
    ("mapbox-token", ".eyj", rf"{_L}[ps]k\.eyJ[A-Za-z0-9_\-]{{10,}}\.[A-Za-z0-9_\-]{{10,}}+", None),
    # Structure only.
    (
        "jwt",
        "eyj",
        rf"{_L}eyJ[A-Za-z0-9_\-]{{10,}}\.[A-Za-z0-9_\-]{{10,}}+(?:\.[A-Za-z0-9_\-]*+){{0,3}}",
        None,
    ),
]
_SHAPED: list[_Rule] = [
    _Rule(kind, tuple(needles.split("|")) if needles else (), _Lazy(pattern), check)
    for kind, needles, pattern, check in _SHAPED_SPECS
]

# Three or more lines of base64 (a PEM body whose BEGIN line is elsewhere: `tail -n +2 key.pem`,
# a heredoc, a JSON string with \n escapes); the last line may be short.
_BARE_BODY = _Lazy(
    rf"(?<![A-Za-z0-9+/=])[A-Za-z0-9+/]{{40,100}}+={{0,2}}"
    rf"(?:(?:{_B64_LINE_SEP})[A-Za-z0-9+/]{{40,100}}+={{0,2}}){{2,}}+"
    rf"(?:(?:{_B64_LINE_SEP})[A-Za-z0-9+/]{{1,100}}+={{0,2}})?(?![A-Za-z0-9+/=])"
)


def _bare_body(match: re.Match[str]) -> str:
    if _decodes_to_text(match.group(0)):
        return match.group(0)  # base64 of a text file, not key material
    return _mark("private-key")


def _apply(rule: _Rule, text: str) -> str:
    mark = _mark(rule.kind)
    check = rule.check
    if check is None:
        return rule.pattern.sub(mark, text)
    return rule.pattern.sub(lambda m: mark if check(m) else m.group(0), text)


_SHAPED_NEEDLES = frozenset(needle for rule in _SHAPED for needle in rule.needles)


def _present(text: str, needles: Iterable[str]) -> frozenset[str]:
    """Which of `needles` (lower case) occur in `text`: one pass over the needles, not one per rule."""
    low = text.translate(_LOWER)
    return frozenset(needle for needle in needles if needle in low)


def _shaped(text: str) -> str:
    present = _present(text, _SHAPED_NEEDLES)
    for rule in _SHAPED:
        if rule.needles and present.isdisjoint(rule.needles):
            continue
        redacted = _apply(rule, text)
        if redacted != text:
            text, present = redacted, _present(redacted, _SHAPED_NEEDLES)
    return _BARE_BODY.sub(_bare_body, text)


# ---------------------------------------------------------------------------
# Layer 2: context

# Values that are references to a secret, placeholders or structure rather than the secret itself.
_NOT_A_SECRET = _Lazy(
    r"^(?:\$(?:[{(\d]|[A-Za-z_]\w*+(?![^/:.}\s\"'\-]))|%\(|%[A-Z_]+%$|\{\{|\$\{|<[^>]*>$|\[REDACTED|os\.|process\.env|getenv|env\(|ENV\[|"
    r"op://|bws://|vault:|"
    r"None$|null$|nil$|undefined$|true$|false$|yes$|no$|on$|off$|required$|optional$|"
    r"\*+$|x+$|X+$|\.\.\.|…|\d{1,5}$|[\[{(]|''$|\"\"$|"
    # a placeholder to fill in, or a type: YOUR_API_KEY, your-api-key-here, REPLACE_ME, sk-xxxxxxxx, SecretStr
    r"(?:your|insert|enter|replace)[_-][\w-]*$|(?:replace|change)[_-]?me$|changeit$|placeholder$|[\w-]*[_-]here$|"
    r"\w{0,12}[_-]x{6,}$|Secret(?:Str|Bytes)$|Secret\[)",
    re.I,
)

# Literals that start the search for a secret-ish name; _NAME_WORD then decides.
_NAME_ANCHORS = (
    "pass", "pwd", "secret", "token", "key", "cred", "auth", "dsn", "salt", "cookie", "sig", "bearer",
    "conn", "psk", "pw", "pat", "pepper", "otp", "recovery", "backup", "unlock", "pin",
    # the word for a password in other languages (German, Dutch, French, Spanish, Portuguese,
    # Swedish, Polish, Finnish)
    "kennwort", "wachtwoord", "contrase", "senha", "lösenord", "losenord", "hasło", "haslo", "salasana", "mdp",
    "clave", "mnemonic",
)  # fmt: skip
# Secret-ish words in a name, matched where an anchor was found: a name holding one makes its
# value a secret. "key" counts only after one of _KEY_PREFIXES ("api_key", "accessKey", "SSH_KEY").
_NAME_WORD = _Lazy(
    r"(?i:pass(?:word|wd|wort|phrase|code)|(?<![a-z])pass(?:e)?(?![a-z])|pwd(?![a-z])|secret|"
    r"kennwort|wachtwoord|contrase(?:ñ|n)a|senha|l(?:ö|o)senord|has(?:ł|l)o|salasana|(?<![a-z])(?:mdp|clave)(?![a-z])|"
    r"token(?!i[sz]|s?[_\-]?(?:count|limit|usage|type|ize)|s\b)|credential|creds(?![a-z])|"
    r"(?<![a-z])auth(?![a-z])|dsn(?![a-z])|salt(?![a-z])|cookie|signature|(?<![a-z])sig(?![a-z])|"
    r"bearer|conn(?:ection)?[_\-]?str(?:ing)?|(?<![a-z])(?:psk|pw|pat)(?![a-z])|pepper|otp[_\-]?seed|"
    r"(?:recovery|backup|unlock|pin)[_\-]?codes?(?![a-z])|authtok|(?<![a-z])(?:bind|root)?pw(?![a-z])|mnemonic)"
    r"|(?<=[a-z])(?:Auth|Pass|Pw|PW|Pat|Psk|Dsn|Salt|Sig)(?![a-z])"
)
_KEY_PREFIXES = (
    "api", "access", "account", "master", "private", "signing", "encryption", "session", "client", "app",
    "license", "consumer", "storage", "service", "admin", "deploy", "ssh", "gpg", "pgp", "webhook",
    "shared", "auth", "sas", "secret", "application", "integration", "hmac", "subscription", "wifi", "wi-fi",
    "wpa", "wpa2", "wlan",
)  # fmt: skip
_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")
# An unquoted value ends at white space, a quote, a bracket, or a separator that starts the next
# `name=` (a password may well hold & ; or ,).
_BARE_VALUE = r"(?:[^\s\"'`,;&|(){}\[\]<>\\]|[&;,](?![ \t]*[A-Za-z_][\w.\-]*[ \t]*=)){1,2000}+"
_VALUE = (
    r"(?:(?:[fFbBrRuU]{1,2}(?=[\"']))?"
    r"(?:\\(?P<eq>[\"'])(?P<evalue>(?:[^\"'\\\n]|\\[^\"'\n]){1,2000}+)\\(?P=eq)"
    r"|\"(?P<dvalue>(?:[^\"\\\n]|\\.){1,2000}+)\""
    r"|'(?P<svalue>[^'\n]{1,2000}+)'"
    r"|`(?P<bvalue>[^`\n]{1,2000}+)`"
    rf"|(?P<value>{_BARE_VALUE})))"
)
# After a name: a closing quote, at most two more words ("Secret Access Key"), a separator
# (`>` for <password>…</password>), a value.
_ASSIGN = _Lazy(
    r"(?P<close>\\?[\"'])?"
    r"(?P<more>(?:[ \t]+[A-Za-z][A-Za-z0-9_\-]{0,20}){0,5})"
    # a declared type first (`apiToken: string = …`, `let token: &str = …`), then the plain separators
    r"(?P<sep>[ \t]*:[ \t]*&?(?:'static[ \t]+)?[A-Za-z_][\w.:]{1,40}(?:<[^<>\n]{0,40}>|\[[^\[\]\n]{0,40}\])?\??[ \t]*=(?![=>])[ \t]*"
    r"|[ \t]*(?:=>|:=|=|:)[ \t]*(?:\r?\n[ \t]+)?|[ \t]+(?:is|was|are|to|->)[ \t]+"
    r"(?:(?:now|actually|still|currently|really|just|also|simply|(?:set|changed) to)[ \t]+)?|>)"
    r"(?P<tag>![\w!.\-]{0,40}[ \t]+)?+" + _VALUE  # a YAML tag (`password: !unsafe '…'`) is not the value
)
# A name given a value, where a value was looked for: the value is that name's; the name is
# an environment variable's (DB_PASSWORD, PGPASSWORD), so base64 padding is never taken for one.
_NESTED_ASSIGN = _Lazy(r"[A-Z_][A-Z0-9_]{1,60}[ \t]*(?P<sep>:=|=)[ \t]*(?!=)" + _VALUE)
# After a command-line flag (`--password VALUE`, `--token=VALUE`).
_NEXT_ASSIGN = _Lazy(r"[ \t]*:?=(?!=)")
_FLAG_ASSIGN = _Lazy(r"(?P<more>)(?P<sep>=|[ \t]+)" + _VALUE)
# A value run on to the next white space or quote, brackets and all.
_RAW_VALUE = _Lazy(r"[^\s'\"`]{1,2000}+")
_RAW_ASSIGN = _Lazy(r"[ \t]*(?:=|:)[ \t]*(?P<raw>[\[{(<][^\s'\"`]{7,2000}+)")
_BRACKETS = frozenset("()[]{}<>")
_VALUE_GROUPS = ("evalue", "dvalue", "svalue", "bvalue", "value")
_LOOSE_SEPARATORS = (":", "is", "was", "are", "to", "->")
_CODE_WORDS = ("pass", "pwd", "secret", "token", "key", "auth", "cred", "dsn", "cookie", "sig", "session")


# Names about a secret rather than holding one: its lifetime, where it lives, its type.
_NOT_SECRET_NAME = _Lazy(
    r"(?i)[_\-.](?:ttl|url|uri|file|path|dir|name|expiry|expires(?:_at|_in)?|length|len|size|count|limit|"
    r"timeout|type|header|endpoint|region|format|policy|version|prefix|field|column|var|env|at|"
    r"required|enabled|rotation|hint|label|help|sock|socket)$"
)
# arn:aws:secretsmanager:REGION:ACCOUNT:secret:NAME: a service and a resource type, not a secret's name
_ARN_BEFORE = _Lazy(r"arn:aws[\w\-]{0,20}:(?:[\w\-]{1,40}:[\w\-]{0,30}:\d{12}:)?$")
_INTERPOLATION = _Lazy(
    r"\{[A-Za-z_][\w.\[\]'\"]*(?:\([^)]*\))?(?:![rsa])?(?::[^{}]*)?\}|\$\{[^}]*\}|%\([a-z_]+\)s"
)


def _reference(value: str) -> bool:
    """A reference, placeholder or structure rather than a secret (`$DB_PASS`, `{{ pw }}`, `[1, 2]`);
    a random run that happens to start with a bracket (a Django key) is still a secret."""
    if not _NOT_A_SECRET.match(value):
        return False
    return not (value[:1] in "[{(" and len(value) >= 16 and looks_random(value))


def _plain_word(value: str) -> bool:
    return bool(re.fullmatch(r"[a-z]{1,11}|[A-Z][a-z]{1,10}", value))


def _mixed_at_random(word: str) -> bool:
    """Whether `word` switches from lower to upper case too often for a name (`mBimJcmXNqCgIsDR`,
    not `getAccessToken` or `XMLHttpRequest`)."""
    switches = sum(1 for a, b in pairwise(word) if a.islower() and b.isupper())
    return switches >= max(3, len(word) // 5)


def _is_code(value: str, name: str, after: str) -> bool:
    """An unquoted value that is code: a call, an attribute, a variable named like the key."""
    if after[:1] in ("(", "[") and re.fullmatch(r"[A-Za-z_][\w.]*", value):
        return True
    if re.fullmatch(r"[a-z_][a-z0-9_]*(?:\.[a-z_][a-z0-9_]*)+|[A-Za-z_]+(?:\.[A-Za-z_]+)+", value) and not any(
        _mixed_at_random(part) for part in value.split(".")
    ):
        return True  # attribute access: config.db.password, signal.Signals (not s.mBimJcmXNqCgIsDRdLmIVb)
    if re.fullmatch(r"(?:self|this|cls|args|opts|options|config|cfg|settings|params)\.\w+", value):
        return True
    if not any(c.isdigit() for c in value) and re.fullmatch(r"[A-Za-z_]+", value):
        squashed, key = value.lower().replace("_", ""), name.lower()
        if any(word in squashed and word in key for word in _CODE_WORDS):
            return True  # password=password, token=access_token
        # A variable in a call or a literal: session_id=key_id, {"token": refresh_token}.
        return (
            after[:1] in (",", ")", "}")
            and re.fullmatch(r"[a-z_]+|[a-z]+(?:[A-Z][a-z]+)+", value) is not None
        )
    return False


def _name_words(text: str) -> list[tuple[int, int]]:
    """Spans of the secret-ish words of `text` in order, found from literal anchors (fast on big texts)."""
    low = text.translate(_LOWER)
    starts: set[int] = set()
    for anchor in _NAME_ANCHORS:
        at = low.find(anchor)
        while at >= 0:
            starts.add(at)
            at = low.find(anchor, at + 1)
    found: list[tuple[int, int]] = []
    reach = -1
    for at in sorted(starts):
        if at < reach:
            continue
        if low.startswith("key", at):
            before = low[max(0, at - 16) : at]
            before = before[:-1] if before.endswith(("_", "-", ".", " ")) else before
            after = text[at + 3 : at + 4]
            if before.endswith(_KEY_PREFIXES) and not ("a" <= after <= "z"):
                found.append((at, at + 3))
                reach = at + 3
            continue
        word = _NAME_WORD.match(text, at)
        if word:
            found.append(word.span())
            reach = word.end()
    return found


_SECRET_WORD_VALUES = frozenset(
    ("password", "passwd", "pwd", "secret", "token", "current-password", "new-password", "api_key", "apikey")
)
# A package's version or range (`"jsonwebtoken": "~9.0.2"`): a dependency named like a secret.
_VERSION = _Lazy(r"[~^<>=v]{0,2}\d+(?:\.\d+){1,3}(?:[\-+][\w.]+)?")


def _not_secret_value(value: str, *, bare: bool, name: str, loose: bool, after: str) -> bool:
    """Is the value given to a secret-ish name a reference, a placeholder, code or prose?"""
    if len(value) <= 3 or _reference(value) or "[REDACTED" in value:
        return True
    if value.lower() in _SECRET_WORD_VALUES or _VERSION.fullmatch(value):
        return True  # <input name="password">, a form field's autocomplete; a version
    if _INTERPOLATION.search(value):
        return True  # f"Bearer {token}", "${DB_PASSWORD}" inside a string
    if value.startswith(("/", "~/", "./")) and _path_like(value):
        return True  # a file holding the secret, not the secret
    if not bare:
        return False
    if _is_code(value, name, after):
        return True
    if _AUTH_SCHEME.fullmatch(value) and sum(c.isupper() for c in value) >= 2 and name.lower().endswith("auth"):
        return True  # "auth is OIDC", "auth: mTLS": how one signs in, not a secret
    return loose and _plain_word(value)


# An acronym or short name an "auth" is said to be: OIDC, SAML, OAuth2, mTLS (a credential is longer).
_AUTH_SCHEME = _Lazy(r"[A-Za-z]{2,6}\d?")


# Where else a secret-ish name's value is written, when no `name = value` follows the name.
# A call or an argument list: set_password("…"), define('DB_PASSWORD', '…'), os.Setenv("API_TOKEN", "…"),
# HTTPBasicAuth('user', '…'), auth=('user', '…').
_CALL_VALUE = _Lazy(
    r"(?P<close>\\?[\"'])?[ \t]*(?:(?::?=|=>)[ \t]*)?"
    r"(?:(?P<paren>\()[ \t]*(?:(?P<uq>[\"'])[^\"'\n]{0,100}(?P=uq)[ \t]*,[ \t]*)?|(?P<comma>,)[ \t]*)" + _VALUE
)
# A name/value pair: the name is itself the value of a `name`/`key` field and the value follows in a
# `value` field: {"name": "DB_PASSWORD", "value": "…"}, `- name: API_TOKEN` + `value: …` (Kubernetes,
# ECS), ParameterKey=DbPassword,ParameterValue=…
_PAIR_BEFORE = _Lazy(r"(?i)(?:name|key)\\?[\"']?[ \t]*[:=][ \t]*\\?[\"']?$")
_PAIR_VALUE = _Lazy(
    r"\\?[\"']?[ \t]*(?:,[ \t]*|\r?\n[ \t]*(?:-[ \t]+)?)\\?[\"']?[A-Za-z]{0,20}(?i:value)\\?[\"']?[ \t]*[:=][ \t]*" + _VALUE
)
# A Terraform variable named like a secret: variable "db_password" { … default = "…" }.
_TF_BEFORE = _Lazy(r"\bvariable[ \t]+\"$")
_TF_DEFAULT = _Lazy(r"\"[ \t]*\{[^{}]{0,400}?\bdefault[ \t]*=[ \t]*" + _VALUE)
# A value after white space only: PASSWORD 'x' (SQL), "log in with password x".
_SPACED_VALUE = _Lazy(r"[ \t]+" + _VALUE)
# A YAML block scalar: `password: |` (or `>-`, `!vault |`) and the more indented lines under it.
_BLOCK_SCALAR = _Lazy(r"\\?[\"']?[ \t]*:[ \t]*(?:![\w!.\-]{0,40}[ \t]+)?[|>][+\-]?[1-9]?[+\-]?[ \t]*(?:#[^\n]*)?(?=\r?\n)")
MAX_BLOCK_LINES = 50  # lines of a YAML block scalar that are masked
# Strings joined to a quoted value on the next line: "…" +\n "…", "…" .\n "…", "…\<newline>…".
_CONTINUED = _Lazy(
    r"[ \t]*(?:[+.][ \t]*\r?\n[ \t]*|\r?\n[ \t]*[+.][ \t]*)(?P<q>[\"'])(?P<v>[^\"'\n]{1,2000}+)(?P=q)"
)
_CFN_TAGS = ("!Ref", "!GetAtt", "!Sub", "!ImportValue", "!FindInMap", "!Join", "!If", "!Select")


def _secretish(value: str) -> bool:
    """A quoted string given to a secret-ish name without `=` (an argument, after a space) is its secret
    unless it reads as a word, a label or a path: no digit, no symbol, nothing random."""
    if len(value) < 4 or _plain_word(value) or " " in value.strip() or _reference(value):
        return False
    if any(c.isdigit() or not (c.isalnum() or c in "_-./") for c in value):
        return not (value.startswith(("/", "~/", "./")) and _path_like(value))
    return looks_random(value, min_len=12)


def _password_like(value: str) -> bool:
    """A bare word that can only be a password: 8+ characters, letters and digits, mixed case or a symbol,
    not made of words, not a path, URL or digest."""
    if not 8 <= len(value) <= 200 or "/" in value or ":" in value or value.startswith("-"):
        return False
    if "[REDACTED" in value or _reference(value):
        return False
    letters = any(c.isalpha() for c in value)
    digits = any(c.isdigit() for c in value)
    mixed = any(c.islower() for c in value) and any(c.isupper() for c in value)
    symbol = any(not (c.isalnum() or c in "_-.") for c in value)
    if not (letters and digits and (mixed or symbol)):
        return False
    return not _wordy(re.sub(r"[^A-Za-z0-9]", "", value)) or looks_random(value, min_len=8)


def _given_to(value: str) -> bool:
    """A value said after "to" ("set the password to …") is a secret only if it could be nothing else:
    a password or a random run, or letters and digits with a symbol no name holds."""
    if _password_like(value) or looks_random(value):
        return True
    odd = any(not (c.isalnum() or c in "_-./:") for c in value)
    return len(value) >= 8 and odd and any(c.isalpha() for c in value) and any(c.isdigit() for c in value)


def _value_span(match: re.Match[str]) -> tuple[str, int, int]:
    group = next(g for g in _VALUE_GROUPS if match.group(g) is not None)
    start, end = match.span(group)
    return group, start, end


def _block_scalar(text: str, line_start: int, at: int) -> list[tuple[int, int]]:
    """The content of the lines of a YAML block scalar that starts after `at`, indented more than the
    line at `line_start` (an encrypted Ansible vault is kept: it is no secret)."""
    indent = len(text[line_start:at]) - len(text[line_start:at].lstrip(" \t-"))
    spans: list[tuple[int, int]] = []
    pos = text.find("\n", at)
    for _ in range(MAX_BLOCK_LINES):
        if pos < 0:
            break
        start = pos + 1
        end = text.find("\n", start)
        end = len(text) if end < 0 else end
        line = text[start:end]
        stripped = line.strip()
        lead = len(line) - len(line.lstrip(" \t"))
        if stripped and lead <= indent:
            break
        if not spans and stripped.startswith("$ANSIBLE_VAULT"):
            return []
        if stripped:
            spans.append((start + lead, start + len(line.rstrip())))
        pos = end if end < len(text) else -1
    return spans


def _other_value(text: str, start: int, end: int, name: str) -> tuple[list[tuple[int, int]], int]:
    """Spans of the value of the name text[start:end] written other than `name = value` (see above),
    and where the search may go on."""
    line_start = text.rfind("\n", 0, start) + 1
    block = _BLOCK_SCALAR.match(text, end)
    if block:
        spans = _block_scalar(text, line_start, block.end())
        return spans, (spans[-1][1] if spans else block.end())
    for before, pattern in ((_PAIR_BEFORE, _PAIR_VALUE), (_TF_BEFORE, _TF_DEFAULT)):
        if before.search(text, max(0, start - 40), start):
            found = pattern.match(text, end)
            if found:
                group, vstart, vend = _value_span(found)
                value = text[vstart:vend]
                if not _not_secret_value(value, bare=group == "value", name=name, loose=True, after=text[vend : vend + 1]):
                    return [(vstart, vend)], found.end()
    call = _CALL_VALUE.match(text, end)
    if call and (call.group("paren") or call.group("close")):
        group, vstart, vend = _value_span(call)
        if group != "value" and _secretish(text[vstart:vend]):
            return [(vstart, vend), *_continued(text, call.end())], call.end()
    spaced = _SPACED_VALUE.match(text, end)
    if spaced and not name.startswith("-"):
        group, vstart, vend = _value_span(spaced)
        value = text[vstart:vend]
        if group == "value":
            value = value.rstrip(",.;:")
            vend = vstart + len(value)
            if _password_like(value) and text[vend : vend + 1] not in ("=", "("):
                return [(vstart, vend)], vend
        elif _secretish(value):
            return [(vstart, vend)], spaced.end()
    return [], end


def _continued(text: str, at: int) -> list[tuple[int, int]]:
    """Spans of the strings joined to a quoted value that ended at `at` (a secret split over lines)."""
    spans = []
    for _ in range(20):
        more = _CONTINUED.match(text, at)
        if not more:
            break
        spans.append(more.span("v"))
        at = more.end()
    return spans


def _assignments(text: str) -> str:
    """Mask the value given to every secret-ish name: key=value, key: value, "key": "value",
    --key value, key is value. Anchored on the secret word, so each is looked at once."""
    spans: list[tuple[int, int]] = []
    done = -1
    size = len(text)
    for word_start, word_end in _name_words(text):
        if word_start < done:
            continue
        start, floor = word_start, max(0, word_start - 60)
        while start > floor and text[start - 1] in _NAME_CHARS:
            start -= 1
        end, ceiling = word_end, min(size, word_end + 60)
        while end < ceiling and text[end] in _NAME_CHARS:
            end += 1
        done = end
        while end > word_end and text[end - 1] in ".-":  # "the password." is not part of a name
            end -= 1
        name = text[start:end]
        if _NOT_SECRET_NAME.search(name) or _ARN_BEFORE.search(text, max(0, start - 100), start):
            continue  # token_ttl, password_reset_url, SECRET_KEY_FILE: about a secret, not one
        flag = name.startswith("-") and (start == 0 or text[start - 1] in " \t\n\"'=")
        match = (_FLAG_ASSIGN if flag else _ASSIGN).match(text, end)
        if not match:
            raw = _RAW_ASSIGN.match(text, end)  # a random value that starts with a bracket: a Django key
            if raw and looks_random(raw.group("raw"), min_len=16):
                spans.append(raw.span("raw"))
                done = raw.end()
                continue
            if not flag:
                found, reach = _other_value(text, start, end, name)
                if found:
                    spans.extend(found)
                    done = max(done, reach)
            continue
        tag = (match.groupdict().get("tag") or "").strip()
        if tag.startswith(_CFN_TAGS):
            continue  # password: !Ref DbPassword: a reference to a parameter
        sep = match.group("sep")
        if sep == ">" and text[start - 1 : start] != "<":
            continue
        group = next(g for g in _VALUE_GROUPS if match.group(g) is not None)
        value_start, value_end = match.span(group)
        match_end = match.end()
        if group == "value":  # "my password: DB_PASSWORD='…'": the value is the next name's
            nested = _NESTED_ASSIGN.match(text, value_start)
            if nested:
                group = next(g for g in _VALUE_GROUPS if nested.group(g) is not None)
                value_start, value_end = nested.span(group)
                match_end = nested.end()
        if group == "value":  # sentence punctuation after a bare value is not part of it
            while value_end > value_start and text[value_end - 1] in ",.;:":
                value_end -= 1
        value = text[value_start:value_end]
        after = text[value_end : value_end + 1]
        if group == "value" and _NEXT_ASSIGN.match(text, value_end):
            done = value_start  # "db-pw: db_pw = '…'": the word is the next name, whose value is looked at next
            continue
        if "\n" in sep and (value.endswith(":") or after not in ("", "\n", "\r")):
            continue  # the next line is a key of its own (YAML), or code: not this name's value
        sep = sep.split()[0] if sep.strip() else ""  # "is now", "was actually": judged as "is", "was"
        loose = sep in _LOOSE_SEPARATORS or bool(match.group("more"))
        if value.startswith("-") and (flag or loose):
            continue  # the next flag, not a value
        bare = group == "value"
        if not bare and sep in ("is", "was", "are", "->") and _plain_word(value):
            continue
        if _not_secret_value(value, bare=bare, name=name, loose=loose, after=after):
            continue
        if sep == "to" and not _given_to(value):
            continue  # "switch the auth token to OAuth2": a value said after "to" must be no name
        if bare and after in _BRACKETS:  # a bracket inside a random value (a Django key) does not end it
            raw = _RAW_VALUE.match(text, value_start)
            if raw and looks_random(raw.group(0), min_len=16):
                value_end = raw.end()
        spans.append((value_start, value_end))
        done = max(match_end, value_end)
        if not bare:  # "…" + "…" on the next line: one secret split over lines
            joined = _continued(text, match_end)
            spans.extend(joined)
            done = max([done, *(e for _s, e in joined)])
    return _replace_spans(text, spans, MASK)


# Markdown tables: a cell under a header named like a secret (| env | password |), or the cell after
# one that names a secret (| DB_PASSWORD | … |).
_TABLE_SEPARATOR = _Lazy(r"[ \t]*\|?(?:[ \t]*:?-{3,}:?[ \t]*\|)+[ \t]*(?::?-{3,}:?[ \t]*)?")
_CELL_NAME = _Lazy(r"[`*\"']{0,2}[A-Za-z][\w.\-]{0,60}[`*\"']{0,2}")
MAX_TABLE_ROWS = 500


def _secret_name(cell: str) -> bool:
    """Does a table cell (a header, a first column) name a secret: `password`, `API token`, `DB_PASS`?"""
    cell = cell.strip().strip("`*\"'")
    if not cell or len(cell) > 60 or len(cell.split()) > 3 or "[REDACTED" in cell:
        return False
    name = re.sub(r"[ \t]+", "_", cell)
    return bool(_name_words(name)) and not _NOT_SECRET_NAME.search(name)


def _cell_value(text: str, start: int, end: int) -> tuple[int, int] | None:
    """The span of a table cell's value, if it can be a secret (not empty, a placeholder, words)."""
    cell = text[start:end]
    stripped = cell.strip()
    start += cell.find(stripped) if stripped else 0
    while stripped[:1] in ("`", '"', "'") and stripped[-1:] == stripped[:1] and len(stripped) > 2:
        stripped = stripped[1:-1]
        start += 1
    if " " in stripped or len(stripped) <= 3 or _plain_word(stripped) or _reference(stripped):
        return None
    if "[REDACTED" in stripped or (_wordy(stripped) and not any(c.isdigit() for c in stripped)):
        return None
    return start, start + len(stripped)


def _tables(text: str) -> str:
    spans: list[tuple[int, int]] = []
    columns: set[int] = set()
    previous: tuple[int, int] | None = None  # the row before this one, when it is a table row
    at = 0
    rows = 0
    while at < len(text):
        end = text.find("\n", at)
        end = len(text) if end < 0 else end
        line = text[at:end]
        if not line.lstrip().startswith("|") or line.count("|") < 2:
            columns, previous, rows = set(), None, 0
            at = end + 1
            continue
        rows += 1
        if _TABLE_SEPARATOR.fullmatch(line):
            if previous is not None:  # the row above is the header
                header = text[previous[0] : previous[1]].strip().strip("|").split("|")
                columns = {i for i, cell in enumerate(header) if _secret_name(cell)}
            at = end + 1
            continue
        if rows <= MAX_TABLE_ROWS:
            cells: list[tuple[int, int]] = []
            first = at + line.index("|") + 1
            while (bar := text.find("|", first, end)) >= 0:
                cells.append((first, bar))
                first = bar + 1
            for i, (cell_start, cell_end) in enumerate(cells):
                named = i > 0 and _secret_name(text[cells[i - 1][0] : cells[i - 1][1]])
                if (i in columns or named) and (span := _cell_value(text, cell_start, cell_end)):
                    spans.append(span)
        previous = (at, end)
        at = end + 1
    return _replace_spans(text, spans, MASK)


# A Kubernetes Secret: every value of its `data:` (base64) and `stringData:` maps is a secret,
# whatever its key is called.
_SECRET_DATA = _Lazy(r"(?m)^(?P<indent>[ \t]*)(?:data|stringData):[ \t]*$")
_SECRET_KIND = _Lazy(r"(?m)^[ \t]*kind:[ \t]*[\"']?Secret[\"']?[ \t]*$")
_DATA_ENTRY = _Lazy(r"[ \t]+[\"']?[\w.\-]{1,253}[\"']?:[ \t]*(?P<q>[\"']?)(?P<value>[^\s\"'#][^\n\"']*)")
MAX_SECRET_ENTRIES = 200


def _k8s_secrets(text: str) -> str:
    spans: list[tuple[int, int]] = []
    docs = [0, *(m.start() for m in re.finditer(r"\n---", text)), len(text)]  # YAML documents
    kinds: dict[int, bool] = {}
    for data in _SECRET_DATA.finditer(text):
        doc = bisect.bisect_right(docs, data.start()) - 1
        if doc not in kinds:
            kinds[doc] = _SECRET_KIND.search(text, docs[doc], docs[min(doc + 1, len(docs) - 1)]) is not None
        if not kinds[doc]:
            continue
        indent = len(data.group("indent"))
        for at, line_end in islice(_lines_from(text, data.end() + 1), MAX_SECRET_ENTRIES):
            entry = _DATA_ENTRY.match(text, at)
            lead = text[at : line_end]
            if entry is None or entry.end() > line_end or len(lead) - len(lead.lstrip()) <= indent:
                break
            value = entry.group("value").rstrip()
            if not _reference(value) and "[REDACTED" not in value:
                spans.append((entry.start("value"), entry.start("value") + len(value)))
    return _replace_spans(text, spans, MASK)


def _lines_from(text: str, at: int) -> Iterator[tuple[int, int]]:
    """(start, end) of each line of `text` from offset `at` on (end: its newline, or the text's end)."""
    while at < len(text):
        end = text.find("\n", at)
        end = len(text) if end < 0 else end
        yield at, end
        at = end + 1


def _line_around(text: str, match: re.Match[str]) -> str:
    """The whole line (or lines) of `text` a match lies on: where the words that say what it is are."""
    start = text.rfind("\n", 0, match.start()) + 1
    end = text.find("\n", match.end())
    return text[start : len(text) if end < 0 else end]


def _replace_spans(text: str, spans: Iterable[tuple[int, int]], mask: str) -> str:
    out: list[str] = []
    last = 0
    for start, end in sorted(spans):
        if start < last:
            continue
        out.append(text[last:start])
        out.append(mask)
        last = end
    if not out:
        return text
    out.append(text[last:])
    return "".join(out)


# "Authorization: Bearer abc", {'Authorization': 'Basic abc'}, "Authorization:token abc".
_AUTH_HEADER = _Lazy(
    r"(?i)\b((?:proxy-)?authorization\\?['\"]?\s*[:=]\s*\\?['\"]?"
    r"(?:(?:bearer|basic|token|digest|bot|negotiate|ntlm|apikey|sso-key|dpop|hmac|aws4-hmac-sha256"
    r"|[a-z][a-z0-9_\-]{1,30}(?=[ \t]+(?:[a-z0-9._~+/=\-]{16,}|\[redacted)))\s+)?)"
    r"(?!(?:bearer|basic|token|digest)\b)([^\s'\"\\`]{6,}+)"
)
_BEARER = _Lazy(r"(?i)\b((?:bearer|token)\s+)([A-Za-z0-9._~+/=\-]{16,}+)")
_COOKIE = _Lazy(r"(?i)\b((?:set-)?cookie\s*:\s*)([A-Za-z0-9_\-.%]+=[^\r\n'\"\\]*)")
_CURL_COOKIE = _Lazy(
    r"(?P<lead>\bcurl\b[^\n|;&]*?\s(?:-b|--cookie)(?:\s+|=))(?P<q>['\"]?)(?P<value>[^\s'\"]+)"
)
# scheme://user:password@host — keep the user and host, drop the password (which may hold @ and /).
_URL_PASSWORD = _Lazy(
    r"(?i)(?<![a-z0-9+.\-])([a-z][a-z0-9+.\-]{0,30}://[^\s:/@'\"<>`]{0,200}:)"
    r"(?!\d{1,5}(?:[/?#]|$|\s))([^\s'\"<>`]{1,300})(@(?=[A-Za-z0-9\[._\-]))"
)
# scheme://TOKEN@host: a token as the user name (Sentry DSNs, git remotes with a token).
_URL_TOKEN_USER = _Lazy(r"(?<=://)([A-Za-z0-9_\-.~%]{12,200})(?=@[A-Za-z0-9\[._\-])")
# ?token=…&sig=… query parameters named like secrets.
_QUERY_SECRET = _Lazy(
    r"(?i)(?<=[?&;])((?:access_token|refresh_token|id_token|auth_token|token|api[_\-]?key|apikey|key|"
    r"secret|client_secret|password|passwd|pwd|auth|sig|signature|code|session|sessionid|"
    r"x-amz-signature|x-amz-security-token|x-amz-credential|x-goog-signature|x-goog-credential)=)"
    r"([^&\s#'\"<>`]{8,})"
)
_WEAK_QUERY_NAMES = {"key=", "code=", "session=", "auth="}
# curl -u user:password, --user, --proxy-user: keep the user, drop the password.
_USER_FLAG = _Lazy(
    r"(?<![\w-])(?P<lead>(?:-u|-U|--user|--proxy-user)(?:\s+|=)[\"']?[^\s:'\"@/]+:)(?P<value>[^\s'\"]+)"
)
# mysql -pPASSWORD (attached), docker/podman/helm/az login -p PASSWORD, sshpass -p PASSWORD,
# and .netrc lines (machine HOST login USER password PASSWORD, also over several lines).
_SHORT_PASSWORD = _Lazy(
    r"(?P<lead>\b(?:mysql\w*|mariadb\w*)\b[^\n|;&]*?\s-p"
    r"|\b(?:(?:docker|podman|buildah|skopeo|oras|nerdctl|az|helm(?:\s+registry)?)\s+login|sshpass)\b"
    r"[^\n|;&]*?\s-p\s+"
    r"|(?<!\S)login[ \t]+\S+\s+password[ \t]+)"
    r"(?P<q>['\"]?)(?P<value>[^\s'\"]+)"
)
_ENV_LINE = _Lazy(
    r"(?m)^(?P<lead>[ \t]*(?:export\s+|set\s+|setx\s+|\$env:)?[A-Z][A-Z0-9_]*"
    r"(?:KEY|SECRET|TOKEN|PASS|PASSWORD|PWD|AUTH|CREDENTIALS?|PRIVATE|SALT|DSN|COOKIE|SESSION)"
    r"[A-Z0-9_]*[ \t]*=[ \t]*)(?P<value>[^\n]+?)[ \t]*$"
)
# docker config.json auths, npm/yarn configs: "auth": "dXNlcjpwYXNz", "identitytoken": "…".
_JSON_AUTH = _Lazy(
    r"(?i)(\\?[\"'](?:auth|identitytoken|registrytoken|npmAuthToken|npmAuthIdent)\\?[\"']\s*:\s*\\?[\"'])"
    r"([^\"'\\\s]{6,})"
)

# More command lines that carry a password as an argument: (needles, where the value starts). Each is
# its own small pattern, compiled only when its needle is in the text (a hook pays for what it meets).
_VALUE_AFTER = r"(?P<q>['\"]?)(?P<value>[^\s'\"]+)"
_COMMAND_SPECS: list[tuple[tuple[str, ...], str]] = [
    (
        ("mongo", "rdesktop", "psexec"),
        r"\b(?:mongo|mongosh|mongodump|mongorestore|mongoexport|mongoimport|rdesktop|psexec(?:64)?)\b"
        r"[^\n|;&]{0,200}?[ \t]-p[ \t]+",
    ),
    (("sshpass",), r"\bsshpass[ \t]+-p(?=[^\s\-])"),
    (("redis-cli",), r"\bredis-cli\b[^\n|;&]{0,200}?[ \t]-a[ \t]+"),
    (("ldap",), r"\bldap\w+\b[^\n|;&]{0,200}?[ \t]-w[ \t]+"),
    (("sqlcmd", "bcp", "osql", "isql"), r"\b(?:sqlcmd|bcp|osql|isql)\b[^\n|;&]{0,200}?[ \t]-P[ \t]*"),
    (
        ("zip", "7z", "rar"),
        r"\b(?:zip|unzip|zipcloak|7z|7za|7zr|rar|unrar)\b[^\n|;&]{0,200}?[ \t](?:-P[ \t]+|-p(?=[^\s\-]))",
    ),
    (("storepass", "keypass"), r"(?<![\w\-])-(?:src|dest|new)?(?:store|key)pass[ \t]+"),
    (("mysqladmin",), r"\bmysqladmin\b[^\n|;&]{0,200}?[ \t]password[ \t]+"),
    (("securestring",), r"\b(?i:convertto-securestring)(?:[ \t]+-(?i:string))?[ \t]+"),
    (("xfreerdp",), r"\bxfreerdp\b[^\n|;&]{0,300}?[ \t]/p:"),
    (("smbclient",), r"\bsmbclient\b[^\n|;&]{0,200}?[ \t](?:-U[ \t]*|--user=)[^\s%'\"]+%"),
    (("lftp",), r"\blftp\b[^\n|;&]{0,200}?[ \t]-u[ \t]+[^\s,'\"]+,"),
    (("net user", "net  user"), r"\b(?i:net)[ \t]+(?i:user)[ \t]+[^\s/]+[ \t]+(?=[^\s/*])"),
    (("add-generic-password", "add-internet-password"), r"\bsecurity[ \t]+add-(?:generic|internet)-password\b[^\n|;&]{0,300}?[ \t]-w[ \t]+"),
    (("snmp",), r"\bsnmp\w*\b[^\n|;&]{0,200}?[ \t]-[AX][ \t]+"),
    (("openssl",), r"\bopenssl[ \t]+enc\b[^\n|;&]{0,200}?[ \t]-k[ \t]+"),
    (
        ("htpasswd",),
        r"\bhtpasswd[ \t]+-\w*b\w*(?:[ \t]+-\w+)*(?:[ \t]+[^\s\-]\S*){1,2}?[ \t]+(?=\S+[ \t]*(?:$|[\n|;&>]))",
    ),
    (("nmcli",), r"\bnmcli\b[^\n|;&]{0,200}?[ \t]password[ \t]+"),
    (("wpa_passphrase",), r"\bwpa_passphrase[ \t]+\S+[ \t]+"),
    (("requirepass", "masterauth"), r"(?<![\w\-])(?:requirepass|masterauth)[ \t]+"),
    (("ssh-keygen",), r"\bssh-keygen\b[^\n|;&]{0,200}?[ \t]-[NP][ \t]*"),
    (("identified",), r"\b(?i:identified(?:[ \t]+with[ \t]+\w+)?[ \t]+by(?:[ \t]+password)?)[ \t]+"),
    (("net use", "net  use"), r"\b(?i:net)[ \t]+(?i:use)\b[^\n|;&]{0,200}?[ \t]/(?i:u|user):[^\s/]+[ \t]+(?=[^\s/*])"),
    (("rabbitmqctl",), r"\brabbitmqctl[ \t]+(?:add_user|change_password)[ \t]+[^\s\-]\S*[ \t]+"),
    (("mc alias", "mc config"), r"\bmc[ \t]+(?:alias[ \t]+set|config[ \t]+host[ \t]+add)[ \t]+\S+[ \t]+\S+[ \t]+\S+[ \t]+"),
    (("passwd",), r"\bopenssl[ \t]+passwd\b(?:[ \t]+-\w+)*[ \t]+(?=[^\s\-])"),
    (("bw unlock", "bw login"), r"\bbw[ \t]+(?:unlock|login[ \t]+[^\s\-]\S*)[ \t]+(?=[^\s\-])"),
    (
        ("mosquitto", "ipmitool", "ncftp", "influx"),
        r"\b(?:mosquitto_(?:pub|sub|rr)|ipmitool|ncftp\w*|influx)\b[^\n|;&]{0,200}?[ \t](?:-P|--pw)[ \t]+",
    ),
    (("influx",), r"\binflux\b[^\n|;&]{0,200}?[ \t](?:-p|--password)[ \t]+"),
    (("ncftp",), r"\bncftp\w*\b[^\n|;&]{0,200}?[ \t]-p[ \t]+"),
    (("racadm",), r"\bracadm\b[^\n|;&]{0,200}?[ \t]-p[ \t]+"),
    (("gh secret", "glab variable"), r"\b(?:gh[ \t]+secret[ \t]+set|glab[ \t]+variable[ \t]+(?:set|update))\b[^\n|;&]{0,200}?[ \t](?:--body|-b|--value|-v)[ \t=]+"),
    (("snmp",), r"\bsnmp\w*\b[^\n|;&]{0,200}?[ \t]-c[ \t]+"),  # an SNMP community string is its password
    (("oathtool",), r"\boathtool\b[^\n|;&]{0,200}?[ \t](?:-b[ \t]+|--base32[ \t]+)?(?=[A-Za-z2-7=]{16,}(?!\S))"),
]
# Prose that gives a login as USER / PASSWORD: "log in with admin / ToN!UC6KwM1n" ("creds: ops/pw" is
# an assignment, masked whole by `_assignments`).
_LOGIN_PAIR = _Lazy(
    r"(?P<lead>\b(?i:log(?:ged)?[ \t\-]?(?:in|on)|sign(?:ed)?[ \t\-]?in)\b[^\n/]{0,40}?"
    r"[ \t:(][\w.@+\-]{1,64}[ \t]*/[ \t]*)(?P<q>['\"]?)(?P<value>[^\s'\"/,;)]{4,200})"
)


# A list of logins, one a line (or one in a sentence, " / " spaced): "Grafana: admin / S3cr3t!pw",
# "- staging db: app / …". The value must
# read as a password whatever surrounds it ("Branches: main / release-2.3" stays).
_LISTED_LOGIN = _Lazy(
    r"(?m)(?P<lead>^[ \t]*(?:[-*+][ \t]+)?[A-Za-z][\w .\-]{0,30}:[ \t]*[\w.@+\-]{1,64}[ \t]*/[ \t]*"
    r"|(?<!\S)[A-Za-z][\w .\-]{0,30}:[ \t]*[\w.@+\-]{1,64}[ \t]+/[ \t]+)"  # in a sentence: spaced, as people write it
    r"(?P<q>['\"]?)(?P<value>[^\s'\"/,;)]{8,200})"
)


def _login_masked(match: re.Match[str], value: str) -> str:
    """A login's match with its password (`value`, the start of the `value` group) masked."""
    return f"{match.group('lead')}{match.group('q')}{MASK}{match.group('value')[len(value):]}"


def _listed_login(match: re.Match[str]) -> str:
    value = match.group("value").rstrip(".")
    if not _password_like(value):
        return match.group(0)
    return _login_masked(match, value)


def _login_pair(match: re.Match[str]) -> str:
    """The password of a login given in prose; a value with no digit or symbol is a word
    ("sign in with GitHub / Google", "log in to CI/CD"), not a password."""
    value = match.group("value").rstrip(".")
    if not _fed_value(value) or not re.search(r"[\d!@#$%^&*+=?~]", value):
        return match.group(0)
    return _login_masked(match, value)


# A passphrase is words: after its name and a colon, or in quotes after its name, every word of it
# ("the vault passphrase is: correct horse battery staple", 'GPG passphrase "blue-elephant-dances"',
# "seed phrase: abandon ability able ..."). Without a colon or quotes it is prose ("the passphrase
# is stored in the vault").
_PASSPHRASE = _Lazy(
    r"(?P<lead>\b(?i:pass[ \t\-]?phrase|(?:seed|recovery|secret|mnemonic)[ \t]+phrase|mnemonic)\b"
    r"(?:[ \t]+(?:is|was))?(?:[ \t]*:[ \t]*(?=[a-z\"'])|[ \t]+(?=[\"']))[ \t]*)"
    r"(?:(?P<q>[\"'])(?P<quoted>[^\"'\n]{4,200})(?P=q)|(?P<words>[a-z]+(?:[ \t\-]+[a-z]+){2,23}))"
)


def _passphrase(match: re.Match[str]) -> str:
    quote = match.group("q") or ""
    value = match.group("quoted") or match.group("words")
    if _NOT_A_SECRET.match(value) or "[REDACTED" in value:
        return match.group(0)
    return f"{match.group('lead')}{quote}{MASK}{quote}"


# sqlplus scott/tiger@orcl: the password ends at the @ of the connect string.
_SQLPLUS = _Lazy(
    r"(?P<lead>\b(?:sqlplus|rman|expdp|impdp)\b[ \t]+(?:-\w+[ \t]+)*[A-Za-z_][\w$#]*/)(?P<q>)(?P<value>[^\s'\"@]+)"
)
# ~/.pgpass lines: host:port:database:user:password.
_PGPASS_LINE = _Lazy(
    r"(?P<lead>(?<![\w.\-])[\w.\-*]{1,253}:(?:\d{1,5}|\*):[\w.\-*]{1,63}:[\w.\-*@]{1,63}:)(?P<q>)(?P<value>[^\s'\"]+)"
)


def _command_password(match: re.Match[str]) -> str:
    value = match.group("value")
    if not _fed_value(value) or not any(c.isalnum() for c in value):
        return match.group(0)
    if match.group("lead")[:3].lower() == "net" and _plain_word(value):
        return match.group(0)  # "the net user base grows": prose, not `net user NAME PASSWORD`
    quote = match.group("q") or ""
    if quote:  # a quoted value may hold spaces: mask up to its closing quote
        return f"{match.group('lead')}{quote}{MASK}"
    return f"{match.group('lead')}{MASK}"


# A password fed to a command on its input: `echo 'pw' | sudo -S …`, `printf 'pw\n' | passwd --stdin bob`,
# `echo 'bob:pw' | chpasswd`, `… | docker login --password-stdin`, `sudo -S … <<< 'pw'`, a here-doc.
_FED_CONSUMER = _Lazy(
    r"\bsudo\b[^\n|;&]{0,200}?[ \t](?:-[A-Za-z]*S[A-Za-z]*|--stdin)(?![\w\-])"
    r"|--(?:password|passphrase|pass|token|secret|key)-?(?:stdin|from-stdin)(?![\w\-])|--with-token(?![\w\-])"
    r"|--passphrase-fd[ \t=]+0(?!\d)|[ \t]-pass(?:in)?[ \t]+(?:stdin|fd:0)(?![\w\-])"
    r"|(?<![\w\-.])(?:passwd|chpasswd|chgpasswd|smbpasswd|vncpasswd|ldappasswd|kinit|cryptsetup|su|runas)"
    r"(?![\w\-.])"
    r"|\bpass[ \t]+insert\b|\bkeyring[ \t]+set\b|\bsecret-tool[ \t]+store\b|\bvault[ \t]+login[ \t]+-(?![\w\-])"
    r"|\bop[ \t]+(?:signin|account[ \t]+add)\b|\bbw[ \t]+(?:unlock|login)\b"
)
_FED_NEEDLES = (
    "sudo", "stdin", "--with-token", "passphrase-fd", "-pass", "passwd", "kinit", "cryptsetup", "su", "runas",
    "insert", "keyring", "secret-tool", "vault", "op signin", "op account", "bw unlock", "bw login",
)  # fmt: skip
# What feeds a pipe: the arguments of echo/printf/yes/Write-Output before it.
_FEEDER = _Lazy(r"(?<![\w\-])(?:echo|printf|yes|print|Write-Output|write-output)(?=[ \t])")
_QUOTED_WORD = (
    r"(?:\\[\"'](?P<e>[^\"'\\\n]*)\\[\"']|\$?'(?P<s>[^'\n]*)'|\"(?P<d>(?:[^\"\\\n]|\\.)*)\""
    r"|(?P<b>[^\s|;&()<>'\"\\]+))"
)
_WORD = _Lazy(r"[ \t]+" + _QUOTED_WORD)
_FORMAT_ONLY = _Lazy(r"(?:%[-+ #0-9.]*[sdbq]|\\[nrt0]|[ \t])*")
_HERE_STRING = _Lazy(r"<<<[ \t]*" + _QUOTED_WORD)
_HERE_DOC = _Lazy(r"(?<!<)<<(?!<)(?P<dash>-?)[ \t]*(?P<q>['\"]?)(?P<tag>[A-Za-z_][A-Za-z0-9_]{0,30})(?P=q)")
_USER_PREFIX = _Lazy(r"[a-z_][a-z0-9_.\-]{0,31}:")  # chpasswd's bob:pw keeps bob
MIN_FED = 4  # a shorter word fed to a password prompt is a placeholder
MAX_HERE_DOC = 20  # lines of a here-doc fed to a password prompt that are masked


def _fed_value(value: str) -> bool:
    """Is a word fed to a password prompt a secret (not a variable, a flag, a format)?"""
    if len(value) < MIN_FED or value.startswith("-") or _FORMAT_ONLY.fullmatch(value):
        return False  # "pw", "x": a placeholder in an example, not a password
    return not _reference(value) and "[REDACTED" not in value


def _word_span(word: re.Match[str], keep_user: bool) -> tuple[int, int] | None:
    """The span of a shell word's value (inside its quotes), with a leading `user:` kept
    (`chpasswd`'s bob:pw), or None when it is not a secret."""
    group = next(g for g in ("e", "s", "d", "b") if word.group(g) is not None)
    start, end = word.span(group)
    value = word.group(group)
    user = _USER_PREFIX.match(value) if keep_user else None
    if user and user.end() < len(value):
        start += user.end()
        value = value[user.end() :]
    return (start, end) if _fed_value(value.strip()) else None


def _fed(text: str) -> str:
    """Mask what is fed to a password prompt on a command's input (see _FED_CONSUMER)."""
    spans: list[tuple[int, int]] = []
    done = -1
    for consumer in _FED_CONSUMER.finditer(text):
        line_start = text.rfind("\n", 0, consumer.start()) + 1
        line_end = text.find("\n", consumer.end())
        line_end = len(text) if line_end < 0 else line_end
        if line_end <= done:
            continue  # this line was looked at for an earlier consumer
        done = line_end
        keep_user = "chpasswd" in consumer.group(0) or "chgpasswd" in consumer.group(0)
        floor = max(line_start, consumer.start() - 600)
        pipe = text.rfind("|", floor, consumer.start())
        if pipe > floor and text[pipe - 1] != "|":  # `echo … | consumer` (not `||`)
            for feeder in _FEEDER.finditer(text, floor, pipe):
                at = feeder.end()
                while word := _WORD.match(text, at, pipe):
                    if (span := _word_span(word, keep_user)) is not None:
                        spans.append(span)
                    at = word.end()
        for here in _HERE_STRING.finditer(text, line_start, min(line_end, consumer.end() + 600)):
            if (span := _word_span(here, keep_user)) is not None:
                spans.append(span)
        doc = _HERE_DOC.search(text, line_start, min(line_end, consumer.end() + 600))
        if doc is not None:
            done = max(done, _here_doc(text, line_end, doc, spans, keep_user))
    return _replace_spans(text, spans, MASK)


def _here_doc(text: str, at: int, doc: re.Match[str], spans: list[tuple[int, int]], keep_user: bool) -> int:
    """Mask the lines of a here-doc that starts after `at` (up to MAX_HERE_DOC); where it ends."""
    tag = doc.group("tag")
    for _ in range(MAX_HERE_DOC):
        if at >= len(text):
            break
        start = at + 1
        end = text.find("\n", start)
        end = len(text) if end < 0 else end
        line = text[start:end]
        stripped = line.strip()
        if stripped == tag or (doc.group("dash") and line.lstrip("\t") == tag):
            return end
        lead = len(line) - len(line.lstrip())
        value = stripped
        user = _USER_PREFIX.match(value) if keep_user else None
        skip = user.end() if user and user.end() < len(value) else 0
        if _fed_value(value[skip:]):
            spans.append((start + lead + skip, start + lead + len(value)))
        at = end
    return at


# expect/pexpect scripts: what is sent after a password prompt is expected.
_EXPECT_PROMPT = _Lazy(
    r"(?i)\bexpect\w*[ \t]*\(?[ \t]*(?:-\w+[ \t]+)*[\"'{][^\"'}\n]{0,60}"
    r"(?:assw|passphrase|pass code|passcode|\bpin\b|token|secret)[^\"'}\n]{0,60}[\"'}]"
)
_EXPECT_SEND = _Lazy(
    r"\bsend(?:line)?[ \t]*\(?[ \t]*(?:-(?:-|\w+)[ \t]+)*(?P<q>[\"'])(?P<value>(?:(?!(?P=q))[^\n\\]|\\.){1,200}?)"
    r"(?P<end>(?:\\[rn])*)(?P=q)"
)
EXPECT_REACH = 200  # how far after the expected prompt its answer is looked for


def _expect_send(text: str) -> str:
    spans: list[tuple[int, int]] = []
    for prompt in _EXPECT_PROMPT.finditer(text):
        send = _EXPECT_SEND.search(text, prompt.end(), prompt.end() + EXPECT_REACH)
        if send is not None and _fed_value(send.group("value")):
            spans.append(send.span("value"))
    return _replace_spans(text, spans, MASK)


def _lead_value(match: re.Match[str]) -> str:
    value = match.group("value")
    if _NOT_A_SECRET.match(value) or value.startswith("-"):
        return match.group(0)
    quote = match.groupdict().get("q") or ""
    return f"{match.group('lead')}{quote}{MASK}"


_STRONG_ENV_NAME = _Lazy(
    r"SECRET|TOKEN|PASS|PWD|CREDENTIAL|AUTH|DSN|COOKIE|SALT|PRIVATE_?KEY|API_?KEY|ACCESS_?KEY"
)


# A command run with the variable set for it: `PGPASSWORD=… psql -h db`, `RESTIC_PASSWORD='…' restic …`.
_ENV_PREFIX = _Lazy(r"(?P<value>'[^']*'|\"(?:[^\"\\]|\\.)*\"|[^\s'\"]+)(?P<rest>[ \t]+[A-Za-z_./~$][^\n]*)")


_CLIS = frozenset(
    "psql pg_dump pg_restore pg_dumpall mysql mysqldump mongosh redis-cli restic borg rclone bw op vault aws az "
    "gcloud gh glab git docker podman kubectl helm terraform tofu ansible ansible-playbook npm npx pnpm yarn node "
    "python python3 uv pip ruby bundle go cargo java mvn gradle curl wget http ssh scp rsync make just sh bash "
    "zsh env sudo doppler infisical sops age gpg openssl consul nomad pulumi flyctl heroku vercel netlify".split()
)


def _runs_a_command(rest: str) -> bool:
    """Whether what follows `NAME=value` on a line is a command run with it set (`psql -h db`,
    `bw get password x`), not more words of an unquoted value (`correct horse battery`)."""
    words = rest.split()
    if not words or words[0].startswith("#"):
        return False
    program = words[0].rsplit("/", 1)[-1]
    return program in _CLIS or "/" in words[0] or any(re.match(r"--?[A-Za-z]", w) for w in words[1:])


def _env_line(match: re.Match[str]) -> str:
    lead = match.group("lead")
    name = lead.split("=")[0].split()[-1]
    command = _ENV_PREFIX.fullmatch(match.group("value"))
    if command and _runs_a_command(command.group("rest")):
        kept = _env_line(_ENV_LINE.match(f"{lead}{command.group('value')}"))  # type: ignore[arg-type]
        return kept + command.group("rest")  # the command it ran is kept
    value = re.split(r"[ \t]+#", match.group("value"))[0].strip().strip("'\"")
    if not value or _reference(value) or "[REDACTED" in value or _NOT_SECRET_NAME.search(name):
        return match.group(0)
    if _INTERPOLATION.search(value) or (
        not _STRONG_ENV_NAME.search(name) and not looks_random(value, min_len=12)
    ):
        return match.group(0)  # SETTINGS_KEY = "semantic", SORT_KEY=name
    return f"{lead}{MASK}"


def _query_secret(match: re.Match[str]) -> str:
    name, value = match.group(1), match.group(2)
    if _NOT_A_SECRET.match(value) or "[REDACTED" in value:
        return match.group(0)
    if name.lower() in _WEAK_QUERY_NAMES and not looks_random(value, min_len=12):
        return match.group(0)
    return f"{name}{MASK}"


def _url_password(match: re.Match[str]) -> str:
    if _NOT_A_SECRET.match(match.group(2)) or "[REDACTED" in match.group(0):
        return match.group(0)  # postgres://app:${DB_PASSWORD}@db, or redacted already
    return f"{match.group(1)}{MASK}{match.group(3)}"


def _url_token_user(match: re.Match[str]) -> str:
    user = match.group(1)
    return _mark("url-credential") if looks_random(user, min_len=12) else user


def _bearer(match: re.Match[str]) -> str:
    return match.group(0) if _wordy(match.group(2)) else f"{match.group(1)}{MASK}"


# (needles, pattern, replacement) in the order they run, after the shaped credentials.
_CONTEXT: list[tuple[tuple[str, ...], _Lazy, Callable[[re.Match[str]], str]]] = [
    (("://",), _URL_PASSWORD, _url_password),
    (("://",), _URL_TOKEN_USER, _url_token_user),
    (("=",), _QUERY_SECRET, _query_secret),
    (
        ("authorization",),
        _AUTH_HEADER,
        lambda m: m.group(0) if _NOT_A_SECRET.match(m.group(2)) else f"{m.group(1)}{MASK}",
    ),
    (("cookie",), _COOKIE, lambda m: f"{m.group(1)}{MASK}"),
    (("curl",), _CURL_COOKIE, _lead_value),
    (("bearer", "token"), _BEARER, _bearer),
    (("auth", "token"), _JSON_AUTH, lambda m: f"{m.group(1)}{MASK}"),
    (("=",), _ENV_LINE, _env_line),
    (("-u", "--user", "--proxy-user"), _USER_FLAG, _lead_value),
    (("mysql", "mariadb", "login", "sshpass"), _SHORT_PASSWORD, _lead_value),
    *[
        (needles, _Lazy(f"(?P<lead>{lead}){_VALUE_AFTER}"), _command_password)
        for needles, lead in _COMMAND_SPECS
    ],
    (("sqlplus", "rman", "expdp", "impdp"), _SQLPLUS, _command_password),
    (("log", "sign"), _LOGIN_PAIR, _login_pair),
    (("/",), _LISTED_LOGIN, _listed_login),
    (("phrase", "mnemonic"), _PASSPHRASE, _passphrase),
    (("pgpass",), _PGPASS_LINE, _command_password),
]


_CONTEXT_NEEDLES = frozenset(
    [needle for needles, _pattern, _replace in _CONTEXT for needle in needles] + [*_FED_NEEDLES, "send", "expect"]
)


def _context(text: str) -> str:
    present = _present(text, _CONTEXT_NEEDLES)
    for needles, pattern, replace in _CONTEXT:
        if not present.isdisjoint(needles):
            redacted = pattern.sub(replace, text)
            if redacted != text:
                text, present = redacted, _present(redacted, _CONTEXT_NEEDLES)
    if ("|" in text or "<<" in text) and not present.isdisjoint(_FED_NEEDLES):
        text = _fed(text)
    if "send" in present and "expect" in present:
        text = _expect_send(text)
    if "kind" in text and "Secret" in text:
        text = _k8s_secrets(text)
    text = _assignments(text)
    return _tables(text) if "|" in text else text


# ---------------------------------------------------------------------------
# Layer 3: entropy

_CANDIDATE = _Lazy(r"(?<![A-Za-z0-9+/_\-.~%])[A-Za-z0-9+/_\-.~%]{16,}+={0,2}")  # after `NAME=` too
_NEAR_WORD = _Lazy(
    r"(?i:key|token|secret|passw|pwd|auth|credential|(?<![a-z])api|api(?![a-z])|bearer|private|seed|wallet|mnemonic|login|"
    r"signature|cookie|session|dsn|cert)"
)
_GAP = _Lazy(r"[^A-Za-z0-9]*+(?:[A-Za-z][A-Za-z0-9_\-]*+[^A-Za-z0-9]++){0,5}+")
_ASSIGN_GAP = _Lazy(r"[^A-Za-z0-9\n]*?(?:[:=]|\bis|\bwas)[^A-Za-z0-9\n]*|\w*[ \t]{2,}|[ \t]*\((?:hex|base64)\)[ \t]*:[ \t]*")
# What comes right before a value that is a key whatever its shape (a UUID, a hex run): a token flag
# (`-t`, `--token`, `-k`), a CLI's `auth`/`login` command, a client or key made from a string.
_KEY_ARGUMENT = _Lazy(
    r"(?:(?<![\w\-])(?:-t|-k|--token|--api-key|--key|--auth-token)[ \t=]+['\"]?"
    r"|(?<![\w\-])(?:auth|login|token)[ \t]+|(?i:key|token|secret)[ \t]+"
    r"|(?<![\w\-])-H[ \t]+['\"]?[\w\-]+:[ \t]*"
    r"|(?i:client|key|token|secret|auth|api|sdk|encode|sign|init|load|connect|login)\w*\([^()\n]{0,60}?['\"]"
    # a client named after its service, given its key: Github('…'), algoliasearch('…', '…'), SendGridAPIClient('…')
    r"|(?i:github|gitlab|algoliasearch|mailgun|opencage\w*|twilio|sendgrid\w*|pinecone|openai|anthropic|cohere"
    r"|mistral\w*|groq|replicate|pusher|airtable|webclient|\w+apiclient)\([^()\n]{0,60}?['\"]"
    r"|(?i:appid|app_id|api_?key|login|token)=)$"
)
NEAR_WINDOW = 48  # how far (characters) a secret word may sit from the token it vouches for
NEAR_MIN = 16  # shortest token the near-a-secret-word rule takes
SAMPLE = 4096  # a longer token (a blob) is judged on its first characters
_SEGMENT_OF_PATH = _Lazy(r"(?P<name>[^/]+?)(?:\.[A-Za-z0-9]{1,5})?(?=/|$)")


def _slug_like(token: str) -> bool:
    """A name joined from words and short ids (`fix-the-pool-7k2m9q4x1c.md`, `all-MiniLM-L6-v2`,
    `orders-api-7d9f8b6c5d-x2k4p`): a slug, a model, a pod, not a token."""
    parts = [p for p in re.split(r"[\-_./~]", token) if p]
    if len(parts) < 2:
        return False
    return all(
        len(p) <= 4
        or p.isdigit()
        or _wordy(p)
        or (len(p) <= 12 and re.fullmatch(r"[a-z0-9]+|[A-Z0-9]+", p) is not None)
        for p in parts
    )


def _path_like(token: str) -> bool:
    """A file path or dotted name (`src/auth/tokens.py`, `com.acme.auth.TokenService`)."""
    if len(token) > 1024 or ("/" not in token and "." not in token):
        return False
    if not _PATHISH.search(token) and token.count("/") < 2 and token.count(".") < 2:
        return False
    parts = [p for p in re.split(r"[/.~]", token) if p]
    plain = sum(1 for p in parts if _wordy(p) or re.fullmatch(r"[a-z0-9_\-]{1,12}", p))
    return plain >= 0.6 * len(parts)


def _near_secret_word(text: str, start: int, end: int, *, assigned: bool = False) -> bool:
    """Is a secret-ish word within five words before or after text[start:end]?
    (`assigned`: directly before it, as in `key: …`, `token = …`, `api key is …`.)"""
    before = text[max(0, start - NEAR_WINDOW) : start]
    last = None
    for found in _NEAR_WORD.finditer(before):
        last = found
    if last is not None:
        gap_pattern = _ASSIGN_GAP if assigned else _GAP
        if gap_pattern.fullmatch(before, last.end()):
            return True
    if assigned:
        return False
    after = text[end : end + NEAR_WINDOW]
    first = _NEAR_WORD.search(after)
    return first is not None and bool(_GAP.fullmatch(after, 0, first.start()))


def _random_token(text: str, start: int, end: int, bare_min: int, bare_classes: int, bare_hex: bool) -> bool:
    """Should text[start:end] (a token, or one segment of a path) go?"""
    token = text[start:end]
    if len(token) < NEAR_MIN:
        return False
    sample = token[:SAMPLE]
    before = text[max(0, start - 40) : start]
    if _DIGEST_BEFORE.search(before):
        return False  # a content hash, a key's id: named as such
    if _exempt(token, before):
        # A git SHA, digest or UUID survives, unless it is what a secret word is set to, what a
        # token flag or an `auth` command is given, or a key a client is made with.
        if _HEX.fullmatch(token) is None and _UUID.fullmatch(token) is None:
            return False
        return _near_secret_word(text, start, end, assigned=True) or _given_as_key(text, start)
    if _slug_like(token):
        return False
    if _decodes_to_text(sample):  # base64 of ordinary text: only next to a secret word
        return looks_random(sample) and _near_secret_word(text, start, end)
    if len(token) >= bare_min and (
        looks_random(sample, min_len=bare_min, classes=bare_classes)
        or (bare_hex and _HEX.fullmatch(sample) is not None and _entropy(sample) >= 3.0)
    ):
        return True
    return looks_random(sample) and (_near_secret_word(text, start, end) or _given_as_key(text, start))


def _given_as_key(text: str, start: int) -> bool:
    """Whether what starts at `start` is given where a key goes (`_KEY_ARGUMENT`)."""
    return _KEY_ARGUMENT.search(text, max(0, start - 60), start) is not None


_PUBLIC_BLOCK = _Lazy(
    r"-----BEGIN (?:[A-Z0-9 ]*PUBLIC KEY(?: BLOCK)?|CERTIFICATE(?: REQUEST)?|X509 CRL)-----.{0,20000}?-----END [A-Z0-9 ]+-----",
    re.S,
)


def _entropy_pass(text: str, *, bare_min: int, bare_classes: int, bare_hex: bool) -> str:
    """Mask random-looking tokens: near a secret word from NEAR_MIN characters, anywhere from
    `bare_min` characters with `bare_classes` of upper/lower/digit (`bare_hex`: hex runs too).
    A path is judged segment by segment (`keys/<token>.json` loses only the token)."""
    spans: list[tuple[int, int]] = []
    public = "h1:" in text or ";base64," in text or "arn:aws" in text
    blocks = [m.span() for m in _PUBLIC_BLOCK.finditer(text)] if "-----BEGIN" in text else []
    for match in _CANDIDATE.finditer(text):
        start = match.start()
        if any(a <= start < b for a, b in blocks):
            continue  # a public key or a certificate: meant to be shown
        token = match.group(0).rstrip(".-~%")
        if token.startswith("//"):  # scheme://TOKEN: the slashes stay, so the scheme stays readable
            stripped = token.lstrip("/")
            start += len(token) - len(stripped)
            token = stripped
        end = start + len(token)
        if len(token) < NEAR_MIN or text[max(0, start - 10) : start] == "[REDACTED:":
            continue
        if public and _PUBLIC_BEFORE.search(text, max(0, start - PUBLIC_REACH), start):
            continue  # a go.sum hash, an inline image, an ARN's resource name
        if not _path_like(token):
            if _random_token(text, start, end, bare_min, bare_classes, bare_hex):
                spans.append((start, end))
            continue
        for segment in _SEGMENT_OF_PATH.finditer(token):
            seg_start, seg_end = start + segment.start(), start + segment.end("name")
            if _random_token(text, seg_start, seg_end, bare_min, bare_classes, bare_hex):
                spans.append((seg_start, seg_end))
    return _replace_spans(text, spans, _mark("high-entropy"))


# ---------------------------------------------------------------------------
# Entry points


# An AWS secret access key: 40 characters of base64's alphabet, told apart from other such runs
# by the access key id next to it (a pair is how they are pasted: in a CSV, a config, a sentence).
_AWS_SECRET = _Lazy(r"(?<![A-Za-z0-9/+])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])")
_AWS_PAIR_REACH = 300  # characters from the masked access key id within which its secret is looked for


def _aws_secret_beside_its_key(text: str) -> str:
    """Mask the secret access key written near an access key id: its slashes cut it into pieces
    too short for the entropy pass ("wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")."""
    marks = [m.start() for m in re.finditer(re.escape(_mark("aws-access-key")), text)]
    if not marks:
        return text
    spans = [
        m.span()
        for m in _AWS_SECRET.finditer(text)
        if any(abs(m.start() - at) <= _AWS_PAIR_REACH for at in marks)
        and re.search(r"[a-z]", m.group()) and re.search(r"[A-Z]", m.group())
    ]
    return _replace_spans(text, spans, _mark("aws-secret-key"))


# A password said in prose near the word for it, before or after, however it is put ("use `…` as the
# password", "the login is admin and …", "a different old password (…)", "the new one should be …"):
# only a word that can only be a password (`_password_like`), within PASSWORD_REACH on its line.
_PASSWORD_WORD = _Lazy(
    r"(?i)(?<![A-Za-z])(?:pass(?:word|wd|phrase|code)?s?|pw|pwd|log[ \t-]?ins?|credentials?|creds|requirepass|masterauth"
    # other languages: de, nl, fr, es, pt, sv, pl, fi, ru, ja, zh, ko
    r"|passw(?:o|ö)rt(?:er)?|kennw(?:o|ö)rt(?:er)?|wachtwoord(?:en)?|mot[ \t]+de[ \t]+passe|mdp|contrase(?:ñ|n)as?|clave|senhas?"
    r"|l(?:ö|o)senord|has(?:ł|l)o|salasana|пароль|パスワード|密码|密碼|비밀번호)"
    r"(?![A-Za-z])"
)
_PASSWORD_TOKEN = _Lazy(r"(?<![\w!@#$%^&*+=~?/.:\-])[A-Za-z0-9!@#$%^&*+=~?_.\-]{8,64}(?![\w!@#$%^&*+=~?/:\-])")
# Google's app passwords: 16 lower-case letters, shown in groups of four; Apple's app-specific ones
# join the groups with dashes.
_APP_PASSWORD = _Lazy(r"(?<![A-Za-z])(?:[a-z]{4}([ \-])[a-z]{4}\1[a-z]{4}\1[a-z]{4}|[a-z]{16})(?![A-Za-z])")
PASSWORD_REACH = 60


def _unpronounceable(letters: str) -> bool:
    """Lower-case letters drawn at random: few vowels, long runs without one (words have a vowel
    in about two letters of five, and seldom six consonants in a row). Catches 83% of random
    16-letter runs; of the 16-letter words in this project's docs, notes and code, none."""
    vowels = sum(1 for c in letters if c in "aeiou")
    longest = max((len(run) for run in re.findall(r"[^aeiouy]+", letters)), default=0)
    return (vowels < 0.3 * len(letters) and longest >= 4) or longest >= 6


def _app_password(value: str) -> bool:
    """An app password (`_APP_PASSWORD`) drawn at random, not 16 letters of words."""
    return _APP_PASSWORD.fullmatch(value) is not None and _unpronounceable(re.sub(r"[ \-]", "", value))


def _generated(token: str) -> bool:
    """A generated password `_wordy` takes for words (`doIErxkYaOa2mqpnIls`): 10+ characters of
    upper, lower case and digits, with four consonants in a row somewhere (an identifier such as
    `LoginForm2` or `OAuth2Client` has none)."""
    return (
        len(token) >= 10
        and any(c.isupper() for c in token) and any(c.islower() for c in token) and any(c.isdigit() for c in token)
        and re.search(r"[bcdfghjklmnpqrstvwxzBCDFGHJKLMNPQRSTVWXZ]{4}", token) is not None
    )


def _passwords_in_prose(text: str) -> str:
    words = [m.span() for m in _PASSWORD_WORD.finditer(text)]
    if not words:
        return text
    spans: list[tuple[int, int]] = []

    def near(start: int, end: int) -> bool:
        return any(
            (0 <= start - w_end <= PASSWORD_REACH and "\n" not in text[w_end:start])
            or (0 <= w_start - end <= PASSWORD_REACH and "\n" not in text[end:w_start])
            for w_start, w_end in words
        )

    for match in _PASSWORD_TOKEN.finditer(text):
        token = match.group(0).rstrip(".")
        if (_password_like(token) or _generated(token)) and near(match.start(), match.start() + len(token)):
            spans.append((match.start(), match.start() + len(token)))
    for match in _APP_PASSWORD.finditer(text):
        if _app_password(match.group(0)) and near(*match.span()):
            spans.append(match.span())
    return _replace_spans(text, spans, MASK) if spans else text


# A PIN or a door code: 4 to 8 digits, the first number after its word ("the SIM PIN is 4821",
# "door code for the server room: 7719#"). After a lower-case "pin" (a verb too: "pin numpy to
# 1.26") or a code word, only where the sentence gives it: "is", "was", ":" or "=" just before.
_PIN = _Lazy(
    r"(?<![A-Za-z])(?:(?P<caps>PIN|PUK)|(?i:pin|puk|passcode|combination|"
    r"(?:door|alarm|gate|safe|lock|keypad|entry|garage|building)[ \t]+code))(?:[ \t]+(?i:code|number))?"
    r"(?![A-Za-z])(?P<gap>[^\n\d]{0,40}?)(?<![\d.])(?P<value>\d{4,8})(?![\w:/\-]|[.,]\d)"
)
_PIN_SAID = _Lazy(r"(?:\b(?i:is|was)|[:=])[ \t'\"`]*$")


def _pins(text: str) -> str:
    spans = [
        match.span("value")
        for match in _PIN.finditer(text)
        if match.group("caps") or _PIN_SAID.search(match.group("gap"))
    ]
    return _replace_spans(text, spans, MASK) if spans else text


# cloud-init's `chpasswd:` block lists logins one a line as `user:password` (under `list: |`, or
# as a YAML list); the other keys there (`expire: false`) have a space after their colon. The block
# is the lines indented deeper than the line that ends in `chpasswd:`.
_CHPASSWD = _Lazy(r"(?m)^(?P<indent>[ \t]*)(?:[^\n]*[ \t])?chpasswd:[ \t]*\r?$")
_CHPASSWD_ENTRY = _Lazy(r"[ \t]*(?:-[ \t]+)?[A-Za-z_][\w.\-]*:(?P<value>[^\s:'\"][^\s]*)[ \t]*\r?$")


def _chpasswd_lists(text: str) -> str:
    spans: list[tuple[int, int]] = []
    for block in _CHPASSWD.finditer(text):
        depth = len(block.group("indent"))
        for at, end in _lines_from(text, block.end() + 1):
            line = text[at:end]
            if line.strip() and len(line) - len(line.lstrip(" \t")) <= depth:
                break
            entry = _CHPASSWD_ENTRY.match(line)
            if entry and "[REDACTED" not in entry.group("value"):
                spans.append((at + entry.start("value"), at + entry.end("value")))
    return _replace_spans(text, spans, MASK) if spans else text


# A password given to any command by its usual flag (`-p`, `--password`, PowerShell's `-AsPlainText`,
# Windows' `/rp`), or written into a login without a scheme (`root:pw@localhost:3306`, Oracle's
# `scott/pw@//db`), or to HTTPie's `-a user:pw`: only a value that can only be a password
# (`_password_like`; a port, a path, a word or `no:cacheprovider` stays), or an app password.
_FLAG_PASSWORD = _Lazy(
    r"(?<![\w\-])(?:-p|-P|--pass(?:word|wd)?|/rp|/p|-(?i:newpassword|password|asplaintext)|-(?i:p)assword)"
    r"(?:[ \t]+|=)(?P<q>['\"]?)(?P<value>[^\s'\"]{6,200})(?P=q)"
)
_INLINE_LOGIN = _Lazy(
    r"(?<![\w.\-/@])(?<!://)[A-Za-z0-9_.\-]{1,64}[:/](?P<value>[^\s@/:'\"]{6,200})@(?=//|[A-Za-z0-9\[])"
)
# The same, where a tool or a config file gives it its own way: HTTPie's `-a user:pw`, `echo
# user:pw | base64`, OpenLDAP and nss-ldap's `rootpw`/`bindpw`, Cisco's `isakmp key` and SNMP
# community, IRC's `IDENTIFY`, redis-cli's `AUTH`, MinIO's `mc admin user add`, Poetry and
# Bundler's credentials, an .rdp file's `password 51:b:`, Windows' unattend.xml.
_GIVEN_PASSWORD = _Lazy(
    r"(?:(?<![\w\-])(?:-a|--auth)[ \t]+['\"]?[^\s:'\"@/]+:"
    r"|\b(?:echo|printf)[ \t]+(?:-n[ \t]+)?['\"]?[^\s:'\"]+:(?=[^\s'\"]+['\"]?[ \t]*\|[ \t]*base64)"
    r"|(?im:^[ \t]*(?:bindpw|rootpw|olcRootPW:)[ \t]+)"
    r"|\b(?i:isakmp[ \t]+key|snmp-server[ \t]+community)[ \t]+"
    r"|\b(?i:identify)[ \t]+(?:\S+[ \t]+)?"
    r"|(?<=> )AUTH[ \t]+(?:\S+[ \t]+)?"
    r"|\bmc[ \t]+admin[ \t]+user[ \t]+add[ \t]+\S+[ \t]+\S+[ \t]+"
    r"|\bpoetry[ \t]+config[ \t]+http-basic\.\S+[ \t]+\S+[ \t]+"
    r"|\bbundle[ \t]+config[ \t]+(?:set[ \t]+)?(?:--\w+[ \t]+)*\S+[ \t]+[^\s:]+:"
    r"|(?m:^password[ \t]+51:b:)"
    r"|<(?:\w*Password)>\s*<Value>)"
    r"(?P<q>['\"]?)(?P<value>[^\s'\"<]{6,200})(?P=q)"
)


def _flagged_passwords(text: str) -> str:
    spans: list[tuple[int, int]] = []
    for pattern in (_FLAG_PASSWORD, _INLINE_LOGIN, _GIVEN_PASSWORD):
        for match in pattern.finditer(text):
            value = match.group("value")
            if "[REDACTED" in value:
                continue
            given = pattern is _GIVEN_PASSWORD and match.group(0).lstrip().startswith(("echo", "printf"))
            if given or _password_like(value) or _app_password(value) or looks_random(value, min_len=12):
                spans.append(match.span("value"))  # `echo 'user:…' | base64` makes basic auth of anything
    return _replace_spans(text, spans, MASK) if spans else text


# An Ethereum private key: 0x and 64 hex digits (a transaction's hash looks the same, so only on a
# line that speaks of keys, wallets or accounts).
_HEX_KEY = _Lazy(r"(?<![0-9A-Za-z])0x[0-9a-fA-F]{64}(?![0-9a-fA-F])")
_HEX_KEY_WORD = _Lazy(r"(?i)private|wallet|accounts?\b|secret|seed|mnemonic|\bkeys?\b|import")
# Recovery or backup codes listed one a line under their name (GitHub's `bbsst-6hagd` under
# `github-recovery-codes.txt`, Google's `1. 3294 6946` under BACKUP VERIFICATION CODES); blank
# lines between them are passed over.
_CODES_HEAD = _Lazy(r"(?im)^.*(?:recovery|backup|verification|2fa|two-factor)[ \t_-]+codes?.*$")
_CODE_LINE = _Lazy(
    r"[ \t]*(?:[-*][ \t]+|\d{1,2}[.)][ \t]*)?"
    r"(?P<code>[A-Za-z0-9]{4,6}-[A-Za-z0-9]{4,6}|\d{6,10}|\d{4}[ \t]\d{4})[ \t]*\r?"
)
MAX_CODES = 40  # lines looked at under the name, blank ones too


def _keys_and_codes(text: str) -> str:
    spans: list[tuple[int, int]] = []
    if "0x" in text:
        for match in _HEX_KEY.finditer(text):
            if _HEX_KEY_WORD.search(_line_around(text, match)):
                spans.append(match.span())
    for head in _CODES_HEAD.finditer(text):
        for at, end in islice(_lines_from(text, head.end() + 1), MAX_CODES):
            code = _CODE_LINE.fullmatch(text, at, end)
            if code is not None:
                spans.append(code.span("code"))
            elif text[at:end].strip():
                break
    return _replace_spans(text, spans, MASK) if spans else text


# A password stated in the words of another language, or in a sentence rather than as `name: value`:
# its word, a few words more ("от базы", "k serveru", "for the VPN"), a colon or the language's "is",
# then the value. The structure says what the value is, so any value with a letter and a digit or a
# symbol counts (`_stated`), where prose elsewhere needs one that can only be a password.
_STATED_WORD = (
    r"(?i:(?<![^\W\d_])(?:passwor(?:t|d)(?=[ \t]+(?:è|é|ist|est|es|er|je|är|este|adalah|là|sono)[ \t])|passwort|kennwort|wachtwoord|mot[ \t]+de[ \t]+passe|mdp"
    r"|contrase(?:ñ|n)a|clave|senha|l(?:ö|o)senord(?:et)?|has(?:ł|l)o|salasana|paroo?la|parolă|heslo|hesla|heslem"
    r"|(?:ş|s)ifre(?:si|niz)?|jelsz(?:ó|o)(?:t|ja)?|adgangskode(?:n)?|passord(?:et)?"
    r"|m(?:ậ|a)t[ \t]+kh(?:ẩ|a)u|kata[ \t]+(?:sandi|laluan)|пароль|пароля|паролем|парола|κωδικ(?:ός|ος|ό)"
    r"|συνθηματικό)(?![^\W\d_]))"
    r"|パスワード|暗証番号|密码|密碼|口令|비밀번호(?:는|은)?|비번(?:은)?|암호|كلمة[ \t]+(?:المرور|السر)|ה?סיסמ(?:ה|א)|पासवर्ड|รหัสผ่าน|رمز[ \t]+عبور"
)
_STATED_IS = (
    r"(?:is|was|es|est|ist|lautet|lautete|è|é|är|er|on|oli|je|jest|là|adalah|ialah|este|είναι|هي|היא|это|є|sono)"
)
_STATED_PASSWORD = _Lazy(
    rf"(?:{_STATED_WORD})(?P<gap>[^\n:：=.!?]{{0,40}}?)"
    rf"(?:[ \t]*[:：=][ \t]*|[ \t]+{_STATED_IS}[ \t]+|(?<=[\u0590-\u06ff])[ \t]+(?={_STATED_IS})"
    r"|[ \t]*[—–][ \t]*|[ \t]+-[ \t]+|[ \t]*(?:是|为|為|は|คือ)[ \t]*|(?P<bare>[ \t]+))"
    r"(?(bare)(?=\S*\d)(?=\S*[^\W\d_]))"  # after a bare space, a value with a letter and a digit
    r"(?:[\u0590-\u06ff]+[ \t]+)?(?P<q>['\"`«“]?)(?P<value>[^\s'\"`»”，。、；！？]{6,200})"
)
# The key of a Wi-Fi network, said in a sentence ("the wifi is Guest with key tulip-orbit-ferry-2291").
_WIFI_KEY = _Lazy(
    r"(?i)(?<![a-z])(?:wi-?fi|wlan|wpa2?|ssid)(?![a-z])[^\n]{0,60}?(?<![a-z])(?:key|psk|pass(?:word|phrase)?)"
    r"(?![a-z])[ \t]*(?:is[ \t]+|[:=][ \t]*|[ \t]+)(?P<q>['\"`]?)(?P<value>[^\s'\"`]{8,200})"
)
# What to type when a login or `sudo` asks ("when sudo prompts, type k2m9*l#O-ZW~ and hit enter").
_TYPED_AT_PROMPT = _Lazy(
    r"(?i)(?<![a-z])(?:sudo|su|login|ssh|unlock|keychain|vault|gpg|prompt(?:s|ed)?|asks?|asked)(?![a-z])"
    r"[^\n]{0,40}?(?<![a-z])(?:type|enter|answer|paste)[ \t]+(?:in[ \t]+)?(?P<q>['\"`]?)(?P<value>[^\s'\"`]{6,200})"
)
# A login and its password on one line after their word: "Creds for the portal: jane@acme.io / Pel1can#".
_LOGIN_SLASH = _Lazy(
    r"(?i)(?<![a-z])(?:creds?|credentials?|logins?|account)(?![a-z])[^\n:]{0,40}:[ \t]*\S+[ \t]+/[ \t]+"
    r"(?P<q>['\"`]?)(?P<value>[^\s'\"`]{6,200})"
)
# A wallet's recovery words: 12 to 24 lower-case words on a line that speaks of a seed or a wallet.
_SEED_LINE = _Lazy(r"(?im)^.*(?:\bseed\b|wallet|mnemonic|recovery[ \t]+phrase|secret[ \t]+phrase).*$")
_SEED_WORDS = _Lazy(r"(?<![A-Za-z])(?:[a-z]{3,8}[ \t]+){11,23}[a-z]{3,8}(?![A-Za-z])")
# A custom header given a random value in a note's prose (`X-Acme-Gate: agw1.7f3Kq9Lm…`).
_HEADER_LINE = _Lazy(r"(?im)^[ \t>*-]*X-[A-Za-z0-9\-]{2,40}:[ \t]*(?P<value>[A-Za-z0-9._~+/=\-]{16,400})[ \t]*$")
# A passphrase of plain words given to a password's name on a line of its own ("password: correct
# horse battery staple"): three to eight lower-case words, none of the words an instruction uses
# ("password: see the vault entry" stays).
_WORDS_PASSPHRASE = _Lazy(
    r"(?im)^[ \t>*-]*[\"']?(?:password|passphrase|passwd|pass|pwd|pass_?phrase)[\"']?[ \t]*[:=][ \t]*[\"']?"
    r"(?P<v>(?:[a-z]{3,12}|\[REDACTED\])(?:[ \t]+[a-z]{3,12}){2,7})[\"']?[ \t]*$"
)
_INSTRUCTION_WORDS = frozenset(
    "the and see use from stored store vault env environment file set not our your same with for ask "
    "one that this there here none empty blank default unset required secret password passphrase "
    "manager team shared keychain keyring prompt prompted asked given".split()
)
# A header that carries an id, a trace or a digest, not a credential (x-request-id, X-Amzn-Trace-Id).
_ID_HEADER = _Lazy(r"(?i)^[ \t>*-]*X-[A-Za-z0-9\-]*(?:id|trace|request|correlation|span|sha\d*|hash|digest|etag|version)\b")
# Codes that open an account when the rest is lost (a list of them: `_CODES_HEAD`): a TOTP setup
# key in groups, an Apple tool's app password.
_SETUP_KEY = _Lazy(
    r"(?i)(?:setup|secret|manual(?:ly)?|totp|2fa)[ \t]+key\b[^\n:]{0,40}:?[ \t]*(?P<v>(?:[a-z2-7]{4}[ \t]){3,}[a-z2-7]{2,4})\b"
)
_APPLE_TOOL_PASSWORD = _Lazy(  # `xcrun altool … -p "jwzf-oahc-owvy-oree"`: an app-specific password, however it reads
    r"(?i)(?:altool|notarytool|xcrun|apple-?id|icloud)[^\n]{0,200}?(?:[ \t]-p|--password)[ \t]*['\"]?"
    r"(?P<v>[a-z]{4}(?P<sep>[ -])[a-z]{4}(?P=sep)[a-z]{4}(?P=sep)[a-z]{4})(?![\w-])"
)
_KEYPAIR_BYTES = _Lazy(r"\[(?:[ \t\r\n]*\d{1,3}[ \t\r\n]*,){31,63}[ \t\r\n]*\d{1,3}[ \t\r\n]*\]")
_KEYPAIR_WORD = _Lazy(r"(?i)solana|keypair|key[ _-]?pair|id\.json|secret[ _-]?key|private[ _-]?key")
# A licence or product key: four or more groups of four or five capitals and digits, on a line that
# says what it is.
_LICENCE_KEY = _Lazy(r"(?<![\w-])(?:[A-Z0-9]{3,6}-){3,}[A-Z0-9]{3,6}(?![\w-])")
_LICENCE_WORD = _Lazy(r"(?i)licen[cs]e|serial|product[ \t]+key|activation|registration[ \t]+key")


def _stated(value: str) -> bool:
    """A value a sentence calls a password: a letter and a digit or a symbol, no reference or path."""
    value = value.rstrip(".,;")
    if len(value) < 6 or "[REDACTED" in value or _reference(value) or value[0] in "$(" or "/" in value:
        return False  # a variable, a reference, a path or URL
    if re.fullmatch(r"[&*][\w.-]+|![\w!.-]*|[|>][+-]?\d?[+-]?", value):
        return False  # a YAML anchor, alias, tag or block
    letters = any(c.isalpha() for c in value)
    return letters and (any(c.isdigit() for c in value) or any(not (c.isalnum() or c in "_-.'") for c in value))


def _said_secrets(text: str) -> str:
    """Passwords, Wi-Fi keys, seeds, header values and licence keys given in sentences (see above)."""
    spans: list[tuple[int, int]] = []
    for pattern in (_STATED_PASSWORD, _WIFI_KEY, _LOGIN_SLASH, _TYPED_AT_PROMPT):
        for match in pattern.finditer(text):
            value = match.group("value").rstrip(".,;")
            bare = "bare" in match.re.groupindex and match.group("bare") is not None
            if bare and not (any(c.isdigit() for c in value) and any(c.isalpha() for c in value)):
                continue  # "пароль пользователя": a word after the word, not a value
            if _stated(value):
                spans.append((match.start("value"), match.start("value") + len(value)))
    for seed_line in _SEED_LINE.finditer(text):
        for words in _SEED_WORDS.finditer(seed_line.group()):
            spans.append((seed_line.start() + words.start(), seed_line.start() + words.end()))
    for match in _HEADER_LINE.finditer(text):
        value = match.group("value")
        if looks_random(value, min_len=16) and not _ID_HEADER.search(match.group()) and not _UUID.search(value):
            spans.append(match.span("value"))
    for match in _WORDS_PASSPHRASE.finditer(text):
        if not _INSTRUCTION_WORDS & set(match.group("v").split()):
            spans.append(match.span("v"))
    for pattern in (_SETUP_KEY, _APPLE_TOOL_PASSWORD):
        spans += [match.span("v") for match in pattern.finditer(text)]
    for match in _KEYPAIR_BYTES.finditer(text):
        if _KEYPAIR_WORD.search(text, max(0, match.start() - 200), match.start()) and all(
            int(n) < 256 for n in re.findall(r"\d+", match.group())
        ):
            spans.append(match.span())
    for match in _LICENCE_KEY.finditer(text):
        key = match.group()
        if re.search(r"\d", key) and re.search(r"[A-Z]", key) and _LICENCE_WORD.search(_line_around(text, match)):
            spans.append(match.span())
    return _replace_spans(text, spans, MASK) if spans else text


# Passwords given by their place rather than by a name: a login call's second string, a CSV or an
# INSERT's password column, `AUTH …` at a Redis prompt, a Wi-Fi QR code's `P:`, smbclient's
# `user%password`, the password of a URL whose user is an e-mail address, a Go or Oracle DSN's, and
# one said before its word ("try Marble$raven6800 as the admin password").
_LOGIN_CALL = _Lazy(
    r"(?i)\b(?:login|log_in|signin|sign_in|authenticate|basic_auth|loginasync|getconnection|connect|mysqli|pdo|"
    r"smtp(?:_ssl)?|ftp(?:_tls)?)[ \t]*\((?P<args>[^()\n]{0,300}(?:\([^()\n]{0,200}\)[^()\n]{0,100})?)\)"
)
_STRING_ARG = _Lazy(r"(?P<q>[\"'])(?P<v>[^\"'\n]{1,200})(?P=q)")
_CSV_HEADER = _Lazy(r"(?im)^(?P<head>[^\n,;\t|]*(?:[,;\t][^\n,;\t|]*)+)$")  # a table with | is `_tables`'s
MAX_CSV_ROWS = 1000  # rows under a header with a password column that are looked at
_COLUMN_NAME = _Lazy(r"^[ \t\"']*[A-Za-z_][\w.-]{0,39}[ \t\"']*$")
_PASSWORD_COLUMN = _Lazy(r"(?i)^[ \t\"']*(?:password|passwd|pass|pwd|pw|secret|passphrase)[ \t\"']*$")
_INSERT = _Lazy(
    r"(?is)\binsert\s+into\s+\S+\s*\((?P<cols>[^()]{1,400})\)\s*values\s*\((?P<vals>[^()]{1,800})\)"
)
_REDIS_AUTH = _Lazy(r"(?m)(?:^|>[ \t]*|\bredis-cli\b[^\n]*?[ \t])AUTH[ \t]+(?:[^\s]+[ \t]+)?(?P<v>[^\s]{6,200})[ \t]*$")
_WIFI_QR = _Lazy(r"WIFI:[^\n]{0,200}?(?<=[:;])P:(?P<v>(?:\\.|[^;\n]){6,200});")
_SMB_USER = _Lazy(r"(?:\bsmbclient\b|\bmount\.cifs\b|\brpcclient\b)[^\n]*?(?:-U|--user(?:=|[ \t]))[ \t]*['\"]?[^%\s'\"]+%(?P<v>[^\s'\"]{4,200})")
_MAIL_USER_URL = _Lazy(r"(?<![a-z0-9+.-])[a-z][a-z0-9+.-]{0,20}://[^\s/:@]+@[^\s/:@]+:(?P<v>[^\s/@]{4,200})@[\w.-]+")
_GO_DSN = _Lazy(r"\b[\w.-]{1,64}:(?P<v>[^\s@/:'\"]{4,200})@(?:tcp|unix)\(")
_ORACLE_THIN = _Lazy(r"(?i)\bjdbc:oracle:(?:thin|oci):[\w.$-]{1,64}/(?P<v>[^\s@/'\"]{4,200})@")
_AS_THE_PASSWORD = _Lazy(
    r"(?i)(?:\btry|\buse|\benter|\btype|\bwith)[ \t]+['\"`]?(?P<v>[^\s'\"`]{6,200})['\"`]?[ \t]+as[ \t]+(?:the|my|our|your)?[ \t]*"
    r"(?:[\w-]+[ \t]+)?(?:password|passphrase|pass|pin)\b"
)
_NET_USE = _Lazy(r"(?i)\bnet[ \t]+use\b[^\n]*?\\\\\S+[ \t]+(?P<v>[^\s/]{4,200})[ \t]+/user:")


def _placed_password(value: str) -> bool:
    """A string in a password's place that is one: letters with a digit or a symbol, no address."""
    value = value.strip()
    if not _stated(value) or ("@" in value and re.fullmatch(r"[^@\s]+@[\w-]+(?:\.[\w-]+)+", value)):
        return False  # an e-mail address (a login's user)
    return not re.fullmatch(r"[\w-]+(?:\.[\w-]+)*\.[A-Za-z]{2,12}(?::\d+)?|\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?", value)


def _placed_passwords(text: str) -> str:
    """Mask the passwords `_LOGIN_CALL` … `_NET_USE` find by their place."""
    spans: list[tuple[int, int]] = []
    for call in _LOGIN_CALL.finditer(text):
        strings = list(_STRING_ARG.finditer(call.group("args")))
        for arg in strings[1:]:  # the first is a host or a user
            if _placed_password(arg.group("v")):
                at = call.start("args") + arg.start("v")
                spans.append((at, at + len(arg.group("v"))))
    for header in _CSV_HEADER.finditer(text):
        cells = re.split(r"[,;\t]", header.group("head"))
        columns = [i for i, cell in enumerate(cells) if _PASSWORD_COLUMN.match(cell)]
        if not columns or len(cells) > 40 or not all(_COLUMN_NAME.match(cell) for cell in cells):
            continue  # a sentence with commas is no header
        sep = next(c for c in header.group("head") if c in ",;\t")
        for at, end in islice(_lines_from(text, header.end() + 1), MAX_CSV_ROWS):
            row = text[at:end].split(sep)
            if len(row) != len(cells):
                break
            offsets = [0]
            for cell in row:
                offsets.append(offsets[-1] + len(cell) + 1)
            for i in columns:
                value = row[i].strip().strip("\"'")
                if value and " " not in value and _placed_password(value):
                    start = at + offsets[i] + row[i].index(value)
                    spans.append((start, start + len(value)))
    for insert in _INSERT.finditer(text):
        cols = [c.strip(" \t\n`\"[]") for c in insert.group("cols").split(",")]
        wanted = [i for i, c in enumerate(cols) if _PASSWORD_COLUMN.match(c)]
        if wanted:
            values = list(_STRING_ARG.finditer(insert.group("vals")))
            for i in wanted:
                if i < len(values) and _placed_password(values[i].group("v")):
                    at = insert.start("vals") + values[i].start("v")
                    spans.append((at, at + len(values[i].group("v"))))
    for pattern in (_REDIS_AUTH, _WIFI_QR, _SMB_USER, _MAIL_USER_URL, _GO_DSN, _ORACLE_THIN, _AS_THE_PASSWORD, _NET_USE):
        for match in pattern.finditer(text):
            if "[REDACTED" not in match.group("v") and _placed_password(match.group("v")):
                spans.append(match.span("v"))
    return _replace_spans(text, spans, MASK) if spans else text


# A line that goes on with the rest of a secret the line before ended in (a key wrapped at the
# terminal's width, a value continued with `\`): one unbroken run of key characters, not a word.
_WRAPPED_REST = re.compile(
    r"(?P<mark>\[REDACTED(?::[\w-]+)?\])(?P<gap>[\\\"']?[ \t]*\r?\n[ \t>#*/\\\"']*)"
    r"(?P<rest>[A-Za-z0-9+/=_-]{8,})(?=[\"',;\\]?[ \t]*(?:\r?\n|$))"
)


def _key_piece(value: str) -> bool:
    """Letters and digits in a dense run, as the rest of a key is (`sgNeCeflOGy2igptetp3`), where a
    name (`deploy_prod`, `release_v2`) has few distinct characters or none of its digits."""
    return (
        len(value) >= 16
        and any(c.isdigit() for c in value)
        and any(c.isalpha() for c in value)
        and _entropy(value) >= 3.6
    )


# A base64 blob that slashes or pluses cut into pieces, one of which was masked
# (`Ljo06+/[REDACTED]/kEmrewPaqSKrOcna/mSQrk=`): the whole blob goes.
_CUT_BLOB = re.compile(
    r"(?<![\w/+.~:-])(?P<before>[A-Za-z0-9+/]*[+/])?(?P<mark>\[REDACTED(?::[\w-]+)?\])"
    r"(?P<after>[+/][A-Za-z0-9+/]*={0,2})?(?![\w/+.-])"
)


def _whole_blob(match: re.Match[str]) -> str:
    before, after = match.group("before") or "", match.group("after") or ""
    blob = before + after
    if not blob or ("+" not in blob and not after.endswith("=")):
        return match.group(0)  # a path or a URL's segments around a masked one stay
    return match.group("mark")


def _wrapped_rest(text: str) -> str:
    """Mask the rest of a masked secret that was wrapped onto the next lines."""
    if "[REDACTED" not in text:
        return text

    def rest(match: re.Match[str]) -> str:
        value = match.group("rest")
        if not (looks_random(value, min_len=8) or _key_piece(value)):
            return match.group(0)
        return match.group("mark") + match.group("gap") + match.group("mark")

    text = _CUT_BLOB.sub(_whole_blob, text)
    for _ in range(8):  # a key wrapped over several lines: one more line each time
        masked = _WRAPPED_REST.sub(rest, text)
        if masked == text:
            break
        text = masked
    return text


def redact(text: str) -> str:
    """`text` with every credential we can recognise replaced by a [REDACTED] mark."""
    if not text:
        return text
    text = _passwords_in_prose(_aws_secret_beside_its_key(_context(_shaped(text))))
    if "chpasswd:" in text:
        text = _chpasswd_lists(text)
    text = _flagged_passwords(text)
    text = _said_secrets(text)
    text = _placed_passwords(text)
    text = _keys_and_codes(text)
    text = _pins(text)
    return _wrapped_rest(_entropy_pass(text, bare_min=32, bare_classes=3, bare_hex=False))


def redact_field(text: str) -> str:
    """`redact`, then stricter: any random-looking run of 20+ characters (hex too) goes as well.

    For what is derived from a session and shown outside a note's body, or
    is hard to scrub once written: titles (and so file names and commit
    subjects), tags, branch names, touched paths, commit messages, log lines.
    """
    if not text:
        return text
    return _entropy_pass(redact(text), bare_min=20, bare_classes=2, bare_hex=True)


@overload
def redact_note_fields(title: str, body: str, tags: Iterable[str] = ()) -> tuple[str, str, list[str]]: ...


@overload
def redact_note_fields(
    title: str | None, body: str | None, tags: Iterable[str] | None = None
) -> tuple[str | None, str | None, list[str] | None]: ...


def redact_note_fields(
    title: str | None, body: str | None, tags: Iterable[str] | None = None
) -> tuple[str | None, str | None, list[str] | None]:
    """A note's title, body and tags as they may be stored, for every writer of notes (the MCP
    `write`/`update` tools, `anamnesis new`): call it before the file name is made from the title.

    The title goes through `redact_field` (it becomes the file name and the
    commit subject) and stays within the store's title limit; the body through
    `redact`; a tag holding a secret becomes `redacted`. A field given as None
    stays None (an update that leaves it alone).
    """
    new_title = None
    if title is not None:
        new_title = redact_field(title)
        if len(new_title) > MAX_TITLE:
            new_title = new_title[: MAX_TITLE - 1].rstrip() + "…"
    new_body = redact(body) if body is not None else None
    new_tags = None if tags is None else redact_tags(tags)
    return new_title, new_body, new_tags


def redact_tags(tags: Iterable[str]) -> list[str]:
    """Tags as given (split where `normalize_tags` splits them: commas, white space), each that
    holds a secret made `redacted`. Call it before tags are normalised: their lower case hides
    what gives many tokens away (`AKIA…`)."""
    pieces = [piece for tag in tags for piece in re.split(r"[,\s]+", str(tag)) if piece]
    return [
        piece if redact_field(piece) == piece and redact_field(piece.upper()) == piece.upper() else "redacted"
        for piece in pieces
    ]


def count_redactions(text: str) -> int:
    """How many [REDACTED] marks a text carries (for the capture's report)."""
    return text.count("[REDACTED")
