"""The secret corpus: FAKE credentials of many kinds in realistic variants, and look-alikes.

Everything here is generated from a fixed seed: random characters in the
shape of each provider's format (prefix, alphabet, length), never a real
credential. `kinds.json` lists the kinds, each with value templates and the
contexts a value is pasted into; `lookalikes.json` lists text that must
come through redaction unchanged; `ordinary.md` is a plain working session
for measuring false positives.

Template placeholders:

- `{ALPHABET:N}` or `{ALPHABET:MIN-MAX}`: random characters. A kind's values
  come in three lengths: variant 0 takes MIN, variant 1 the middle, variant 2
  MAX (so each provider is tried shorter and longer than its usual length).
- `{uuid}`, `{jwt}`, `{basic}` (base64 of user:password), `{b64text:N}`
  (base64 of ordinary English), `{noteid}`, `{pem:TYPE}`, `{body:TYPE}`,
  `{derline:TYPE}`, `{putty}`.

Context placeholders: `{v}` the value, `{v_json}` the value as a JSON
string (with its quotes), `{v_indented}` each line indented by four spaces,
`{v_oneline}` white space collapsed to single spaces, `{v_cut}` the first
60% of the value.
"""

from __future__ import annotations

import base64
import json
import random
import re
import string
import uuid
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
SEED = 20260311

ALPHABETS = {
    "hex": "0123456789abcdef",
    "HEX": "0123456789ABCDEF",
    "b62": string.ascii_letters + string.digits,
    "b64": string.ascii_letters + string.digits + "+/",
    "b64u": string.ascii_letters + string.digits + "-_",
    "b64t": string.ascii_letters + string.digits + "-_~.",
    "B32": "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567",
    "AZ09": string.ascii_uppercase + string.digits,
    "az09": string.ascii_lowercase + string.digits,
    "digits": string.digits,
    "bech32": "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L",
    "pw": string.ascii_letters + string.digits + "!@%^*_+-.~",
    "user": string.ascii_lowercase,
    "django": string.ascii_lowercase + string.digits + "!@#$%^&*(-_=+)",  # get_random_secret_key's
    "nix": "0123456789abcdfghijklmnpqrsvwxyz",  # Nix's base32
    "b32l": "abcdefghijklmnopqrstuvwxyz234567",  # CIDv1's base32
    "crypt": "./" + string.digits + string.ascii_uppercase + string.ascii_lowercase,  # crypt(3)'s base64
    "ethaddr": "0123456789abcdefABCDEF",  # an EIP-55 address mixes the cases of its hex
}
ENGLISH = (
    "The deploy finished without errors and the release notes were published to the team wiki. "
    "Remember to run the migrations before restarting the workers, otherwise the queue backs up. "
    "Our staging cluster runs three replicas of the orders service behind the internal load balancer."
)
NOTE_ID_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"

# First bytes of each kind of DER private key (hex): real structure, random key material after.
DER_PREFIX = {
    "rsa": "308204a40201000282010100",
    "pkcs8": "308204be020100300d06092a864886f70d0101010500048204a8",
    "ec": "307702010104",
    "encrypted": "30820524304e06092a864886f70d01050d3041",
    "ed25519": "302e020100300506032b657004220420",
}
PEM_LABEL = {
    "rsa": "RSA PRIVATE KEY",
    "pkcs8": "PRIVATE KEY",
    "ec": "EC PRIVATE KEY",
    "encrypted": "ENCRYPTED PRIVATE KEY",
    "openssh": "OPENSSH PRIVATE KEY",
    "pgp": "PGP PRIVATE KEY BLOCK",
    "dsa": "DSA PRIVATE KEY",
}


@dataclass(frozen=True)
class Variant:
    """One secret in one context: `text` holds `secret`, which must not survive redaction."""

    kind: str
    context: str
    secret: str
    text: str


@dataclass(frozen=True)
class Lookalike:
    """Text that must survive `redact`; with `fields`, `redact_field` (titles, branches) too."""

    name: str
    text: str
    fields: bool = True


