"""Secret redaction: nothing captured from a session reaches git unredacted.

Notes travel to every machine the user owns and live in git history forever,
so a captured session passes through `redact` before it is written. The
rules err on the side of redacting: a false positive costs a few characters
of a note, a false negative leaks a credential.
"""

from __future__ import annotations

import re
from collections.abc import Callable

MASK = "[REDACTED]"

# Words that make a key name secret-ish ("DB_PASSWORD", "aws_secret_access_key", "apiKey").
_SECRET_WORD = (
    r"pass(?:word|wd|phrase)?|pwd|secret|token|apikey|"
    r"(?:api|access|account|shared[_-]?access|master|private|signing|encryption|session|auth)[_-]?key|"
    r"client[_-]?secret|credentials?|auth[_-]?(?:token|secret)|sharedaccesssignature|dsn|salt|cookie|"
    r"_auth(?=\s*[:=])"
)
# Bounded on both sides: an unbounded run made redaction quadratic on long dotted or dashed text.
_KEY_NAME = rf"[A-Za-z0-9_.\-]{{0,60}}(?:{_SECRET_WORD})[A-Za-z0-9_.\-]{{0,60}}"
_SECRET_HINT = re.compile(rf"(?i){_SECRET_WORD}")
# Values that are references to a secret rather than the secret itself.
_NOT_A_SECRET = re.compile(
    r"^(?:\$|%\(|\{\{|<[^>]*>$|\[REDACTED|os\.|process\.env|getenv|env\(|None$|null$|nil$|"
    r"true$|false$|\*+$|x+$|\.\.\.$|\d{1,5}$|''$|\"\"$)",
    re.I,
)

_PRIVATE_KEY = re.compile(
    r"-----BEGIN ((?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?)-----.*?(?:-----END \1-----|\Z)", re.S
)

