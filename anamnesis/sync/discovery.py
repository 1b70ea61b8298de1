"""Finding the other machines of this memory: mDNS on the LAN, `tailscale status` on a tailnet.

While `anamnesis watch` runs, the `Announcer` publishes a `_anamnesis._tcp.local.`
service whose TXT record holds this machine's id, the store id (the root
commit of memory/, so two people's stores never pair up), the git URL other
machines can sync with, and the current HEAD. It also browses for the same
service: when another machine of this store announces a new HEAD, the
watcher syncs at once (push-notify).

Discovery never adds a peer or syncs with a machine by itself: it only
lists them (`anamnesis peers discover`, `anamnesis init`) and tells `watch`
when to run the normal sync with the peers the user configured.

Tailscale carries no multicast, so on a tailnet the candidates come from
`tailscale status --json` instead: the online machines and their MagicDNS
names. Those are only candidates: nothing says they hold this store.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import ipaddress
import json
import logging
import queue
import re
import shlex
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import ifaddr
from zeroconf import IPVersion, ServiceBrowser, ServiceInfo, Zeroconf

from anamnesis.base.git import is_local_url, user_ssh_command
from anamnesis.base.paths import Store
from anamnesis.base.repo import root_commits
from anamnesis.base.settings import load_settings, machine_id

log = logging.getLogger("anamnesis.discovery")

SERVICE_TYPE = "_anamnesis._tcp.local."
TXT_VERSION = "1"
ROOT_CHARS = 16  # root commit ids are announced shortened; 64 bits tell stores apart
MAX_ROOTS = 8
DEFAULT_PORT = 22  # nominal: what other machines reach is the git URL (ssh)
PHONE_OS = frozenset(("ios", "android"))


@dataclass(frozen=True)
class Peer:
    """A machine found on the network (a candidate; `anamnesis.sync.peers.Peer` is a configured one)."""

    machine_id: str
    url: str
    head: str | None = None
    store_ids: tuple[str, ...] = ()
    host: str = ""
    addresses: tuple[str, ...] = ()
    same_store: bool = True
    source: str = "mdns"

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["store_ids"] = list(self.store_ids)
        data["addresses"] = list(self.addresses)
        return data


# -- what this machine announces ----------------------------------------------------------


def advertise_url(store: Store) -> str:
    """The git URL this machine announces: settings' `advertise_url`, else ssh://user@hostname/path."""
    configured = str(load_settings(store).get("advertise_url") or "").strip()
    if configured:
        return configured
    return f"ssh://{getpass.getuser()}@{socket.gethostname()}{store.memory.absolute()}"


def store_ids(store: Store) -> tuple[str, ...]:
    """The shortened root commits this store announces (one, unless histories were merged)."""
    return tuple(root[:ROOT_CHARS] for root in root_commits(store.memory)[:MAX_ROOTS])


def txt_record(store: Store, head: str | None) -> dict[str, str]:
    """The TXT record of this machine's announcement."""
    url = advertise_url(store)
    return {
        "v": TXT_VERSION,
        "mid": machine_id(store),
        "sid": ",".join(store_ids(store)),
        "url": url if len(url) <= 240 else "",  # a TXT string holds 255 bytes
        "head": head or "",
        "host": socket.gethostname()[:100],
    }


def parse_txt(properties: dict[bytes, bytes | None]) -> dict[str, str]:
    """A TXT record as text; undecodable or empty values become ''."""
    out: dict[str, str] = {}
    for key, value in properties.items():
        try:
            out[key.decode("utf-8")] = value.decode("utf-8") if value else ""
        except UnicodeDecodeError:
            continue
    return out


def peer_from_txt(
    txt: dict[str, str], addresses: tuple[str, ...] = (), ours: tuple[str, ...] = ()
) -> Peer | None:
    """The peer a TXT record describes; None if it is not an Anamnesis announcement we understand."""
    machine = txt.get("mid", "").strip()
    if not machine or txt.get("v", "") != TXT_VERSION:
        return None
    ids = tuple(s for s in txt.get("sid", "").split(",") if s)
    head = txt.get("head", "").strip().lower()
    return Peer(
        machine_id=machine,
        url=txt.get("url", ""),
        head=head if len(head) >= 7 and all(c in "0123456789abcdef" for c in head) else None,
        store_ids=ids,
        host=txt.get("host", ""),
        addresses=addresses,
        same_store=bool(set(ids) & set(ours)),
    )


