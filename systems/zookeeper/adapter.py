"""The zookeeper system's adapter: a three-member ZooKeeper 3.8 ensemble from Debian packages.

Each lock node runs ``QuorumPeerMain`` from ``libzookeeper-java`` (not the ``zookeeper`` package,
which pulls the desktop JRE) on Debian's headless JRE 17 with a small heap, logging through log4j
1.2 to its daemon log (which the harness collects). Configuration is written fresh by
:meth:`ZooKeeperSystem.setup`: ``tickTime=500`` so that session timeouts from 1 s to 10 s are
allowed (ZooKeeper clamps them to [2, 20] ticks), and the four-letter words the adapter uses to
probe readiness and find the leader. The store node runs the reference store
(:mod:`systems.reference.store_server`), a fenced sink off ZooKeeper. With the run's secret, the
root znode and everything the holders create carry a digest ACL derived from it, so a client
without the secret cannot change the locks or the sinks (ZooKeeper's ports themselves take no
password). The holders' client is :mod:`systems.zookeeper.client`.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from systems import (
    PAUSE_PAST_LEASE,
    AdapterError,
    BugSwitch,
    CommandSucceeds,
    ConfigError,
    Daemon,
    DaemonEntry,
    DaemonTable,
    Deployment,
    Exposure,
    HolderClientCode,
    Node,
    PackagesBeside,
    RoleSpec,
    Sink,
    SwitchTable,
    SystemConfig,
    deploy,
    nodes_with_role,
    setting_up,
    switch_table,
    wait_all,
)
from systems.reference import store_server
from systems.zookeeper import client

__all__ = ["BUG_SWITCHES", "MEMBERS", "PACKAGES", "ZooKeeperSystem"]

PACKAGES: Final = Path(__file__).with_name("packages.txt")
"""The Debian packages its nodes need beyond the node image, one a line."""
MEMBERS: Final = 3
"""Ensemble size: the smallest that survives the loss (or partition) of one member."""

_DAEMON: Final = "zookeeper"
_STORE_DAEMON: Final = "ref-store"
_PROBE: Final = f"{_DAEMON}-clock"
"""The clock probe beside each member (:func:`systems.deploy.start_clock_probe`)."""
_FORCE_SYNC_NO: Final = "force-sync-no"
_TICK_MS: Final = 500
_MIN_SESSION_S: Final = 2 * _TICK_MS / 1000
_MAX_SESSION_S: Final = 20 * _TICK_MS / 1000
_JARS: Final = (
    "zookeeper",
    "zookeeper-jute",
    "slf4j-api",
    "slf4j-log4j12",
    "log4j-1.2",
    "netty-handler",
    "netty-transport",
    "netty-transport-native-epoll",
    "netty-transport-native-unix-common",
    "netty-common",
    "netty-buffer",
    "netty-codec",
    "netty-resolver",
    "metrics-core",
    "snappy-java",
    "commons-cli",
    "commons-io",
)
_LOG4J: Final = b"""\
log4j.rootLogger=INFO, CONSOLE
log4j.appender.CONSOLE=org.apache.log4j.ConsoleAppender
log4j.appender.CONSOLE.layout=org.apache.log4j.PatternLayout
log4j.appender.CONSOLE.layout.ConversionPattern=%d{ISO8601} [myid:%X{myid}] %-5p [%t:%C{1}@%L] %m%n
"""
# Runs on a node: ask a member's state with the ``srvr`` four-letter word; prints its mode
# (leader, follower...) and exits 0, or exits 1 when it does not serve (yet).
_SRVR: Final = """
import socket, sys
try:
    with socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=2) as conn:
        conn.sendall(b"srvr")
        answer = b"".join(iter(lambda: conn.recv(4096), b"")).decode()
except OSError:
    sys.exit(1)
modes = [line.split(":", 1)[1].strip() for line in answer.splitlines() if line.startswith("Mode:")]
print(modes[0] if modes else "")
sys.exit(0 if modes and modes[0] in ("leader", "follower") else 1)
"""
# Runs on a member with the run's secret: the top znodes made, and the root's ACL narrowed to the
# digest identity (the world may list it, no more), so nobody without the secret creates,
# deletes or changes anything; what holders create carries the same ACL (kazoo's default_acl).
_PROTECT: Final = """
import sys
from kazoo.client import KazooClient
from kazoo.security import READ_ACL_UNSAFE
sys.path.insert(0, sys.argv[3])
from zookeeper_client import digest_credentials
with open(sys.argv[2], encoding="utf-8") as file:
    credentials = digest_credentials(file.read().strip())