class _Gen:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def chars(self, alphabet: str, n: int) -> str:
        return "".join(self.rng.choice(ALPHABETS[alphabet]) for _ in range(n))

    def uuid(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def password(self, n: int) -> str:
        # A real password: letters, at least one digit and one symbol, in random order.
        core = [self.rng.choice(string.ascii_letters) for _ in range(max(1, n - 2))]
        core += [self.rng.choice(string.digits), self.rng.choice("!@%^*_+-.~")]
        self.rng.shuffle(core)
        if not core[0].isalnum():  # a leading dash would read as a flag on a command line
            core[0] = self.rng.choice(string.ascii_letters)
        return "".join(core)

    def der(self, kind: str, size: int) -> bytes:
        prefix = bytes.fromhex(DER_PREFIX.get(kind, "30"))
        if kind == "openssh":
            prefix = b"openssh-key-v1\x00\x00\x00\x00\x04none\x00\x00\x00\x04none"
        if kind == "pgp":
            prefix = bytes.fromhex("9505860465")
        return prefix + self.rng.randbytes(max(0, size - len(prefix)))

    def body(self, kind: str, size: int) -> str:
        width = 70 if kind == "openssh" else 64
        data = base64.b64encode(self.der(kind, size)).decode()
        return "\n".join(data[i : i + width] for i in range(0, len(data), width))

    def pem(self, kind: str, size: int) -> str:
        label = PEM_LABEL[kind]
        headers = ""
        if kind == "rsa" and size % 2:
            headers = f"Proc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,{self.chars('HEX', 32)}\n\n"
        if kind == "pgp":
            headers = "Comment: exported for the build host\n\n"
        tail = f"\n={self.chars('b64', 4)}" if kind == "pgp" else ""
        return f"-----BEGIN {label}-----\n{headers}{self.body(kind, size)}{tail}\n-----END {label}-----"

    def putty(self, size: int) -> str:
        public = base64.b64encode(self.rng.randbytes(51)).decode()
        private = base64.b64encode(self.rng.randbytes(size)).decode()
        lines = [private[i : i + 64] for i in range(0, len(private), 64)]
        return "\n".join(
            [
                "PuTTY-User-Key-File-3: ssh-ed25519",
                "Encryption: none",
                "Comment: build@ci-runner",
                "Public-Lines: 2",
                public[:64],
                public[64:],
                f"Private-Lines: {len(lines)}",
                *lines,
                f"Private-MAC: {self.chars('hex', 64)}",
            ]
        )

    def jwt(self, size: int) -> str:
        def part(obj: dict[str, object]) -> str:
            return (
                base64.urlsafe_b64encode(json.dumps(obj, separators=(",", ":")).encode()).decode().rstrip("=")
            )

        header = part({"alg": self.rng.choice(["HS256", "RS256", "ES256"]), "typ": "JWT"})
        claims: dict[str, object] = {"sub": self.uuid(), "iat": 1760000000 + self.rng.randrange(10**6)}
        claims["scope"] = self.chars("az09", size)
        signature = self.chars("b64u", self.rng.choice([43, 86, 342]))
        return f"{header}.{part(claims)}.{signature}"

    def b64text(self, n: int) -> str:
        start = self.rng.randrange(0, len(ENGLISH) - n) if n < len(ENGLISH) else 0
        return base64.b64encode(ENGLISH[start : start + n].encode()).decode()


_PLACEHOLDER = re.compile(r"\{([A-Za-z0-9]+)(?::([A-Za-z0-9]+)(?:-(\d+))?)?\}")


def _length(low: str | None, high: str | None, variant: int) -> int:
    a = int(low or 0)
    b = int(high) if high else a
    return (a, (a + b) // 2, b)[variant]


def expand(template: str, gen: _Gen, variant: int = 0) -> str:
    """Fill a value template (see the module docstring)."""

    def fill(match: re.Match[str]) -> str:
        name, low, high = match.group(1), match.group(2), match.group(3)
        if name in ALPHABETS and low is not None:
            n = _length(low, high, variant)
            return gen.password(n) if name == "pw" else gen.chars(name, n)
        size = _length(low, high, variant) if low and low.isdigit() else 0
        if name == "uuid":
            return gen.uuid()
        if name == "noteid":
            return "".join(gen.rng.choice(NOTE_ID_ALPHABET) for _ in range(10))
        if name == "jwt":
            return gen.jwt(size or (8, 40, 200)[variant])
        if name == "basic":
            user = gen.chars("user", 6)
            return base64.b64encode(f"{user}:{gen.password(12 + 4 * variant)}".encode()).decode()
        if name == "b64text":
            return gen.b64text(size or 48)
        if name == "putty":
            return gen.putty((64, 96, 160)[variant])
        if name in ("pem", "body", "derline"):
            kind = str(low)
            sizes = {"rsa": (600, 1190, 2350), "pkcs8": (630, 1220, 2380), "encrypted": (700, 1300, 2400)}
            size = sizes.get(kind, (120, 200, 400) if kind in ("ec", "pgp") else (260, 400, 700))[variant]
            if name == "pem":
                return gen.pem(kind, size)
            if name == "body":
                return gen.body(kind, size)
            return base64.b64encode(gen.der(kind, (48, 60, 72)[variant])).decode()
        raise ValueError(f"unknown placeholder {match.group(0)!r}")

    return _PLACEHOLDER.sub(fill, template)


def place(context: str, value: str) -> str:
    """Put `value` into a context template."""
    lines = value.splitlines() or [value]
    cut = value[: max(8, int(len(value) * 0.6))]
    return (
        context.replace("{v_json}", json.dumps(value))
        .replace("{v_indented}", "\n".join("    " + line for line in lines))
        .replace("{v_oneline}", " ".join(value.split()))
        .replace("{v_cut}", cut)
        .replace("{v}", value)
    )


def _data(name: str) -> dict[str, object]:
    loaded: dict[str, object] = json.loads((HERE / name).read_text(encoding="utf-8"))
    return loaded


def kinds() -> list[dict[str, object]]:
    return list(_data("kinds.json")["kinds"])  # type: ignore[call-overload]


def shaped_kinds() -> set[str]:
    """Kinds recognisable by the value alone (no `contexts` list of their own): these must go
    wherever they are, even in a file name or a branch."""
    return {str(spec["kind"]) for spec in kinds() if not isinstance(spec.get("contexts"), list)}


def secret_variants(seed: int = SEED) -> list[Variant]:
    """Every kind × three lengths × its contexts."""
    gen = _Gen(seed)
    data = _data("kinds.json")
    context_sets: dict[str, list[str]] = data["context_sets"]  # type: ignore[assignment]
    out: list[Variant] = []
    for spec in kinds():
        kind = str(spec["kind"])
        contexts = spec.get("contexts", "anywhere")
        context_list = context_sets[contexts] if isinstance(contexts, str) else list(contexts)  # type: ignore[arg-type]
        for template in spec["values"]:  # type: ignore[attr-defined]
            for variant in range(3):
                value = expand(str(template), gen, variant)
                for number, context in enumerate(context_list):
                    out.append(Variant(kind, f"{number}:{context[:40]}", value, place(context, value)))
    return out


def lookalikes(seed: int = SEED) -> list[Lookalike]:
    gen = _Gen(seed + 1)
    out: list[Lookalike] = []
    for spec in _data("lookalikes.json")["lookalikes"]:  # type: ignore[attr-defined]
        for variant in range(3):
            text = expand(str(spec["text"]), gen, variant)
            out.append(Lookalike(str(spec["name"]), text, bool(spec.get("fields", True))))
    return out


def ordinary_text() -> str:
    return (HERE / "ordinary.md").read_text(encoding="utf-8")


_FRAGMENT = re.compile(r"[A-Za-z0-9]{8,}")


def fragments(secret: str) -> list[str]:
    """The parts of `secret` that must not show up anywhere, in any case: every run of 8+
    letters and digits that mixes letters with digits or upper with lower case (constant
    words of a format, like `production` or `PRIVATE`, are left out)."""
    found = []
    for run in _FRAGMENT.findall(secret):
        letters = any(c.isalpha() for c in run)
        digits = any(c.isdigit() for c in run)
        mixed = any(c.islower() for c in run) and any(c.isupper() for c in run[1:])
        if (letters and digits) or mixed:
            found.append(run)
    return found


def leaks(secret: str, text: str) -> list[str]:
    """What of `secret` is in `text`: the whole value, or a fragment (case-insensitive)."""
    if secret in text:
        return [secret]
    low = text.lower()
    return [f for f in fragments(secret) if f.lower() in low]