def local_addresses() -> list[str]:
    """This machine's IPv4 addresses other machines may reach (loopback only if there is nothing else)."""
    found: list[str] = []
    for adapter in ifaddr.get_adapters():
        for ip in adapter.ips:
            if isinstance(ip.ip, str) and not ip.ip.startswith("127.") and ip.ip not in found:
                found.append(ip.ip)
    return found or ["127.0.0.1"]


def _instance_label(machine: str) -> str:
    label = "".join(c if c.isalnum() or c in "-_" else "-" for c in machine)[:60]
    return label or "anamnesis"


class Announcer:
    """Publishes this machine on the LAN and reports other machines of the same store.

    `on_peer` is called (from a worker thread) for every machine of this store
    that appears or changes its announcement, this machine excluded.
    """

    service_type = SERVICE_TYPE

    def __init__(self, store: Store, on_peer: Callable[[Peer], None] | None = None) -> None:
        self.store = store
        self.on_peer = on_peer
        self.machine = machine_id(store)
        self.instance_name = f"{_instance_label(self.machine)}.{SERVICE_TYPE}"
        self.peers: dict[str, Peer] = {}
        self._zc: Zeroconf | None = None
        self._info: ServiceInfo | None = None
        self._browser: Any = None
        self._names: queue.Queue[str | None] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._addresses: list[str] = []
        self._head: str | None = None
        self._ours: tuple[str, ...] = ()
        self._checked = 0.0

    @property
    def head(self) -> str | None:
        """The HEAD announced last."""
        return self._head

    def start(self, head: str | None) -> None:
        """Register the service (blocks about a second while mDNS probes the name) and start browsing."""
        self._ours = store_ids(self.store)
        self._head = head
        self._addresses = local_addresses()
        zc = Zeroconf(ip_version=IPVersion.V4Only)
        try:
            info = self._service_info(head)
            zc.register_service(info, allow_name_change=True)
            self.instance_name = info.name
            self._info = info
            self._zc = zc
            self._thread = threading.Thread(
                target=self._resolve_loop, name="anamnesis-discovery", daemon=True
            )
            self._thread.start()
            self._browser = ServiceBrowser(zc, SERVICE_TYPE, handlers=[self._on_change])
        except BaseException:
            self._zc = None
            zc.close()
            raise

    def _service_info(self, head: str | None) -> ServiceInfo:
        return ServiceInfo(
            SERVICE_TYPE,
            self.instance_name,
            port=DEFAULT_PORT,
            properties=txt_record(self.store, head),
            server=f"{_instance_label(self.machine)}.local.",
            parsed_addresses=self._addresses,
        )

    def set_head(self, head: str | None) -> None:
        """Announce a new HEAD (returns at once; the packets go out from zeroconf's loop)."""
        zc = self._zc
        if zc is None or zc.loop is None:
            return
        self._head = head
        info = self._service_info(head)
        self._info = info
        asyncio.run_coroutine_threadsafe(zc.async_update_service(info), zc.loop)

    def check_network(self) -> bool:
        """Follow interface changes (a laptop on a new network); True if the addresses changed."""
        zc = self._zc
        if zc is None:
            return False
        addresses = local_addresses()
        if addresses == self._addresses:
            return False
        log.info("network addresses changed to %s; announcing again", ", ".join(addresses))
        self._addresses = addresses
        with contextlib.suppress(Exception):
            zc.update_interfaces()
        self.set_head(self._head)
        return True

    def stop(self) -> None:
        """Say goodbye on the network and stop every thread."""
        zc, self._zc = self._zc, None
        self._names.put(None)
        if self._browser is not None:
            with contextlib.suppress(Exception):
                self._browser.cancel()
        if zc is not None:
            with contextlib.suppress(Exception):
                if self._info is not None:
                    zc.unregister_service(self._info)
            zc.close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _on_change(self, zeroconf: Zeroconf, service_type: str, name: str, state_change: Any) -> None:
        if name != self.instance_name and state_change.name in ("Added", "Updated"):
            self._names.put(name)

    def _resolve_loop(self) -> None:
        while True:
            name = self._names.get()
            if name is None:
                return
            zc = self._zc
            if zc is None:
                return
            try:
                info = zc.get_service_info(SERVICE_TYPE, name, timeout=2000)
                if info is None:
                    continue
                peer = peer_from_txt(parse_txt(info.properties), tuple(info.parsed_addresses()), self._ours)
                if peer is None or not peer.same_store or peer.machine_id == self.machine:
                    continue
                self.peers[peer.machine_id] = peer
                if self.on_peer is not None:
                    self.on_peer(peer)
            except Exception:
                log.exception("could not read the announcement of %s", name)


