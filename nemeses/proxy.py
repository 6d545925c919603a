"""Faults of the write path, made by the proxy beside each holder (:mod:`harness.nodeside.proxy`).

Five kinds, one registry entry each, all aimed at a worker (the holder by default) and carried out
by the proxy on that node between its holder and the lock service and sinks (a run with one of
them inserts the proxy: :mod:`harness.run.proxies`):

- ``hold``: everything the holder sends waits in the proxy until the window ends, then goes on in
  order. The lease-aware shape: the window begins inside a write (between the holder's lease check
  and its send), its keepalives wait too, so the lease lapses, another holder takes over, and the
  window ends once that one had its first write accepted (``end_after_writes`` 1): the held
  write arrives after the new holder's, as in Kleppmann's figure with tokens 33 and 34.
- ``delay``: latency and jitter per direction, on the keepalives only (``to: lock``: a lease that
  lapses with no partition) or on everything.
- ``loss``: a fraction of new connections (``mode: connections``) or of segments dropped.
- ``reset``: an RST in the middle of a request or of its reply, on the write path (``to: store``):
  the outcome of the write is unknown.
- ``replay``: a write is sent again, ``after_s`` after it was delivered once, on a connection of
  the proxy's own. The proxy must know where a request ends: the system's
  :class:`systems.base.FramesRequests` ability (a run without it is refused).

The controller talks to each proxy's control port directly (with the run's secret, read once per
node from the file the proxy's command line names). Each start returns once the proxy answered
that the fault is in force; each stop once the proxy
delivered what it held, and records the proxy's own report of what it did (``proxy``: per node,
what it held from when and delivered when, what it dropped, reset or replayed).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any, Final

from harness.node import Node, NodeError
from harness.nodeside import proxy, wire
from harness.record import SAID
from nemeses._base import NodeNemesis
from nemeses.kinds import END_AFTER_WRITES, Draw, FaultKind, Leftovers, ManualCommand, ManualOption
from nemeses.protocol import Fault, HealReport, NemesisError, fault_fs

__all__ = [
    "CHAIN",
    "DELAY_KIND",
    "HOLD_KIND",
    "LOSS_KIND",
    "PROXY_DAEMON",
    "PROXY_KINDS",
    "REPLAY_KIND",
    "RESET_KIND",
    "ProxyNemesis",
    "ask_proxy",
    "proxy_token",
    "redirect_script",
    "removal_script",
    "said_by_proxy",
]

PROXY_KINDS: Final = ("hold", "delay", "loss", "reset", "replay")
"""The fault kinds the proxy makes (a run with one inserts it)."""
PROXY_DAEMON: Final = "proxy"
"""The proxy's daemon name on a worker."""
CHAIN: Final = "FENCECHECK-PROXY"
"""Our chain in the ``nat`` table of a worker: REDIRECTs to the proxy."""

_TIMEOUT_S: Final = 30.0
_DELAY_TTL: Final = (0.2, 0.5, 1.2)
"""Latencies a schedule draws, in lease TTLs: a keepalive late, later, later than the lease."""
_LOSS_P: Final = (0.3, 0.6, 1.0)


def redirect_script(peers: dict[str, str], port: int = proxy.PORT) -> bytes:
    """``iptables-restore --noflush`` input that redirects the worker's TCP connections to each
    peer address to the proxy's ``port``, except the proxy's own (marked) ones."""
    lines = ["*nat", f":{CHAIN} - [0:0]", f"-I OUTPUT 1 -p tcp -j {CHAIN}"]
    lines.append(f"-A {CHAIN} -m mark --mark {proxy.MARK:#x} -j RETURN")
    lines += [
        f"-A {CHAIN} -p tcp -d {address}/32 -j REDIRECT --to-ports {port}" for address in peers
    ]
    return "\n".join([*lines, "COMMIT", ""]).encode()


def removal_script() -> bytes:
    """``iptables-restore --noflush`` input that removes our chain and its jump."""
    return "\n".join(
        ["*nat", f":{CHAIN} - [0:0]", f"-D OUTPUT -p tcp -j {CHAIN}", f"-X {CHAIN}", "COMMIT", ""]
    ).encode()