zk = KazooClient(hosts=sys.argv[1], **credentials)
zk.start(timeout=30)
for path in ("/locks", "/marks", "/store", "/log"):
    zk.ensure_path(path)
zk.set_acls("/", credentials["default_acl"] + READ_ACL_UNSAFE)
zk.stop()
"""

_WRITE_SYNCED: Final = """
import os, sys
path = sys.argv[1]
with open(path, "wb") as file:
    file.write(sys.stdin.buffer.read())
    file.flush()
    os.fsync(file.fileno())
os.fsync(os.open(os.path.dirname(path), os.O_RDONLY))
"""
"""Write stdin to the file named, then fsync it and its directory."""

BUG_SWITCHES: Final = switch_table(
    BugSwitch(
        client.TRUST_IS_ACQUIRED,
        "the holder writes to store when kazoo's Lock.is_acquired says it holds the lock, "
        "without the server checking: it stays True after the session expired",
        PAUSE_PAST_LEASE,
        ("stale-write",),
        ("store",),
    ),
    BugSwitch(
        client.SEQUENCE_TOKEN,
        "the lock node's sequence number is the token: it restarts at 0 when the lock's "
        "parent is removed (empty) and created again; a lock must go free, so run more "
        "locks than holders keep busy (--locks 3)",
        Exposure(faults=("pause",), ttl_multiples=(3.0,), locks=3),
        ("grant-regression", "epoch-reuse"),
    ),
    BugSwitch(
        client.FOLLOWER_READ_CHECK,
        "the holder checks that its lock node exists with a plain read on its lock "
        "session, which a lagging or cut-off follower answers from stale state, then "
        "writes to store unchecked on a data session; needs a follower cut off from the "
        "quorum but not from its holders (--target lock-follower) and sessions (--ttl 1) "
        "that expire before the member notices, while its holder still holds the lock "
        "(long tenures: 200 writes a lease)",
        Exposure(
            faults=("partition",),
            targets=("lock-follower",),
            ttl_multiples=(3.0,),
            writes_per_lease=200,
        ),
        ("stale-write",),
        ("store",),
    ),
    BugSwitch(
        _FORCE_SYNC_NO,
        "forceSync=no: members log transactions and acknowledge them without fsync, so a "
        "committed one is only in the page cache of a quorum; a kill keeps it, and so does one "
        "member's power loss (the others hold it), but the whole ensemble losing power at "
        "once (a rack, a data centre) loses every transaction never synced: the entries the "
        "store acknowledged are gone",
        # Every member at once: with one member left, the others elect it and copy what it kept.
        Exposure(faults=("power-loss",), targets=("lock-all",), ttl_multiples=(1.1,)),
        ("lost-write",),
        ("store",),
    ),
)


@dataclass(eq=False)
class ZooKeeperSystem(PackagesBeside, SwitchTable):
    """A three-member ZooKeeper ensemble as lock service and sinks (see
    :mod:`systems.zookeeper`).

    ``ready_timeout`` bounds the wait for the quorum after a start (or a member's restart);
    ``client_timeout`` is how long a holder waits for an answer; ``heap`` is each member's
    ``-Xmx``.
    """

    CONTRACT = 2  # the adapter contract this was written for (systems.base.CONTRACT)
    name = "zookeeper"
    switches = BUG_SWITCHES

    client_port: int = 2181
    data_dir: str = f"{deploy.DATA_DIR}/zookeeper"
    ready_timeout: float = 60.0
    client_timeout: float = 10.0
    heap: str = "96m"
    store_port: int = 7002
    clock_probe_port: int = 7003
    install_dir: str = deploy.INSTALL_DIR

    def clock_roles(self) -> Mapping[str, str]:
        """The members, both clocks, under libfaketime; confirmed through a clock probe.

        Measured in the system image: OpenJDK 17 follows libfaketime (both clocks: the session
        tracker measures sessions on ``System.nanoTime``, the monotonic clock), and a member
        under it starts and serves as fast as without. ZooKeeper reports no clock of its own (no
        four-letter word does), so each member has a clock probe beside it
        (:mod:`harness.nodeside.clockprobe`) under the same preload and control file, which the
        clock nemeses read to confirm a change: it shows what the file makes of a clock under
        that preload, not the member's own reading. The reference store on ``s1`` is not started
        under libfaketime.
        """
        return {"lock": ""}

    def describe(self) -> str:
        """What the system is."""
        return (
            "ZooKeeper 3.8 (Debian), three members: kazoo's lock with the lock node's czxid as "
            "token, a multi-fenced store and an unfenced log on ZooKeeper itself, the reference "
            "store as a fenced sink beside it"
        )

    def roles(self) -> Mapping[str, RoleSpec]:
        """Three ensemble members ``z1..z3`` (lock nodes), the reference store on ``s1``, workers
        ``w1..``."""
        return {
            "lock": RoleSpec(MEMBERS, "z"),
            "store": RoleSpec(1, "s"),
            "worker": RoleSpec(1, "w"),
        }

    def validate(self, config: SystemConfig) -> None:
        """Reject unknown switches and a TTL outside the session timeouts the ensemble allows."""
        super().validate(config)
        if not _MIN_SESSION_S <= config.lease_ttl <= _MAX_SESSION_S:
            raise ConfigError(
                f"lease_ttl {config.lease_ttl:g}s is the ZooKeeper session timeout, which the "
                f"ensemble (tickTime {_TICK_MS} ms) clamps to [{_MIN_SESSION_S:g}, "
                f"{_MAX_SESSION_S:g}] s: pass --ttl within that range"
            )

    def inventory(self, config: SystemConfig) -> tuple[Sink, ...]:
        """``store`` fenced by the lock node and ``ref-store`` by the token (both report ``seq``),
        ``log`` unfenced."""
        return (
            Sink(
                "store",
                fenced=True,
                mitigation="none",
                description="a znode per entry; a multi checks the holder's lock node still "
                "exists and creates the entry; seq is the entry's czxid",
                seq=True,
            ),
            Sink(
                "log",
                fenced=False,
                mitigation="none",
                description="a znode per entry, created with no check",
            ),
            Sink(
                "ref-store",
                fenced=True,
                mitigation="none",
                description="the reference store on s1: refuses an epoch (czxid) below the "
                "lock's highest; seq is its acceptance order",
                seq=True,
            ),
        )

    def config_files(
        self, addresses: Sequence[str], index: int, force_sync: bool = True
    ) -> dict[str, bytes]:
        """``zoo.cfg``, ``myid`` and the log4j configuration of member ``index`` (from 1) of the
        ensemble whose members have ``addresses``, in order; ``forceSync=no`` unless
        ``force_sync`` (the ``force-sync-no`` switch)."""
        servers = "".join(
            f"server.{number}={address}:2888:3888\n" for number, address in enumerate(addresses, 1)
        )
        zoo_cfg = (
            f"tickTime={_TICK_MS}\ninitLimit=20\nsyncLimit=4\n"
            f"dataDir={self.zk_data_dir}\nclientPort={self.client_port}\n"
            f"maxSessionTimeout={round(_MAX_SESSION_S * 1000)}\n"
            "4lw.commands.whitelist=ruok,srvr,stat,mntr\nadmin.enableServer=false\n"
            "quorumListenOnAllIPs=true\n"
            # Measured under power-loss: ZooKeeper 3.8 writes its first snapshot (snapshot.0, at
            # start and at a leader's first sync) without fsync, so a member that loses power
            # early finds log entries and no snapshot and refuses to start ("No snapshot found,
            # but there are log entries"; ZOOKEEPER-3056). Trusting the empty snapshot lets it
            # start from its fsynced log and catch up from the leader.
            "snapshot.trust.empty=true\n" + ("" if force_sync else "forceSync=no\n")
            # Unknown keys become zookeeper.* system properties: zookeeper.forceSync.
        ) + servers
        return {
            f"{self.data_dir}/zoo.cfg": zoo_cfg.encode(),
            f"{self.zk_data_dir}/myid": f"{index}\n".encode(),
            f"{self.data_dir}/log4j.properties": _LOG4J,
        }

    @property
    def zk_data_dir(self) -> str:
        """ZooKeeper's ``dataDir`` (its transaction log, snapshots, epochs and ``myid``): a
        directory of its own under :attr:`data_dir`, so that the lazy file system of the disk
        faults sits under the data alone, not under the configuration beside it."""
        return f"{self.data_dir}/data"

    def disk_dirs(self) -> Mapping[str, str]:
        """Each member's ``dataDir`` and the reference store's data dir."""
        return {"lock": self.zk_data_dir, "store": f"{self.data_dir}/store"}

    def server_argv(self) -> list[str]:
        """A member's command line (the same on every member: its data dir says who it is)."""
        classpath = ":".join(f"/usr/share/java/{jar}.jar" for jar in _JARS)
        return [
            "java",
            f"-Xmx{self.heap}",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            f"-Dlog4j.configuration=file:{self.data_dir}/log4j.properties",
            "-cp",
            classpath,
            "org.apache.zookeeper.server.quorum.QuorumPeerMain",
            f"{self.data_dir}/zoo.cfg",
        ]

    def _serving(self, node: Node) -> CommandSucceeds:
        """Ready when the member answers ``srvr`` as leader or follower (it is in a quorum)."""
        probe = ["python3", "-c", _SRVR, node.ip, str(self.client_port)]
        return CommandSucceeds(probe, timeout=self.ready_timeout, interval=0.2)

    def mode(self, node: Node) -> str:
        """The member's mode by ``srvr``, asked from here (a fault's target is resolved when its
        window opens, so no command on the node): ``leader``, ``follower``, or ``""`` if it does
        not serve or answer within a second."""
        try:
            with socket.create_connection((node.ip, self.client_port), timeout=1.0) as conn:
                conn.sendall(b"srvr")
                answer = b"".join(iter(lambda: conn.recv(4096), b"")).decode(errors="replace")
        except OSError:
            return ""
        modes = [line.partition(":")[2].strip() for line in answer.splitlines()]
        return next((mode for mode in modes if mode in ("leader", "follower")), "")

    def lock_leader(self, nodes: Mapping[str, Node]) -> str | None:
        """The name of the member that leads now, or None when none says so (members asked at
        once: a paused one takes its full second)."""
        members = nodes_with_role(nodes, "lock")
        modes = deploy.on_each(members, self.mode)
        leaders = [node.name for node, mode in zip(members, modes, strict=True) if mode == "leader"]
        return leaders[0] if len(leaders) == 1 else None

    def setup(self, nodes: Mapping[str, Node], config: SystemConfig) -> Deployment:
        """Start the three members from empty data directories and the reference store, wait
        for the quorum, protect the tree with the run's secret; name the holder client."""
        with setting_up(self, nodes, config):
            members = nodes_with_role(nodes, "lock")
            (store,) = nodes_with_role(nodes, "store")
            hosts = [f"{node.ip}:{self.client_port}" for node in members]

            def start(node: Node) -> Daemon:
                if node.role == "store":
                    return self._start_store(node, config)
                deploy.fresh_dir(node, self.data_dir)
                deploy.data_dir(node, self.zk_data_dir, config.lazy_disks)
                addresses = [member.ip for member in members]
                files = self.config_files(
                    addresses, members.index(node) + 1, _FORCE_SYNC_NO not in config.bugs
                )
                myid = f"{self.zk_data_dir}/myid"
                # Written from inside the node, through the lazy file system if it is mounted (a
                # copy from outside lands under the mount), and synced: ZooKeeper never syncs it,
                # and a power loss must not leave it empty.
                node.run(["python3", "-c", _WRITE_SYNCED, myid], check=True, stdin=files.pop(myid))
                deploy.install(node, files)
                ask = deploy.clock_probe_ask(node, self.clock_probe_port)
                argv = deploy.clocked_argv(node, _DAEMON, self.server_argv(), ask, config.clocked)
                if config.clocked:
                    port, secret = self.clock_probe_port, config.secret_file
                    deploy.start_clock_probe(node, _DAEMON, port, secret, self.install_dir)
                return node.start_daemon(_DAEMON, argv)

            deploy.on_each([*members, store], start)
            wait_all([(node, self._serving(node)) for node in members])
            if config.secret_file:
                self._protect(members[0], ",".join(hosts), config.secret_file)
        workers = nodes_with_role(nodes, "worker")
        leader = self.lock_leader(nodes)
        # Holders connect to the followers first (their members, in turn), the leader last, as
        # clients of an ensemble run with leaderServes=no do: a fault aimed at a follower hits
        # the sessions on it.
        ordered = [n for n, m in enumerate(members) if m.name != leader] or list(range(MEMBERS))
        return Deployment(
            client=HolderClientCode(
                client,
                {
                    "hosts": {
                        worker.name: _rotated(hosts, ordered, index)
                        for index, worker in enumerate(workers)
                    },
                    "store": f"{store.ip}:{self.store_port}",
                    "secret_file": config.secret_file,
                    "session_timeout": self.lease_ttl(config),
                    "timeout": self.client_timeout,
                    "bugs": sorted(config.bugs),
                },
            ),
            targets=self.daemons.targets(nodes),
            lease_ttl=self.lease_ttl(config),
        )

    def _start_store(self, node: Node, config: SystemConfig) -> Daemon:
        """The reference store on ``node``, fresh, taking only requests with the run's secret."""
        program = f"{self.install_dir}/store_server.py"
        files = {program: deploy.source_of(store_server)}
        deploy.install(node, {**files, **deploy.nodeside_files(self.install_dir)})
        data = self.disk_dirs()["store"]
        deploy.data_dir(node, data, config.lazy_disks)
        argv = ["python3", program, "--host", node.ip, "--port", str(self.store_port)]
        argv += ["--data-dir", data]
        argv += ["--secret-file", config.secret_file] if config.secret_file else []
        return self.daemons.start(node, _STORE_DAEMON, argv)

    def _store_ready(self) -> deploy.Pings:
        return deploy.Pings(self.store_port, self.ready_timeout)

    def _protect(self, member: Node, hosts: str, secret_file: str) -> None:
        """Give the root znode and the top nodes the digest ACL of the run's secret."""
        files = {f"{self.install_dir}/zookeeper_client.py": deploy.source_of(client)}
        deploy.install(member, {**files, **deploy.nodeside_files(self.install_dir)})
        argv = ["python3", "-c", _PROTECT, hosts, secret_file, self.install_dir]
        result = member.run(argv, timeout=self.ready_timeout)
        if not result.ok:
            raise AdapterError(
                f"protecting the tree with the run secret on {member.name} failed: "
                f"{(result.stderr or result.stdout).strip()[-500:]}"
            )

    @property
    def daemons(self) -> DaemonTable:
        """A member on each lock node, ready once it has joined a quorum (the members start
        together, so setup waits for all of them at once); the reference store on the store
        node, ready when it answers a ping; in a run with clock faults, each member's clock probe
        (faults do not aim at it), ready when it answers a ping."""
        return DaemonTable(
            self.name,
            DaemonEntry(_DAEMON, "lock", self._serving),
            DaemonEntry(_STORE_DAEMON, "store", lambda _: self._store_ready()),
            DaemonEntry(_PROBE, "lock", lambda _: self._probe_ready(), targeted=False),
        )

    def _probe_ready(self) -> deploy.Pings:
        return deploy.Pings(self.clock_probe_port, self.ready_timeout)

    def teardown(self, nodes: Mapping[str, Node]) -> None:
        """SIGKILL the members and the store (their data directories stay for inspection)."""
        self.daemons.tear_down(nodes)

    def restart(self, node: Node, daemon: str) -> Daemon:
        """Start a killed member again with its last command line (same data directory) and wait
        until it has rejoined a quorum; or the store, which replays its log."""
        return self.daemons.restart(node, daemon)


def _rotated(hosts: Sequence[str], firsts: Sequence[int], index: int) -> str:
    """``hosts`` as kazoo's list for the ``index``-th holder: the members ``firsts`` name, in
    turn, then the rest (kazoo tries them in order and moves on when one refuses)."""
    first = firsts[index % len(firsts)]
    rest = [n for n in (*firsts, *range(len(hosts))) if n != first]
    return ",".join(hosts[n] for n in dict.fromkeys([first, *rest]))