def discover(store: Store, seconds: float = 3.0, any_store: bool = False) -> list[Peer]:
    """Machines of this store announcing themselves on the LAN within `seconds` (this one excluded).

    With `any_store`, machines of other stores are listed too (marked
    `same_store=False`): what a machine that has not joined yet wants to see.
    """
    ours = store_ids(store) if store.memory.is_dir() else ()
    me = machine_id(store)
    names: set[str] = set()
    lock = threading.Lock()

    def seen(zeroconf: Zeroconf, service_type: str, name: str, state_change: Any) -> None:
        with lock:
            names.add(name)

    zc = Zeroconf(ip_version=IPVersion.V4Only)
    try:
        browser = ServiceBrowser(zc, SERVICE_TYPE, handlers=[seen])
        time.sleep(max(0.0, seconds))
        browser.cancel()
        found: dict[str, Peer] = {}
        with lock:
            todo = sorted(names)
        for name in todo:
            info = zc.get_service_info(SERVICE_TYPE, name, timeout=1000)
            if info is None:
                continue
            peer = peer_from_txt(parse_txt(info.properties), tuple(info.parsed_addresses()), ours)
            if peer is None or peer.machine_id == me or not (peer.same_store or any_store):
                continue
            found[peer.machine_id] = peer
    finally:
        zc.close()
    return sorted(found.values(), key=lambda p: (not p.same_store, p.machine_id))


# -- a URL that will connect ---------------------------------------------------------------

_URL_HOST = re.compile(r"^(?P<head>(?:ssh|git\+ssh|ssh\+git)://(?:[^@/]+@)?)(?P<host>\[[^\]]+\]|[^:/]+)(?P<tail>.*)$")
_SCP_HOST = re.compile(r"^(?P<head>(?:[^@/:]+@)?)(?P<host>[^@/:]+)(?P<tail>:.*)$")


def url_host(url: str) -> str:
    """The host an ssh URL names ('' for a path or a URL with no host)."""
    if is_local_url(url):
        return ""
    match = _URL_HOST.match(url) or _SCP_HOST.match(url)
    return match.group("host") if match else ""


def with_host(url: str, host: str) -> str:
    """`url` with its host replaced (an IPv6 address bracketed where the URL form needs it)."""
    match = _URL_HOST.match(url)
    if match:
        bracketed = f"[{host}]" if ":" in host and not host.startswith("[") else host
        return f"{match.group('head')}{bracketed}{match.group('tail')}"
    match = _SCP_HOST.match(url)
    if match and ":" not in host:
        return f"{match.group('head')}{host}{match.group('tail')}"
    return url


def ssh_alias(host: str, ssh: str | None = None) -> bool:
    """Whether the user's ssh configuration gives `host` a HostName of its own (an alias that will
    connect although no DNS knows the name). Reads the configuration only (`ssh -G`): no network."""
    try:
        command = [*shlex.split(ssh or user_ssh_command()), "-G", host]
        proc = subprocess.run(
            command, capture_output=True, text=True, timeout=5, stdin=subprocess.DEVNULL, check=False
        )
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return False
    for line in proc.stdout.splitlines():
        key, _, value = line.partition(" ")
        if key.lower() == "hostname":
            return proc.returncode == 0 and value.strip().lower() != host.lower()
    return False


def local_networks() -> list[ipaddress.IPv4Network]:
    """The IPv4 networks this machine has an address in (loopback left out)."""
    found = []
    for adapter in ifaddr.get_adapters():
        for ip in adapter.ips:
            if isinstance(ip.ip, str) and not ip.ip.startswith("127."):
                with contextlib.suppress(ValueError):
                    found.append(ipaddress.ip_network(f"{ip.ip}/{ip.network_prefix}", strict=False))
    return [n for n in found if isinstance(n, ipaddress.IPv4Network)]