def proxy_token(node: Node) -> str | None:
    """The run's secret the proxy on ``node`` requires (read from the file its recorded command
    line names); ``None`` when it was started without one; :class:`NemesisError` when ``node``
    runs no proxy."""
    daemons = [daemon for daemon in node.daemons() if daemon.name == PROXY_DAEMON]
    if not daemons:
        raise NemesisError(
            f"{node.name}: no write-path proxy runs there (a run inserts it on the workers when "
            f"it asks for {', '.join(PROXY_KINDS)}); aim proxy faults at workers"
        )
    argv = list(daemons[-1].argv)
    if "--secret-file" not in argv:
        return None
    path = argv[argv.index("--secret-file") + 1]
    try:
        return node.get_file(path).decode().strip()
    except NodeError as problem:
        raise NemesisError(f"{node.name}: cannot read the run's secret: {problem}") from None


def ask_proxy(node: Node, message: dict[str, Any], token: str | None) -> dict[str, Any]:
    """Send one control message to the proxy on ``node`` (its control port, with the run's
    secret ``token``); its answer, or :class:`NemesisError`."""
    try:
        answer = wire.call((node.ip, proxy.CONTROL_PORT), message, _TIMEOUT_S, token)
    except (OSError, wire.NotDelivered) as problem:
        raise NemesisError(
            f"{node.name}: cannot reach the write-path proxy ({message.get('op')}): {problem}"
        ) from None
    if not answer.get("ok"):
        raise NemesisError(f"{node.name}: the proxy refused {message.get('op')}: {answer}")
    return answer


def _fault_key(fault: Fault) -> str:
    return hashlib.sha256(json.dumps(fault.key).encode()).hexdigest()[:16]


class ProxyNemesis(NodeNemesis):
    """One proxy fault kind (``kind``, one of :data:`PROXY_KINDS`): a start adds the fault to
    the targets' proxies, a stop removes it and records their report."""

    def __init__(self, kind: str) -> None:
        super().__init__()
        self.kind = kind
        self._in_force: dict[str, Node] = {}
        self._tokens: dict[str, str | None] = {}

    def _ask(self, node: Node, message: dict[str, Any]) -> dict[str, Any]:
        if node.name not in self._tokens:
            self._tokens[node.name] = proxy_token(node)
        return ask_proxy(node, message, self._tokens[node.name])

    @property
    def fs(self) -> frozenset[str]:
        """``start-<kind>`` and ``stop-<kind>``."""
        return fault_fs(self.kind)

    def invoke(self, f: str, fault: Fault) -> dict[str, Any]:
        """Add (start) or remove (stop) the fault on every target's proxy."""
        starting = self.starts(f)
        key = _fault_key(fault)
        params = {name: value for name, value in fault.params.items() if name not in _OUTER}
        message: dict[str, Any] = {
            "op": "add",
            "key": key,
            "kind": self.kind,
            "to": fault.params.get("to", "any"),
            "params": params,
            "seed": int(fault.params.get("seed", 0)),
        }
        if "direction" in fault.params:
            message["direction"] = fault.params["direction"]

        def act(node: Node) -> tuple[str, dict[str, Any]]:
            if starting:
                self._in_force[node.name] = node
                return node.name, {"added": self._ask(node, message)["at"]}
            report = self._ask(node, {"op": "remove", "key": key})
            self._in_force.pop(node.name, None)
            return node.name, {k: v for k, v in report.items() if k not in ("ok", "key")}

        facts = dict(self.on_targets(fault, act))
        if starting:
            return {"proxy": facts}
        return {"proxy": facts, SAID: "; ".join(said_by_proxy(n, r) for n, r in facts.items())}

    def heal(self) -> HealReport:
        """Clear every proxy this nemesis put a fault on."""
        report = HealReport()
        for name, node in list(self._in_force.items()):
            try:
                self._ask(node, {"op": "clear"})
            except NemesisError as problem:
                report.errors.append(str(problem))
                continue
            self._in_force.pop(name, None)
            report.healed.append(f"{self.kind} off on {name}'s proxy")
        return report


