"""The etcd system's adapter: three etcd members as the lock service, etcd and PostgreSQL as stores.

Nodes: ``e1..e3`` run one etcd member each (static bootstrap), ``s1`` runs PostgreSQL 15 with its
durable defaults, ``w1..`` are the holders. Holder ``wN``'s client is pinned to member ``e((N-1)
mod 3 + 1)`` and moves to the next member only when that one refuses connections (killed), so a
pause or partition aimed at ``e2`` is a fault at the member ``w2`` talks to. Data lives under
``/var/lib/fencecheck``; both servers recover from it after a SIGKILL (etcd's WAL, PostgreSQL's
crash recovery), restarted with the same command line. With the run's secret only the run may
use them: etcd's authentication is on (user ``root``, the secret its password) and PostgreSQL
asks for the secret (scram-sha-256) of logins from the workers, the only addresses ``pg_hba``
admits.

The holder client (:mod:`systems.etcd.holder`) holds the locks, writes the sinks and carries the
holder-side bug switches; the server-side one (``pg-async-commit``) is a PostgreSQL setting.
"""

from __future__ import annotations

import json
import math
import shlex
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

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
)
from systems.etcd import holder

__all__ = ["BUG_SWITCHES", "ETCD_DAEMON", "POSTGRES_DAEMON", "EtcdSystem", "Ports"]

ETCD_DAEMON: Final = "etcd"
POSTGRES_DAEMON: Final = "postgres"
PG_ASYNC_COMMIT: Final = "pg-async-commit"
PG_FSYNC_OFF: Final = "pg-fsync-off"
_FSYNC: Final = "import os, sys; os.fsync(os.open(sys.argv[1], os.O_RDONLY))"
_SYNC_TREE: Final = """
import os, sys
for top, dirs, files in os.walk(sys.argv[1]):
    for name in files:
        fd = os.open(os.path.join(top, name), os.O_RDONLY)
        os.fsync(fd)
        os.close(fd)
    fd = os.open(top, os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)
"""
"""fsync every file and directory under the directory named."""
_SERVER_BUGS: Final = frozenset((PG_ASYNC_COMMIT, PG_FSYNC_OFF))
"""The switches that are PostgreSQL settings, not the holder's: the client never sees them."""
_PG_BIN: Final = "/usr/lib/postgresql/15/bin"
_AS_POSTGRES: Final = ("setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups")
# etcd raises a lease's TTL to 1.5 election timeouts (1 s by default), rounded up: 2 s.
_MIN_TTL: Final = 2
_SCHEMA: Final = (
    "CREATE TABLE fence (lock text PRIMARY KEY, epoch bigint NOT NULL);"
    "CREATE TABLE log (seq bigserial PRIMARY KEY, key text NOT NULL, id text NOT NULL,"
    " epoch bigint NOT NULL, lock text NOT NULL, prev text);"
    "CREATE INDEX log_key ON log (key, seq);"
)
# Pauses of 1.5 TTL (3 s) stay below the lock-delay (4 s) with a second to spare for the writes a
# correct holder had in flight, so the correct system stays valid on etcd-delayed. The half
# second of work per unit makes a lease last long enough (20 units) that a holder that ignores
# its expired lease still writes when the next holder starts, after its grace period.
_IGNORE_EXPIRED_EXPOSURE: Final = Exposure(
    faults=("pause",), workload="sinks", ttl_multiples=(1.5,), lock_delay=4.0, work_ms=500
)

