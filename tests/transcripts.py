"""Build Claude Code transcripts (JSONL) shaped like the real client writes them.

Shapes follow what the client records (see claude-code.md): one assistant
content block per line sharing `message.id`, tool results in user lines as a
string or a list of text blocks, attachment lines for hook context, meta
lines, compaction boundaries and line types we do not know.
"""

from __future__ import annotations

import itertools
import json
import uuid
from pathlib import Path
from typing import Any

_clock = itertools.count()


def _stamp() -> str:
    n = next(_clock)
    return f"2026-03-0{1 + (n // 3600) % 9}T{(n // 60) % 24:02d}:{n % 60:02d}:00.000Z"


class Transcript:
    """Append realistic lines; `write()` puts them in a .jsonl file."""

    def __init__(
        self, session_id: str | None = None, cwd: str = "/home/dev/acme-api", branch: str = "main"
    ) -> None:
        self.session_id = session_id or str(uuid.uuid4())
        self.cwd = cwd
        self.branch = branch
        self.lines: list[dict[str, Any]] = []
        self._parent: str | None = None

    def _base(self, kind: str, **extra: Any) -> dict[str, Any]:
        uid = str(uuid.uuid4())
        line = {
            "parentUuid": self._parent,
            "isSidechain": False,
            "userType": "external",
            "cwd": self.cwd,
            "sessionId": self.session_id,
            "version": "2.1.197",
            "gitBranch": self.branch,
            "type": kind,
            "uuid": uid,
            "timestamp": _stamp(),
        }
        line.update(extra)
        self._parent = uid
        self.lines.append(line)
        return line

    def prompt(self, text: str, **extra: Any) -> Transcript:
        self._base("user", message={"role": "user", "content": text}, **extra)
        return self

    def prompt_blocks(self, *texts: str) -> Transcript:
        content = [{"type": "text", "text": t} for t in texts]
        self._base("user", message={"role": "user", "content": content})
        return self

    def reply(self, *blocks: dict[str, Any], model: str = "claude-sonnet-4-5") -> Transcript:
        """One assistant reply: one line per content block, all with the same message id."""
        msg_id = f"msg_{uuid.uuid4().hex[:24]}"
        for block in blocks:
            self._base(
                "assistant",
                message={
                    "id": msg_id,
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [block],
                    "stop_reason": None,
                    "usage": {"input_tokens": 10, "output_tokens": 5},
                },
                requestId=f"req_{msg_id}",
            )
        return self

    def say(self, text: str) -> Transcript:
        return self.reply({"type": "text", "text": text})

    def tool(self, name: str, tool_input: dict[str, Any], result: Any = "ok") -> Transcript:
        """A tool call and its result (result: a string or a list of text blocks)."""
        tool_id = f"toolu_{uuid.uuid4().hex[:20]}"
        self.reply({"type": "tool_use", "id": tool_id, "name": name, "input": tool_input})
        self._base(
            "user",
            message={
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": tool_id, "content": result}],
            },
            toolUseResult={"stdout": str(result)[:100]},
        )
        return self

    def write_file(self, path: str, content: str = "print('hi')\n") -> Transcript:
        return self.tool("Write", {"file_path": path, "content": content})

    def edit_file(self, path: str, old: str = "hi", new: str = "hello") -> Transcript:
        return self.tool(
            "Edit", {"file_path": path, "old_string": old, "new_string": new, "replace_all": False}
        )

    def bash(self, command: str, output: Any = "") -> Transcript:
        return self.tool("Bash", {"command": command, "description": "run"}, output)

    def failed_tool(self, name: str, tool_input: dict[str, Any], error: str) -> Transcript:
        """A tool call the client refused or that errored, as recorded: `is_error` and the error wrapper."""
        self.tool(name, tool_input, f"<tool_use_error>{error}</tool_use_error>")
        self.lines[-1]["message"]["content"][0]["is_error"] = True
        self.lines[-1]["toolUseResult"] = f"Error: {error}"
        return self

    def failed_bash(self, command: str, output: str, code: int = 1) -> Transcript:
        """A command that ran and exited non-zero (the client's "Exit code N" result, `is_error`)."""
        self.bash(command, f"Exit code {code}\n{output}")
        self.lines[-1]["message"]["content"][0]["is_error"] = True
        return self

    def mcp(self, server: str, tool: str, tool_input: dict[str, Any], result: str) -> Transcript:
        """An MCP tool call (`mcp__<server>__<tool>`) and its text result, as a list of text blocks."""
        return self.tool(f"mcp__{server}__{tool}", tool_input, [{"type": "text", "text": result}])

    def attachment(self, text: str) -> Transcript:
        """Hook context as the client records it (an attachment line)."""
        self._base(
            "attachment",
            attachment={"type": "hook_additional_context", "content": [text], "hookEvent": "SessionStart"},
        )
        return self

    def meta(self, text: str) -> Transcript:
        self._base("user", message={"role": "user", "content": text}, isMeta=True)
        return self

    def compact(self, summary: str = "Summary of the conversation so far.") -> Transcript:
        self._base("system", subtype="compact_boundary", content="Conversation compacted", level="info")
        self._base("user", message={"role": "user", "content": summary}, isCompactSummary=True)
        return self

    def unknown(self, kind: str = "future-thing", **extra: Any) -> Transcript:
        self.lines.append({"type": kind, "sessionId": self.session_id, **extra})
        return self

    def raw(self, line: dict[str, Any]) -> Transcript:
        self.lines.append(line)
        return self

    def text(self) -> str:
        return "".join(json.dumps(line) + "\n" for line in self.lines)

    def write(self, path: Path, *, truncate_last: int = 0) -> Path:
        data = self.text()
        if truncate_last:
            data = data.rstrip("\n")[:-truncate_last]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(data, encoding="utf-8")
        return path