_OUTER: Final = frozenset(("to", "direction", "seed", "ttl_multiple", END_AFTER_WRITES))


def said_by_proxy(node: str, report: dict[str, Any]) -> str:
    """What a node's proxy did, in words: each held write by name (``"w2's write w2-31 (epoch
    4) was held 3.1 s"``), else what it did how often (``"w2's proxy reset 2 connections"``)."""
    events = report.get("events", [])
    if report.get("kind") == "delay":
        added = float(report.get("delayed_s", 0.0))
        return f"{node}'s proxy delayed {report.get('chunks', 0)} chunks by {added:.2f} s in all"
    held = [
        f"{node}'s {request['op']} {request['id']} (epoch {request['epoch']}) was held "
        f"{event['delivered'] - event['from']:.2f} s"
        for event in events
        if event["what"] == "held" and "delivered" in event
        for request in event.get("requests", ())
        if str(request.get("op", "")).startswith("write") and "id" in request
    ]
    counts: dict[str, int] = {}
    for event in events:
        counts[event["what"]] = counts.get(event["what"], 0) + 1
    if not counts:
        return f"{node}'s proxy had nothing to {report.get('kind')}"
    done = ", ".join(f"{_DONE[what]} {count} {_OF[what]}" for what, count in counts.items())
    return "; ".join([*held, f"{node}'s proxy {done}"])


_DONE: Final = {
    "held": "held",
    "dropped": "dropped",
    "dropped-connection": "dropped",
    "reset": "reset",
    "replayed": "replayed",
}
_OF: Final = {
    "held": "chunks",
    "dropped": "segments (and the rest of their connections)",
    "dropped-connection": "connections",
    "reset": "connections mid-request",
    "replayed": "requests",
}


def _seed(draw: Draw) -> int:
    return draw.rng.randrange(1 << 31)


def _draw_hold(draw: Draw) -> tuple[tuple[str, ...], dict[str, Any]]:
    # Everything waits, keepalives too: the lease lapses and the window ends after the next
    # holder's first accepted write, when the held write is delivered.
    return (draw.target,), {"to": "any", END_AFTER_WRITES: 1, "seed": _seed(draw)}


def _draw_delay(draw: Draw) -> tuple[tuple[str, ...], dict[str, Any]]:
    latency = draw.rng.choice(_DELAY_TTL) * draw.ttl_ns / 1e9
    return (draw.target,), {
        "to": draw.rng.choice(("lock", "any")),
        "latency_s": round(latency, 6),
        "jitter_s": round(latency / 4, 6),
        "seed": _seed(draw),
    }


def _draw_loss(draw: Draw) -> tuple[tuple[str, ...], dict[str, Any]]:
    return (draw.target,), {
        "mode": draw.rng.choice(("connections", "segments")),
        "p": draw.rng.choice(_LOSS_P),
        "seed": _seed(draw),
    }


def _draw_reset(draw: Draw) -> tuple[tuple[str, ...], dict[str, Any]]:
    return (draw.target,), {
        "to": "store",
        "direction": draw.rng.choice(("request", "reply")),
        "count": draw.rng.randint(1, 3),
        "seed": _seed(draw),
    }


def _draw_replay(draw: Draw) -> tuple[tuple[str, ...], dict[str, Any]]:
    after = draw.rng.choice((0.1, 0.5, 1.1)) * draw.ttl_ns / 1e9
    return (draw.target,), {
        "to": "store",
        "after_s": round(after, 6),
        "count": draw.rng.randint(1, 3),
        "seed": _seed(draw),
    }


def _recover(node: Node, leftovers: Leftovers) -> bool:
    """Clear the proxy's faults on ``node`` (a node without a proxy has none)."""
    if not any(daemon.name == PROXY_DAEMON for daemon in node.daemons()):
        return False
    ask_proxy(node, {"op": "clear"}, proxy_token(node))
    return True