# (kind, pattern): whole-match replacements for credentials with a recognisable shape.
_SHAPED: list[tuple[str, re.Pattern[str]]] = [
    ("aws-access-key", re.compile(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA|ABIA|ACCA)[0-9A-Z]{16}\b")),
    ("google-api-key", re.compile(r"\bAIza[0-9A-Za-z_\-]{35}\b")),
    ("google-oauth-token", re.compile(r"\bya29\.[0-9A-Za-z_\-]{20,}")),
    ("github-token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})\b")),
    ("gitlab-token", re.compile(r"\bglpat-[A-Za-z0-9_\-]{20,}")),
    ("slack-token", re.compile(r"\b(?:xox[abposre]|xapp)-[A-Za-z0-9\-]{10,}")),
    ("slack-webhook", re.compile(r"https://hooks\.slack\.com/services/[A-Za-z0-9/_\-]+")),
    ("stripe-key", re.compile(r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}\b")),
    ("anthropic-key", re.compile(r"\bsk-ant-[A-Za-z0-9_\-]{20,}")),
    ("openai-key", re.compile(r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}")),
    ("npm-token", re.compile(r"\bnpm_[A-Za-z0-9]{36}\b")),
    ("pypi-token", re.compile(r"\bpypi-[A-Za-z0-9_\-]{40,}")),
    ("huggingface-token", re.compile(r"\bhf_[A-Za-z0-9]{30,}\b")),
    ("sendgrid-key", re.compile(r"\bSG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}")),
    ("twilio-key", re.compile(r"\bSK[0-9a-f]{32}\b")),
    ("digitalocean-token", re.compile(r"\bdo[pro]_v1_[a-f0-9]{64}\b")),
    ("azure-sas", re.compile(r"(?<=[?&])sig=[A-Za-z0-9%+/=]{20,}")),
    (
        "url-signature",
        re.compile(r"(?i)(?<=[?&])(?:x-amz-signature|x-goog-signature|signature)=[A-Za-z0-9%+/=_\-]{16,}"),
    ),
    ("jwt", re.compile(r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}")),
]

# "Authorization: Bearer abc", {'Authorization': 'Basic abc'}, "-H 'X-Api-Key: abc'", "Bearer abc..." anywhere.
_AUTH_HEADER = re.compile(
    r"(?i)\b((?:proxy-)?authorization\\?['\"]?\s*:\s*\\?['\"]?(?:bearer|basic|token|digest|bot)?\s*)([^\s'\"\\]+)"
)
_BEARER = re.compile(r"(?i)\b(bearer\s+)([A-Za-z0-9._~+/=\-]{16,})")
_HEADER_KEY = re.compile(rf"(?i)\b(x-[a-z\-]*(?:{_SECRET_WORD})[a-z\-]*\s*:\s*)([^\s'\"]+)")

# scheme://user:password@host — keep the user and host, drop the password.
_URL_PASSWORD = re.compile(r"\b([a-z][a-z0-9+.\-]{0,30}://[^/\s:@'\"]*:)([^@\s/'\"]+)(@)", re.I)

# key = value, key: value, "key": "value" (also JSON-escaped: \"key\": \"value\"), --password value,
# export KEY=value (.env lines).
_KEY_VALUE = re.compile(
    rf"(?i)(?P<key>(?P<q>[\"']?)\b{_KEY_NAME}\\?(?P=q))"
    r"(?P<sep>\s*(?:=>|:=|[:=])\s*)"
    r"(?:(?P<esc>\\?)(?P<vq>[\"'`])(?P<qvalue>(?:[^\"'`\n\\]|\\[^\"'`\n])+)(?P=esc)(?P=vq)"
    r"|(?P<value>[^\s\"'`,;&|)}\]\\]+))"
)
# A token-looking blob (20+ base64/hex characters, letters and digits) under any name ending in "key".
_KEY_BLOB = re.compile(
    r"(?i)(?P<lead>\b[A-Za-z0-9_.\-]{0,60}key\\?[\"']?\s*(?:=>|:=|[:=])\s*\\?[\"']?)"
    r"(?P<value>[A-Za-z0-9+/_\-]{20,}={0,2})(?![A-Za-z0-9+/=_\-])"
)
# curl -u user:password, --user, --proxy-user: keep the user, drop the password.
_USER_FLAG = re.compile(
    r"(?<![\w-])(?P<lead>(?:-u|-U|--user|--proxy-user)(?:\s+|=)[\"']?[^\s:'\"@/]+:)(?P<value>[^\s'\"]+)"
)
# mysql -pPASSWORD (attached), docker/podman/helm/az login -p PASSWORD, sshpass -p PASSWORD,
# and .netrc lines (machine HOST login USER password PASSWORD).
_SHORT_PASSWORD = re.compile(
    r"(?P<lead>\b(?:mysql\w*|mariadb\w*)\b[^\n|;&]*?\s-p"
    r"|\b(?:(?:docker|podman|buildah|skopeo|oras|az|helm(?:\s+registry)?)\s+login|sshpass)\b[^\n|;&]*?\s-p\s+"
    r"|\blogin\s+\S+\s+password\s+)"
    r"(?P<value>[^\s'\"]+)"
)
_FLAG_VALUE = re.compile(
    rf"(?i)(?<![\w-])(?P<flag>--?{_KEY_NAME}(?:\s+|=))(?P<vq>[\"']?)(?P<value>[^\s\"']+)"
)
_ENV_LINE = re.compile(
    r"(?m)^(?P<lead>\s*(?:export\s+)?[A-Z][A-Z0-9_]*"
    r"(?:KEY|SECRET|TOKEN|PASS|PASSWORD|PWD|AUTH|CREDENTIALS?|PRIVATE|SALT|DSN|COOKIE|SESSION)"
    r"[A-Z0-9_]*\s*=\s*)(?P<value>.+?)\s*$"
)


def _key_value(match: re.Match[str]) -> str:
    group = "qvalue" if match.group("vq") else "value"
    if _NOT_A_SECRET.match(match.group(group)):
        return match.group(0)
    start, end = match.span(group)
    whole, base = match.group(0), match.start()
    return whole[: start - base] + MASK + whole[end - base :]


def _lead_value(match: re.Match[str]) -> str:
    value = match.group("value")
    if _NOT_A_SECRET.match(value) or value.startswith("-"):
        return match.group(0)
    return f"{match.group('lead')}{MASK}"


def _key_blob(match: re.Match[str]) -> str:
    value = match.group("value")
    if not (re.search(r"\d", value) and re.search(r"[A-Za-z]", value)):
        return match.group(0)
    return f"{match.group('lead')}{MASK}"


def _flag_value(match: re.Match[str]) -> str:
    value = match.group("value")
    if _NOT_A_SECRET.match(value) or value.startswith("-"):
        return match.group(0)
    return f"{match.group('flag')}{match.group('vq')}{MASK}"


def _env_line(match: re.Match[str]) -> str:
    value = match.group("value").strip("'\"")
    if not value or _NOT_A_SECRET.match(value) or MASK in value:
        return match.group(0)
    return f"{match.group('lead')}{MASK}"


def _kind(kind: str) -> Callable[[re.Match[str]], str]:
    return lambda _m: f"[REDACTED:{kind}]"


def redact(text: str) -> str:
    """`text` with every credential we can recognise replaced by a [REDACTED] mark."""
    if not text:
        return text
    text = _PRIVATE_KEY.sub(_kind("private-key"), text)
    for kind, pattern in _SHAPED:
        text = pattern.sub(_kind(kind), text)
    text = _URL_PASSWORD.sub(lambda m: f"{m.group(1)}{MASK}{m.group(3)}", text)
    text = _AUTH_HEADER.sub(lambda m: f"{m.group(1)}{MASK}", text)
    text = _BEARER.sub(lambda m: f"{m.group(1)}{MASK}", text)
    text = _HEADER_KEY.sub(lambda m: f"{m.group(1)}{MASK}", text)
    text = _ENV_LINE.sub(_env_line, text)
    text = _USER_FLAG.sub(_lead_value, text)
    text = _SHORT_PASSWORD.sub(_lead_value, text)
    if _SECRET_HINT.search(text):  # the two costliest patterns, only where a secret-ish name occurs
        text = _FLAG_VALUE.sub(_flag_value, text)
        text = _KEY_VALUE.sub(_key_value, text)
    if re.search("(?i)key", text):
        text = _KEY_BLOB.sub(_key_blob, text)
    return text


def count_redactions(text: str) -> int:
    """How many [REDACTED] marks a text carries (for the capture's report)."""
    return text.count("[REDACTED")
