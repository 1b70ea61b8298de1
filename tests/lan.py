"""Two machines on one LAN segment for discovery tests: network namespaces joined by a veth pair.

Running as root where `ip netns` works (CI does), each machine gets its own
network namespace with one end of a veth pair and a 10.x address that exists
only inside those namespaces, so mDNS packets really cross an interface and
the link can be taken down and brought back. Elsewhere the two machines share
the host's network (multicast loops back), and tests that need a link to cut
skip, saying why (or fail when CI=true: CI must run them).

Everything is named after the test process's pid and removed afterwards.
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

_serial = itertools.count()


def skip_or_fail(reason: str) -> None:
    """Skip with `reason`, except under CI, where a skipped discovery test would hide a failure."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI must run this test, but: {reason}")
    pytest.skip(reason)


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if check and proc.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)} failed: {proc.stderr.strip()}")
    return proc


def netns_unavailable() -> str | None:
    """Why network namespaces cannot be used here, or None if they can."""
    if os.environ.get("ANAMNESIS_TEST_NO_NETNS"):
        return "ANAMNESIS_TEST_NO_NETNS is set"
    if os.geteuid() != 0:
        return "network namespaces need root (run the suite as root, as CI does)"
    if shutil.which("ip") is None:
        return "the `ip` command (iproute2) is not installed"
    probe = f"anprobe{os.getpid()}"
    proc = _ip("netns", "add", probe, check=False)
    if proc.returncode != 0:
        return f"`ip netns add` does not work here: {proc.stderr.strip()}"
    _ip("netns", "del", probe, check=False)
    return None


def host_multicast_unavailable() -> str | None:
    """Why mDNS between two processes on this host's own network cannot work, or None."""
    import ifaddr

    for adapter in ifaddr.get_adapters():
        for ip in adapter.ips:
            if isinstance(ip.ip, str) and not ip.ip.startswith("127."):
                return None
    return "this host has no IPv4 interface besides loopback, so mDNS has nowhere to go"


class Lan:
    """Two sides, 'a' and 'b': `prefix(side)` runs a command on that side's network."""

    def __init__(self, netns: bool) -> None:
        self.netns = netns
        tag = f"{os.getpid() % 100000}{next(_serial)}"
        self.names = {"a": f"anam{tag}a", "b": f"anam{tag}b"}
        self.links = {"a": f"van{tag}"[:15], "b": f"vbn{tag}"[:15]}
        subnet = (os.getpid() + next(_serial)) % 250 + 1
        self.addresses = {"a": f"10.213.{subnet}.1", "b": f"10.213.{subnet}.2"}
        self._made: list[str] = []

    def prefix(self, side: str) -> list[str]:
        """The command prefix that runs a program on `side`'s network ([] on the host network)."""
        return ["ip", "netns", "exec", self.names[side]] if self.netns else []

    def setup(self) -> None:
        if not self.netns:
            return
        for side in ("a", "b"):
            _ip("netns", "add", self.names[side])
            self._made.append(self.names[side])
        _ip("link", "add", self.links["a"], "type", "veth", "peer", "name", self.links["b"])
        for side in ("a", "b"):
            ns, link = self.names[side], self.links[side]
            _ip("link", "set", link, "netns", ns)
            _ip("-n", ns, "addr", "add", f"{self.addresses[side]}/24", "dev", link)
            _ip("-n", ns, "link", "set", "lo", "up")
        self.link_up()

    def link_down(self) -> None:
        """Cut the cable: both ends of the veth pair go down."""
        assert self.netns, "only a namespace pair has a link to cut"
        for side in ("a", "b"):
            _ip("-n", self.names[side], "link", "set", self.links[side], "down")

    def link_up(self) -> None:
        """Plug it back in (and restore the multicast route the kernel dropped with the link)."""
        assert self.netns
        for side in ("a", "b"):
            ns, link = self.names[side], self.links[side]
            _ip("-n", ns, "link", "set", link, "up")
            _ip("-n", ns, "route", "replace", "224.0.0.0/4", "dev", link)

    def cleanup(self) -> None:
        for name in reversed(self._made):
            _ip("netns", "del", name, check=False)  # takes its end of the veth pair with it
        self._made.clear()


@contextmanager
def lan(require_netns: bool) -> Iterator[Lan]:
    """A two-machine LAN: namespaces if possible; the host network otherwise (unless `require_netns`)."""
    reason = netns_unavailable()
    if reason is None:
        network = Lan(netns=True)
    else:
        if require_netns:
            skip_or_fail(reason)
        host = host_multicast_unavailable()
        if host is not None:
            skip_or_fail(f"{reason}; and {host}")
        network = Lan(netns=False)
    try:
        network.setup()
        yield network
    finally:
        network.cleanup()