def typical(session_id: str | None = None, cwd: str = "/home/dev/acme-api") -> Transcript:
    """A small real-looking session: a prompt, a file written and edited, tests run, an answer."""
    t = Transcript(session_id, cwd=cwd, branch="fix/db-pool")
    t.raw({"type": "queue-operation", "operation": "enqueue", "sessionId": t.session_id})
    t.prompt("Fix the connection pool timeout in the orders service")
    t.say("I'll look at the pool configuration.")
    t.write_file(f"{cwd}/src/pool.py", "POOL_SIZE = 20\n")
    t.edit_file(f"{cwd}/src/orders.py", "timeout=5", "timeout=30")
    t.bash("pytest -q tests/test_orders.py", [{"type": "text", "text": "3 passed"}])
    t.say("The pool now holds 20 connections and the timeout is 30 s; tests pass.")
    return t


# (kind, text containing a secret, the secret itself). Values are fake but shaped like the real thing.
SECRETS: list[tuple[str, str, str]] = [
    ("aws access key", "export AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"),
    (
        "aws secret key",
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "wJalrXUtnFEMI/K7MDENG",
    ),
    ("google api key", "key=AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY in the url", "AIzaSyD-9tSrke72PouQMnMX"),
    (
        "gcp service account",
        '{"private_key": "-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\\n-----END PRIVATE KEY-----\\n"}',
        "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC",
    ),
    (
        "azure storage",
        "DefaultEndpointsProtocol=https;AccountName=acme;AccountKey=Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MA==;",
        "Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MA",
    ),
    (
        "azure sas",
        "https://acme.blob.core.windows.net/c?sv=2022&sig=AbCdEfGhIjKlMnOpQrStUvWxYz0123456789%3D",
        "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
    ),
    (
        "github token",
        "git clone with ghp_16C7e42F292c6912E7710c838347Ae178B4a in the header",
        "ghp_16C7e42F292c6912E7710c838347Ae178B4a",
    ),
    (
        "github fine-grained",
        "token github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
        "github_pat_11ABCDEFG0123456789",
    ),
    ("gitlab token", "glpat-xxYYzz0123456789abcd used for CI", "glpat-xxYYzz0123456789abcd"),
    (
        "slack token",
        "SLACK=xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
        "xoxb-123456789012-1234567890123",
    ),
    ("stripe key", "stripe.api_key = 'sk_live_4eC39HqLyjWDarjtT1zdp7dc'", "4eC39HqLyjWDarjtT1zdp7dc"),
    (
        "anthropic key",
        "ANTHROPIC_API_KEY=sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz012345",
        "AbCdEfGhIjKlMnOpQrStUvWxYz012345",
    ),
    (
        "openai key",
        "client = OpenAI(api_key='sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz0123')",
        "AbCdEfGhIjKlMnOpQrStUvWxYz0123",
    ),
    (
        "jwt",
        "Cookie: session=eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    ),
    (
        "bearer header",
        "curl -H 'Authorization: Bearer 9f8e7d6c5b4a3f2e1d0c9b8a7f6e5d4c' https://api",
        "9f8e7d6c5b4a3f2e1d0c9b8a7f6e5d4c",
    ),
    ("basic auth header", "Authorization: Basic dXNlcjpodW50ZXIyaHVudGVyMg==", "dXNlcjpodW50ZXIyaHVudGVyMg"),
    (
        "rsa private key",
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7bq98fakefakefake\nmorekeymaterialhere\n-----END RSA PRIVATE KEY-----",
        "MIIEowIBAAKCAQEA7bq98fakefakefake",
    ),
    (
        "openssh private key",
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmU\n-----END OPENSSH PRIVATE KEY-----",
        "b3BlbnNzaC1rZXktdjEAAAAABG5vbmU",
    ),
    (
        "cut private key",
        "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIIrYSSNQFaA2Hwf1duRSxKtLYX5CB04fSeQ6tF1aY",
        "MHcCAQEEIIrYSSNQFaA2Hwf1duRSxKtLYX5CB04fSeQ6tF1aY",
    ),
    ("password in url", "DATABASE_URL=postgres://app:Tr0ub4dor&3@db.internal:5432/app", "Tr0ub4dor&3"),
    (
        "password in https url",
        "git remote add origin https://bob:hunter2hunter2@git.example.org/x.git",
        "hunter2hunter2",
    ),
    ("password key=value", "mysql_password=CorrectHorseBattery9", "CorrectHorseBattery9"),
    ("password in json", '{"db": {"password": "p@ss w0rd with spaces"}}', "p@ss w0rd with spaces"),
    ("password flag", "mysql -u root --password S3cr3tFl4g db", "S3cr3tFl4g"),
    (
        "yaml secret",
        "client_secret: 8Q~abcDEFghiJKLmnoPQRstuVWXyz012345",
        "8Q~abcDEFghiJKLmnoPQRstuVWXyz012345",
    ),
    (".env line", "STRIPE_WEBHOOK_SECRET=whsec_abcdefghijklmnop", "whsec_abcdefghijklmnop"),
    (".env quoted", 'export SESSION_KEY="a b c d e f g"', "a b c d e f g"),
    (".env dsn", "SENTRY_DSN=https://abc123def456@o1.ingest.sentry.io/42", "abc123def456"),
    (
        "npm token",
        "//npm.registry.example/:_authToken=npm_abcdefghijklmnopqrstuvwxyz0123456789",
        "npm_abcdefghijklmnopqrstuvwxyz0123456789",
    ),
    (
        "huggingface token",
        "HF=hf_abcdefghijklmnopqrstuvwxyzABCDEFGH",
        "hf_abcdefghijklmnopqrstuvwxyzABCDEFGH",
    ),
    ("curl user:password", "curl -u admin:Hunter2Hunter2 https://api.example.org", "Hunter2Hunter2"),
    ("curl --user", "curl --user 'deploy:Pa55w0rdPa55' https://api.example.org", "Pa55w0rdPa55"),
    (
        "json-escaped password",
        'curl -d "{\\"username\\": \\"bob\\", \\"password\\": \\"Esc4pedSecret\\"}" https://x',
        "Esc4pedSecret",
    ),
    (
        "quoted authorization header",
        "requests.get(url, headers={'Authorization': 'Basic dXNlcjpwYXNzd29yZDEyMw=='})",
        "dXNlcjpwYXNzd29yZDEyMw",
    ),
    (
        "s3 presigned url",
        "https://b.s3.amazonaws.com/k?X-Amz-Date=20250101&X-Amz-Signature=9f8e7d6c5b4a39f8e7d6c5b4a3f2e1d0",
        "9f8e7d6c5b4a39f8e7d6c5b4a3f2e1d0",
    ),
    (
        "gcs signed url",
        "https://storage.googleapis.com/b/o?X-Goog-Signature=0a1b2c3d4e5f60718293a4b5c6d7e8f9&X-Goog-Expires=60",
        "0a1b2c3d4e5f60718293a4b5c6d7e8f9",
    ),
    ("slack app token", "SLACK_APP=xapp-1-A0123BCDE-0123456789-abcdef0123456789", "abcdef0123456789"),
    (
        "base64 blob as key",
        'key: "c2VjcmV0LWJsb2ItZm9yLXRlc3RpbmcxMjM0NQ=="',
        "c2VjcmV0LWJsb2ItZm9yLXRlc3RpbmcxMjM0NQ",
    ),
    ("mysql -p", "mysql -u root -pMyDbP4ssw0rd shop", "MyDbP4ssw0rd"),
    ("npmrc _auth", "//npm.registry.example/:_auth=dXNlcjpucG1wYXNzd29yZA==", "dXNlcjpucG1wYXNzd29yZA"),
    ("netrc line", "machine api.example.org login bob password N3trcP4ssw0rd", "N3trcP4ssw0rd"),
    ("az login -p", "az login --service-principal -u app-id -p Az5ecretV4lue --tenant t", "Az5ecretV4lue"),
    ("docker login -p", "docker login -u ci -p D0ckerHubP4ss registry.example.org", "D0ckerHubP4ss"),
]