def _manual(kind: str, summary: str, *options: ManualOption) -> ManualCommand:
    names = [option.name for option in options]

    def fault(nodes: tuple[str, ...], values: Any, roles: Any) -> Fault:
        params: dict[str, Any] = {}
        for name in names:
            value = values.get(name)
            if value is None:
                continue
            try:
                params[name] = float(value) if name not in ("to", "direction", "mode") else value
            except ValueError:
                raise NemesisError(f"--{name} must be a number, not {value!r}") from None
        return Fault(kind, nodes, params)

    return ManualCommand(
        help=f"On the workers NODES: {summary}; undone after --for.",
        fault=fault,
        options=(ManualOption("to", "lock, store or any (default any)."), *options),
    )


def _proxy_kind(
    name: str,
    summary: str,
    verb: str,
    colour: str,
    draw: Callable[[Draw], tuple[tuple[str, ...], dict[str, Any]]],
    *options: ManualOption,
    outlives_lease: bool = False,
    needs_framing: bool = False,
) -> FaultKind:
    """The registry entry of the proxy kind ``name``: what every one of them shares (its
    nemesis, its recovery, its place in healing: first, since a held write must arrive before
    anything else heals) and what is its own."""
    return FaultKind(
        name=name,
        summary=summary,
        verb=verb,
        colour=colour,
        heal_rank=1,
        # One proxy per worker, one fault in it at a time: two proxy kinds on a node conflict,
        # while a proxy fault composes with a pause of the holder's agent or a clock fault.
        holds="proxy",
        build=lambda locate, restarter: ProxyNemesis(name),
        draw=draw,
        recover=_recover,
        outlives_lease=outlives_lease,
        needs_framing=needs_framing,
        manual=_manual(name, summary, *options),
    )


HOLD_KIND = _proxy_kind(
    "hold",
    "the holder's proxy keeps what it sends (a write, its keepalives) until the next holder's "
    "first accepted write, then delivers it in order",
    "held",
    "#2f7f8f",
    _draw_hold,
    outlives_lease=True,
)
"""The hold fault kind's registry entry."""

DELAY_KIND = _proxy_kind(
    "delay",
    "the holder's proxy delays its traffic (latency + jitter per direction), on the keepalives "
    "only or on everything",
    "delayed",
    "#5a9bd5",
    _draw_delay,
    ManualOption("latency_s", "Seconds added to each chunk.", "text", "0.5"),
    ManualOption("jitter_s", "Up to this many seconds more, drawn.", "text", "0"),
    ManualOption("direction", "request, reply or both (default both)."),
)
"""The delay fault kind's registry entry."""

LOSS_KIND = _proxy_kind(
    "loss",
    "the holder's proxy drops a fraction of its connections or segments (a stream that lost a "
    "segment goes silent)",
    "put on a lossy link",
    "#8a8a8a",
    _draw_loss,
    ManualOption("p", "The fraction dropped.", "text", "0.5"),
    ManualOption("mode", "connections or segments (default segments)."),
)
"""The loss fault kind's registry entry."""

RESET_KIND = _proxy_kind(
    "reset",
    "the holder's proxy cuts a write or its reply in the middle with an RST: its outcome is "
    "unknown",
    "reset mid-request",
    "#b0413e",
    _draw_reset,
    ManualOption("direction", "request or reply (default request)."),
    ManualOption("count", "How many connections to reset.", "text", "1"),
)
"""The reset fault kind's registry entry."""

REPLAY_KIND = _proxy_kind(
    "replay",
    "the holder's proxy sends a write again after it was delivered once (needs the system's "
    "request framing)",
    "replayed (its writes sent again)",
    "#7b4fa0",
    _draw_replay,
    ManualOption("after_s", "Seconds after the delivery.", "text", "0.5"),
    ManualOption("count", "How many writes to replay.", "text", "1"),
    needs_framing=True,  # it sends one of the holder's writes again, so must find its end
)
"""The replay fault kind's registry entry."""