def connectable_url(
    url: str,
    addresses: tuple[str, ...],
    tailnet: list[TailscaleCandidate] | None = None,
    networks: list[ipaddress.IPv4Network] | None = None,
    ssh: str | None = None,
) -> str:
    """The URL to suggest for a machine that announced `url` from `addresses`.

    A machine announces `ssh://user@<its hostname>/…` unless told otherwise,
    and a bare hostname (`laptop`) reaches it only through an ssh alias of
    that name. So a bare name that is no alias here becomes the machine's
    Tailscale name (when its name or an address is on the tailnet), else the
    address it was seen at, one of this machine's networks first. A name with
    a dot (a DNS or MagicDNS name, an `advertise_url` someone chose), an
    address, a path, or an alias are kept as they are.
    """
    host = url_host(url)
    if not host or "." in host or ":" in host or host.startswith("[") or ssh_alias(host, ssh):
        return url
    for cand in tailnet or []:
        if cand.hostname.lower() == host.lower() or set(cand.addresses) & set(addresses):
            return with_host(url, cand.name)
    seen = [a for a in addresses if ":" not in a and not a.startswith("127.")]
    nets = local_networks() if networks is None else networks
    near = [a for a in seen if any(ipaddress.ip_address(a) in net for net in nets)]
    return with_host(url, (near or seen)[0]) if seen else url


# -- Tailscale ----------------------------------------------------------------------------


@dataclass(frozen=True)
class TailscaleCandidate:
    """An online machine on this tailnet that could hold this store (not verified)."""

    name: str  # MagicDNS name, e.g. laptop.tail1234.ts.net
    hostname: str
    os: str
    addresses: tuple[str, ...]
    same_user: bool
    suggested_url: str = field(default="")

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["addresses"] = list(self.addresses)
        return data


def parse_tailscale_status(
    status: dict[str, Any], memory_path: str = ".anamnesis/memory"
) -> list[TailscaleCandidate]:
    """Candidates from the JSON of `tailscale status --json`: online peers that can run anamnesis.

    Phones, machines shared in from other tailnets and VPN exit nodes are
    left out; machines of the same tailnet user come first (tagged servers,
    such as an always-on hub, follow). The
    suggested URL is scp-style ssh to the MagicDNS name, with `memory_path`
    relative to the remote home.
    """
    me = status.get("Self") or {}
    my_user = me.get("UserID")
    suffix = str(status.get("MagicDNSSuffix") or "").strip(".")
    peers = status.get("Peer") or {}
    out: list[TailscaleCandidate] = []
    for node in peers.values() if isinstance(peers, dict) else []:
        if not isinstance(node, dict) or not node.get("Online"):
            continue
        os_name = str(node.get("OS") or "")
        if os_name.lower() in PHONE_OS:
            continue
        dns = str(node.get("DNSName") or "").rstrip(".")
        host = str(node.get("HostName") or "")
        if dns and suffix and not dns.endswith("." + suffix):
            continue  # shared in from another tailnet, or a VPN exit node: not one of the user's machines
        if not dns and host and suffix:
            dns = f"{host}.{suffix}"
        name = dns or host
        if not name:
            continue
        out.append(
            TailscaleCandidate(
                name=name,
                hostname=host,
                os=os_name,
                addresses=tuple(str(a) for a in node.get("TailscaleIPs") or []),
                same_user=my_user is not None and node.get("UserID") == my_user,
                suggested_url=f"{name}:{memory_path}",
            )
        )
    return sorted(out, key=lambda c: (not c.same_user, c.name))


def tailscale_status(timeout: float = 5.0) -> dict[str, Any] | None:
    """The JSON of the local `tailscale status --json`; None when tailscale is not installed or not running."""
    exe = shutil.which("tailscale")
    if exe is None:
        return None
    try:
        proc = subprocess.run(
            [exe, "status", "--json"],
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
        data = json.loads(proc.stdout) if proc.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return None
    if not isinstance(data, dict) or data.get("BackendState") not in (None, "Running"):
        return None
    return data


def tailscale_candidates(timeout: float = 5.0) -> list[TailscaleCandidate] | None:
    """Candidates from the local `tailscale` command; None when it is not installed or not running."""
    data = tailscale_status(timeout)
    return None if data is None else parse_tailscale_status(data)


def own_tailscale_name(status: dict[str, Any]) -> str:
    """This machine's MagicDNS name (laptop.tail1234.ts.net) in a `tailscale status --json`, or ''."""
    me = status.get("Self") or {}
    return str(me.get("DNSName") or "").rstrip(".") if isinstance(me, dict) else ""


def reachable_name(timeout: float = 5.0) -> str:
    """The name other machines reach this one by: its Tailscale name when tailscale runs, else its host name."""
    data = tailscale_status(timeout)
    return (own_tailscale_name(data) if data is not None else "") or socket.gethostname()