BUG_SWITCHES: Final = switch_table(
    BugSwitch(
        holder.LEASE_ID_TOKEN,
        "the lease ID is used as the epoch instead of the lock key's create revision "
        "(IDs carry the granting member's prefix: a later lease may have a lower ID)",
        Exposure(faults=("pause",)),
        ("grant-regression",),
    ),
    BugSwitch(
        holder.CHECK_THEN_WRITE,
        "the holder trusts its lock key (each renewal looks that the key still exists; "
        "it checks its lease before each unit) and writes etcd-txn with a plain put, "
        "no guard in the txn",
        PAUSE_PAST_LEASE,
        ("stale-write",),
        (holder.ETCD_TXN,),
    ),
    BugSwitch(
        holder.IGNORE_EXPIRED_REFRESH,
        "a lease refresh answering TTL 0 (expired) does not stop the holder: resumed "
        "from a pause, it goes on writing; the fenced sinks refuse it once the next "
        "holder wrote, but etcd-delayed, which relies on the lock-delay, takes its "
        "writes after the next holder's",
        _IGNORE_EXPIRED_EXPOSURE,
        ("stale-write",),
        (holder.ETCD_DELAYED,),
    ),
    BugSwitch(
        holder.SHARED_LEASE,
        "the holders share one session lease, so two of them lock with the same lease "
        "and etcd treats that as one acquisition: both hold the lock",
        Exposure(faults=("pause",)),
        ("epoch-reuse",),
    ),
    BugSwitch(
        holder.PG_CHECK_THEN_ACT,
        "the postgres sink SELECTs the lock's epoch when it reads and compares in the "
        "client; the UPDATE that acts on it later carries no guard",
        Exposure(faults=("pause",), workload="sinks", ttl_multiples=(3.0,)),
        ("stale-write",),
        (holder.POSTGRES,),
    ),
    BugSwitch(
        PG_ASYNC_COMMIT,
        "PostgreSQL runs with synchronous_commit=off: a commit is acknowledged before "
        "its WAL reaches the disk",
        Exposure(faults=("kill",), targets=("store",), workload="sinks"),
        ("lost-write",),
        (holder.POSTGRES,),
    ),
    BugSwitch(
        PG_FSYNC_OFF,
        "PostgreSQL runs with fsync=off: a commit waits for its WAL write but never for the "
        "disk, so a kill keeps every acknowledged write (the page cache does) and a power "
        "loss drops them",
        # Unlike pg-async-commit, no kill shows it: only a power loss of the store's node.
        Exposure(faults=("power-loss",), targets=("store",), workload="sinks"),
        ("lost-write",),
        (holder.POSTGRES,),
    ),
)
"""The mistakes etcd and PostgreSQL users make, each planted by one switch."""


@dataclass(frozen=True, slots=True)
class Ports:
    """The TCP ports of the servers."""

    etcd_client: int = 2379
    etcd_peer: int = 2380
    postgres: int = 5432


