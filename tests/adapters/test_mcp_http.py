"""`anamnesis mcp --http`: the real CLI serving on loopback, driven by the official MCP SDK client
over streamable HTTP, and the gate in front of it (Host, Origin, token)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import httpx2
import pytest
from conftest import RunCli
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp_support import served

from anamnesis.base.paths import Store


def post(url: str, headers: dict[str, str]) -> tuple[int, str]:
    """A bare JSON-RPC initialize POST with `headers`: the status and the body."""
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        }
    ).encode()
    request = urllib.request.Request(
        url,
        data=body,
        method="POST",
        headers={
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            **headers,
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_the_official_client_saves_and_finds_a_note_over_http(store: Store) -> None:
    with served(store.home) as server:

        async def main() -> tuple[list[str], Any, Any]:
            headers = {"Authorization": f"Bearer {server.token}"}
            async with (
                httpx2.AsyncClient(headers=headers, timeout=30) as http,
                streamable_http_client(server.url, http_client=http) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                tools = [tool.name for tool in (await session.list_tools()).tools]
                saved = await session.call_tool(
                    "write",
                    {
                        "title": "Orders deploy runs through Argo",
                        "body": "Argo syncs orders from main.",
                        "type": "procedural",
                    },
                )
                found = await session.call_tool("search", {"query": "argo orders deploy"})
                return tools, saved, found

        tools, saved, found = asyncio.run(asyncio.wait_for(main(), timeout=60))
    assert {"write", "search", "read"} <= set(tools), tools
    assert not saved.is_error, saved.content
    assert not found.is_error and "Orders deploy runs through Argo" in found.content[0].text, found.content
    notes = [p.read_text() for p in store.memory.rglob("*.md")]
    assert any("Argo syncs orders from main." in text for text in notes)  # written in the store itself


def test_the_gate_refuses_a_missing_or_wrong_token_a_foreign_host_and_a_foreign_origin(store: Store) -> None:
    with served(store.home) as server:
        port = server.url.split(":")[2].split("/")[0]
        good = {"Authorization": f"Bearer {server.token}"}
        answers = {
            "no token": post(server.url, {}),
            "wrong token": post(server.url, {"Authorization": "Bearer not-the-token"}),
            "foreign host": post(server.url, {**good, "Host": f"evil.example.com:{port}"}),
            "foreign origin": post(server.url, {**good, "Origin": "http://evil.example.com"}),
            "header": post(server.url, good),
            "query": post(f"{server.url}?token={server.token}", {"Origin": f"http://localhost:{port}"}),
        }
    for what in ("no token", "wrong token"):
        status, body = answers[what]
        assert status == 401, (what, status, body)
        assert "token needed" in json.loads(body)["error"]["message"] and "\n" not in body
    for what in ("foreign host", "foreign origin"):
        assert answers[what][0] == 403, (what, answers[what])
    for what in ("header", "query"):
        status, body = answers[what]
        assert status == 200 and '"serverInfo"' in body, (what, status, body[:300])


def test_the_token_is_kept_private_and_the_same_until_renewed(store: Store) -> None:
    with served(store.home) as first:
        pass
    token_file = store.state_dir / "mcp-http.token"
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    with served(store.home) as again:
        assert again.token == first.token  # a client is configured once
    with served(store.home, "--new-token") as renewed:
        assert renewed.token != first.token
        assert post(renewed.url, {"Authorization": f"Bearer {first.token}"})[0] == 401


def test_only_loopback_addresses_are_served(store: Store, run_cli: RunCli) -> None:
    result = run_cli("mcp", "--http", "--host", "0.0.0.0", "--port", "0")
    assert result.returncode != 0
    message = result.stderr.strip()
    assert "loopback" in message and len(message.splitlines()) == 1, message
    assert not (store.state_dir / "mcp-http.token").exists()  # nothing made for a refused start


def test_host_and_origin_are_names_in_any_case_as_the_gate_says(store: Store) -> None:
    # The gate compares Host and Origin case-insensitively; the SDK behind it compared them exactly
    # and answered a plain-text 421 to `LOCALHOST`, even when that was the address it printed.
    with served(store.home) as server:
        port = server.url.split(":")[2].split("/")[0]
        good = {"Authorization": f"Bearer {server.token}"}
        upper = post(server.url, {**good, "Host": f"LOCALHOST:{port}", "Origin": f"http://LOCALHOST:{port}"})
    with served(store.home, "--host", "LOCALHOST") as spelled:
        printed = post(spelled.url, {"Authorization": f"Bearer {spelled.token}"})
    with served(store.home, "--host", "[::1]") as bracketed:  # as in a URL: was "Name or service not known"
        v6 = post(bracketed.url, {"Authorization": f"Bearer {bracketed.token}"})
    for what, (status, body) in {"upper": upper, "printed": printed, "[::1]": v6}.items():
        assert status == 200 and '"serverInfo"' in body, (what, status, body[:300])
    assert spelled.url.startswith("http://localhost:") and bracketed.url.startswith("http://[::1]:")


@pytest.mark.parametrize("port", ["99999", "-1", "65536"])
def test_a_port_out_of_range_is_one_line_of_usage_error(store: Store, run_cli: RunCli, port: str) -> None:
    result = run_cli("mcp", "--http", "--port", port)
    assert result.returncode == 2, (result.returncode, result.stderr)
    message = result.stderr.strip()
    assert "65535" in message and "Traceback" not in message and len(message.splitlines()) == 1, message


KEPT_BADLY = {
    "readable by others": ("mode", 0o644),
    "too short to be a secret": ("text", "a\n"),
    "not one token": ("text", "abc def ghi jkl mno pqr stu vwx yz0 123\n"),
    "binary": ("bytes", b"\xff\xfe\x00" * 20),
    "a symlink to another file": ("symlink", "precious.txt"),
}


@pytest.mark.parametrize("case", sorted(KEPT_BADLY))
def test_a_kept_token_that_is_not_a_secret_is_replaced_and_nothing_else_is_touched(
    store: Store, case: str
) -> None:
    token_file = store.state_dir / "mcp-http.token"
    with served(store.home) as first:
        pass
    other = store.home.parent / "precious.txt"
    other.write_text("precious content\n")
    how, what = KEPT_BADLY[case]
    if how == "mode":
        token_file.chmod(what)  # any local user could read it: it is no secret any more
    elif how == "text":
        token_file.write_text(str(what))
    elif how == "bytes":
        token_file.write_bytes(bytes(what))  # type: ignore[arg-type]
    else:
        token_file.unlink()
        token_file.symlink_to(other)
    for args in ((), ("--new-token",)):
        with served(store.home, *args) as again:
            assert again.token != first.token, again.token
            assert re.fullmatch(r"[A-Za-z0-9_-]{32,}", again.token), again.token
            assert post(again.url, {"Authorization": f"Bearer {again.token}"})[0] == 200
        assert not token_file.is_symlink() and token_file.read_text().strip() == again.token
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        assert other.read_text() == "precious content\n"  # a symlink's target is never read out nor written


def test_a_token_file_that_cannot_be_kept_is_named_in_one_line(store: Store, run_cli: RunCli) -> None:
    (store.state_dir / "mcp-http.token").mkdir(parents=True)
    result = run_cli("mcp", "--http", "--port", "0")
    message = result.stderr.strip()
    assert result.returncode != 0 and len(message.splitlines()) == 1, message
    assert "mcp-http.token" in message and "cannot listen" not in message, message


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_sigterm_and_ctrl_c_stop_the_server_cleanly(store: Store, sig: signal.Signals) -> None:
    with served(store.home) as server:
        server.proc.send_signal(sig)
        assert server.proc.wait(timeout=15) == 0  # not killed by the signal: its clean-up ran
        assert "Traceback" not in (server.proc.stderr.read() if server.proc.stderr else "")
    assert list((store.state_dir / "mcp-servers").iterdir()) == []  # no lock file left behind


def test_uninstall_stops_a_running_http_server(store: Store, run_cli: RunCli) -> None:
    with served(store.home) as server:
        planned = run_cli("uninstall", "--print")
        assert f"pid {server.proc.pid}" in planned.stdout and "mcp --http" in planned.stdout, planned.stdout
        done = run_cli("uninstall")
        assert done.returncode == 0, done.stderr
        assert f"stopped `anamnesis mcp --http` (pid {server.proc.pid})" in done.stdout, done.stdout
        assert server.proc.wait(timeout=10) is not None
    from anamnesis.base.running import held_in

    assert held_in(store.state_dir / "mcp-servers") == []


# The official suite's scenarios that any server can pass. The others call the fixtures of its own
# reference server (tools named test_image_content, resources at test://static-text, ...).
CONFORMANCE = (
    "server-initialize",
    "ping",
    "tools-list",
    "tools-call-error",  # an unknown tool is an error result with a message
    "completion-complete",  # for a prompt it does not have: no suggestion, as the SDK answers
    "resources-list",
    "prompts-list",
    "server-sse-multiple-streams",
    "dns-rebinding-protection",
)


def _conformance_command() -> list[str]:
    """Node 22 or newer and the suite's script (scripts/test installs both from npm)."""
    cache = Path.home() / ".cache/anamnesis-test/conformance/node_modules"
    script = os.environ.get("ANAMNESIS_CONFORMANCE_BIN") or str(
        cache / "@modelcontextprotocol/conformance/dist/index.js"
    )
    node = os.environ.get("ANAMNESIS_CONFORMANCE_NODE") or next(
        (str(found) for found in cache.glob("node-linux-*/bin/node")), "node"
    )
    if Path(script).is_file() and shutil.which(node):
        return [node, script]
    message = f"the MCP conformance suite is not at {script}: scripts/test installs it from npm"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message)
    pytest.skip(message)


@pytest.mark.e2e
def test_the_official_mcp_conformance_suite_passes_every_scenario_that_applies(store: Store) -> None:
    runner = _conformance_command()
    with served(store.home) as server:
        results = {}
        for scenario in CONFORMANCE:
            run = subprocess.run(
                [*runner, "server", "--url", f"{server.url}?token={server.token}", "--scenario", scenario],
                capture_output=True,
                text=True,
                timeout=120,
            )
            plain = re.sub(r"\x1b\[[0-9;]*m", "", run.stdout + run.stderr)
            counted = re.search(r"Passed: (\d+)/(\d+), (\d+) failed", plain)
            results[scenario] = (run.returncode, counted.groups() if counted else None, plain[-1500:])
    for scenario, (_code, counted, output) in results.items():
        assert counted is not None and counted[0] == counted[1] and counted[2] == "0", (scenario, output)