@dataclass(eq=False)
class EtcdSystem(PackagesBeside, SwitchTable):
    """etcd 3.4 (three members) as the lock service; etcd and PostgreSQL 15 as fenced stores.

    ``ready_timeout`` bounds the wait for a server to serve after a start; ``client_timeout`` is
    how long a holder waits for etcd or PostgreSQL before it reports an outcome as unknown.
    """

    CONTRACT = 2  # the adapter contract this was written for (systems.base.CONTRACT)
    name = "etcd"
    switches = BUG_SWITCHES

    ports: Ports = field(default_factory=Ports)
    data_dir: str = deploy.DATA_DIR
    ready_timeout: float = 30.0
    client_timeout: float = 5.0

    def clock_roles(self) -> Mapping[str, str]:
        """Neither: etcd is Go, PostgreSQL is not started under libfaketime."""
        return {
            "lock": "etcd is a Go program, which reads the clock through the vDSO without libc, "
            "so libfaketime has no effect on it (measured: a preloaded etcd logs the real time)",
            "store": "PostgreSQL is not started under libfaketime",
        }

    def describe(self) -> str:
        """What the system is."""
        return (
            "etcd 3.4 (3 members) locks, token = the lock key's create revision; fenced sinks "
            "etcd-txn and postgres (PostgreSQL 15), unfenced etcd-put"
        )

    def roles(self) -> Mapping[str, RoleSpec]:
        """Members ``e1..e3``, PostgreSQL on ``s1``, workers ``w1..``."""
        return {"lock": RoleSpec(3, "e"), "store": RoleSpec(1, "s"), "worker": RoleSpec(1, "w")}

    def validate(self, config: SystemConfig) -> None:
        """Reject unknown switches, and ``ignore-expired-refresh`` without a lock-delay: only
        ``etcd-delayed`` shows its mistake, and that sink exists only with a lock-delay."""
        super().validate(config)
        if holder.IGNORE_EXPIRED_REFRESH in config.bugs and config.lock_delay <= 0:
            raise ConfigError(
                f"bug switch {holder.IGNORE_EXPIRED_REFRESH!r} shows on the lock-delay sink "
                f"{holder.ETCD_DELAYED}, which needs a lock-delay, but lock_delay is 0: pass "
                f"{_IGNORE_EXPIRED_EXPOSURE.describe()} (or --expose)"
            )

    def lease_ttl(self, config: SystemConfig) -> float:
        """etcd's TTLs are whole seconds, at least 2 with the default election timeout."""
        return float(max(_MIN_TTL, math.ceil(config.lease_ttl)))

    def inventory(self, config: SystemConfig) -> tuple[Sink, ...]:
        """etcd-txn and postgres fenced, etcd-put unfenced; with a lock-delay, etcd-delayed
        unfenced and protected by it. All report ``seq``."""
        delayed = Sink(
            holder.ETCD_DELAYED,
            fenced=False,
            mitigation="lock-delay",
            description=f"a plain etcd put of a key per write, no guard; a new holder waits "
            f"the lock-delay ({config.lock_delay:g} s) after its grant before it writes; "
            "seq = mod_revision",
            seq=True,
        )
        return (
            Sink(
                holder.ETCD_TXN,
                fenced=True,
                mitigation="none",
                description="an etcd key per write, put in a txn that refuses an epoch below "
                "the lock's highest (kept in etcd); seq = mod_revision",
                seq=True,
            ),
            Sink(
                holder.POSTGRES,
                fenced=True,
                mitigation="none",
                description="PostgreSQL 15 table: guarded upsert of the lock's highest epoch, "
                "then an insert, in one transaction; seq = a bigserial",
                seq=True,
            ),
            Sink(
                holder.ETCD_PUT,
                fenced=False,
                mitigation="none",
                description="a plain etcd put of a key per write, no guard; seq = mod_revision",
                seq=True,
            ),
            *((delayed,) if config.lock_delay > 0 else ()),
        )

    # -- setup and teardown -----------------------------------------------------------------

    def setup(self, nodes: Mapping[str, Node], config: SystemConfig) -> Deployment:
        """Start the three etcd members and PostgreSQL, create the schema, name the client."""
        with setting_up(self, nodes, config):
            members = nodes_with_role(nodes, "lock")
            (store,) = nodes_with_role(nodes, "store")
            cluster = ",".join(f"{m.name}=http://{m.ip}:{self.ports.etcd_peer}" for m in members)
            token = f"fencecheck-{'-'.join(m.ip for m in members)}"

            workers = nodes_with_role(nodes, "worker")

            def start(node: Node) -> Daemon:
                if node.role == "store":
                    return self._start_postgres(node, config, workers)
                return self._start_member(node, cluster, token, config)

            deploy.on_each([*members, store], start)
            if config.secret_file:
                self._enable_auth(members[0], config.secret_file)
        client = {
            "etcd": {w.name: self._endpoints(nodes, w.name) for w in workers},
            "postgres": {
                "host": store.ip,
                "port": self.ports.postgres,
                "user": "postgres",
                "dbname": "postgres",
            },
            "secret_file": config.secret_file,
            "timeout": self.client_timeout,
            "lock_delay": config.lock_delay,
            "bugs": sorted(config.bugs - _SERVER_BUGS),
        }
        return Deployment(
            client=HolderClientCode(holder, client),
            targets=self.daemons.targets(nodes),
            lease_ttl=self.lease_ttl(config),
        )

    def _endpoints(self, nodes: Mapping[str, Node], worker: str) -> list[str]:
        """The members' client URLs in the order ``worker``'s client tries them: its own member
        (:meth:`client_member`) first, then the next ones round."""
        members = nodes_with_role(nodes, "lock")
        own = [m.name for m in members].index(self.client_member(nodes, worker) or members[0].name)
        urls = [f"http://{m.ip}:{self.ports.etcd_client}" for m in members]
        return urls[own:] + urls[:own]

    def disk_dirs(self) -> Mapping[str, str]:
        """Each etcd member's data dir (its WAL and snapshots) and PostgreSQL's cluster."""
        return {"lock": f"{self.data_dir}/etcd", "store": f"{self.data_dir}/postgres"}

    def _start_member(self, node: Node, cluster: str, token: str, config: SystemConfig) -> Daemon:
        data = self.disk_dirs()["lock"]
        deploy.data_dir(node, data, config.lazy_disks)
        client, peer = self.ports.etcd_client, self.ports.etcd_peer
        argv = [
            "etcd",
            f"--name={node.name}",
            f"--data-dir={data}",
            f"--listen-client-urls=http://0.0.0.0:{client}",
            f"--advertise-client-urls=http://{node.ip}:{client}",
            f"--listen-peer-urls=http://0.0.0.0:{peer}",
            f"--initial-advertise-peer-urls=http://{node.ip}:{peer}",
            f"--initial-cluster={cluster}",
            "--initial-cluster-state=new",
            f"--initial-cluster-token={token}",
            "--logger=zap",
        ]
        return self.daemons.start(node, ETCD_DAEMON, argv)

    def _enable_auth(self, member: Node, secret_file: str) -> None:
        """Turn etcd's authentication on: user :data:`~systems.etcd.holder.USER` (etcd's root,
        with the root role) whose password is the run's secret. From then on every key request
        without its token is refused, so nothing outside the run can take a lock or write a
        sink; asked through the gateway, so the secret shows on no command line."""
        secret = member.get_file(secret_file).decode().strip()
        url = f"http://{member.ip}:{self.ports.etcd_client}/v3/auth"
        steps: tuple[tuple[str, dict[str, str]], ...] = (
            ("user/add", {"name": holder.USER, "password": secret}),
            ("role/add", {"name": holder.USER}),
            ("user/grant", {"user": holder.USER, "role": holder.USER}),
            ("enable", {}),
        )
        for step, body in steps:
            try:
                _post(f"{url}/{step}", body, timeout=self.ready_timeout)
            except (OSError, ValueError) as problem:
                raise AdapterError(
                    f"turning etcd's authentication on through {member.name} failed at {step}: "
                    f"{problem}"
                ) from None

    def _etcd_ready(self, command: str) -> CommandSucceeds:
        local = f"--endpoints=http://127.0.0.1:{self.ports.etcd_client}"
        argv = ["etcdctl", local, "--command-timeout=1s", "endpoint", command]
        return CommandSucceeds(argv, timeout=self.ready_timeout, interval=0.2)

    def _pg_ready(self) -> CommandSucceeds:
        argv = [f"{_PG_BIN}/pg_isready", "-q", "-h", "127.0.0.1", "-U", "postgres"]
        argv += ["-p", str(self.ports.postgres)]
        return CommandSucceeds(argv, timeout=self.ready_timeout, interval=0.2)

    def _start_postgres(self, node: Node, config: SystemConfig, workers: list[Node]) -> Daemon:
        """initdb and start PostgreSQL; with the run's secret, only the run may log in.

        The superuser's password is the secret (scram-sha-256; handed to initdb in a file only
        the ``postgres`` OS user reads, removed at once, never on a command line), and
        ``pg_hba`` lets TCP logins in from the workers' addresses only. The adapter itself talks
        over its socket beside the data directory, as the ``postgres`` OS user (peer).
        """
        data = self.disk_dirs()["store"]
        deploy.data_dir(node, data, config.lazy_disks)
        # The socket beside the data, not in it: the lazy file system keeps no sockets' state.
        sockets = f"{self.data_dir}/postgres-socket"
        deploy.fresh_dir(node, sockets)
        node.run(["chown", "postgres:postgres", data, sockets], check=True)
        initdb = [*_AS_POSTGRES, f"{_PG_BIN}/initdb", "-D", data]
        # On the lazy file system a power loss drops what initdb never fsynced: there it syncs.
        initdb += [] if config.lazy_disks else ["--no-sync"]
        secret = node.get_file(config.secret_file) if config.secret_file else None
        password = f"{self.data_dir}/postgres-password"
        if secret is None:
            initdb.append("--auth=trust")
        else:
            node.put_file(password, secret, 0o600)
            node.run(["chown", "postgres", password], check=True)
            initdb += ["--auth-local=peer", "--auth-host=scram-sha-256", f"--pwfile={password}"]
        try:
            result = node.run(initdb, timeout=self.ready_timeout)
        finally:
            node.run(["rm", "-f", password])
        if not result.ok:
            raise AdapterError(f"initdb on {node.name} failed: {result.stderr or result.stdout}")
        method = "trust" if secret is None else "scram-sha-256"
        hba = "".join(f"host postgres postgres {w.ip}/32 {method}\n" for w in workers)
        node.run(
            ["sh", "-c", f"cat >> {shlex.quote(data)}/pg_hba.conf"], check=True, stdin=hba.encode()
        )
        if config.lazy_disks:  # the appended lines must survive a power loss like initdb's files
            node.run(["python3", "-c", _FSYNC, f"{data}/pg_hba.conf"], check=True)
        argv = [
            *_AS_POSTGRES,
            f"{_PG_BIN}/postgres",
            "-D",
            data,
            "-c",
            "listen_addresses=*",
            "-c",
            f"port={self.ports.postgres}",
            "-c",
            "shared_buffers=16MB",
            "-c",
            f"unix_socket_directories={sockets}",
        ]
        if PG_ASYNC_COMMIT in config.bugs:
            argv += ["-c", "synchronous_commit=off"]
        if PG_FSYNC_OFF in config.bugs:
            argv += ["-c", "fsync=off"]
        daemon = self.daemons.start(node, POSTGRES_DAEMON, argv)
        psql = [*_AS_POSTGRES, "psql", "-h", sockets, "-p", str(self.ports.postgres)]
        psql += ["-U", "postgres"]
        result = node.run([*psql, "-v", "ON_ERROR_STOP=1", "-q", "-c", _SCHEMA])
        if not result.ok:
            raise AdapterError(f"creating the schema on {node.name} failed: {result.stderr}")
        if config.lazy_disks:
            # The run begins on a synced disk, as on a machine up a while since its install:
            # with fsync=off PostgreSQL never syncs, and the schema a power loss takes would
            # leave nothing to judge (measured: "relation fence does not exist" after the first).
            node.run([*psql, "-q", "-c", "CHECKPOINT"], check=True)
            node.run(["python3", "-c", _SYNC_TREE, data], check=True)
        return daemon

    @property
    def daemons(self) -> DaemonTable:
        """etcd on each lock member: a new cluster is ready when it has a leader (that takes the
        other members too); a restarted member once it serves (status), not once healthy, since
        one restarted inside a partition has no leader yet. PostgreSQL on the store node, ready
        when it takes queries."""
        return DaemonTable(
            self.name,
            DaemonEntry(
                ETCD_DAEMON,
                "lock",
                lambda _: self._etcd_ready("health"),
                ready_again=lambda _: self._etcd_ready("status"),
            ),
            DaemonEntry(POSTGRES_DAEMON, "store", lambda _: self._pg_ready()),
        )

    def teardown(self, nodes: Mapping[str, Node]) -> None:
        """SIGKILL etcd and PostgreSQL (their data stays for collection)."""
        self.daemons.tear_down(nodes)

    # -- optional abilities -----------------------------------------------------------------

    def restart(self, node: Node, daemon: str) -> Daemon:
        """Start a killed etcd member or PostgreSQL again on its data (same command line).

        PostgreSQL's backends outlive a SIGKILLed postmaster for a moment and hold its shared
        memory, which a new postmaster refuses to share: they are killed first, as a crash of
        the host would have.
        """
        if daemon == POSTGRES_DAEMON:
            node.run(
                "pkill -KILL -u postgres; while pgrep -u postgres >/dev/null; do sleep 0.05; done"
            )
        return self.daemons.restart(node, daemon)

    def client_member(self, nodes: Mapping[str, Node], worker: str) -> str | None:
        """The member ``worker``'s client is pinned to (see the module documentation): the
        ``i``-th worker talks to the ``i``-th member, round the members."""
        members = nodes_with_role(nodes, "lock")
        workers = [w.name for w in nodes_with_role(nodes, "worker")]
        if worker not in workers or not members:
            return None
        return members[workers.index(worker) % len(members)].name

    def lock_leader(self, nodes: Mapping[str, Node]) -> str | None:
        """The member that says it leads (asked over the gateway; a silent member is skipped)."""
        for member in nodes_with_role(nodes, "lock"):
            url = f"http://{member.ip}:{self.ports.etcd_client}/v3/maintenance/status"
            try:
                status = _post(url, {}, timeout=1.0)
            except (OSError, ValueError):
                continue
            if str(status.get("leader")) == str(status.get("header", {}).get("member_id")):
                return member.name
        return None


def _post(url: str, body: dict[str, Any], timeout: float) -> dict[str, Any]:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST")
    with urllib.request.urlopen(request, timeout=timeout) as reply:
        answer: dict[str, Any] = json.loads(reply.read())
    return answer
