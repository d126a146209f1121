"""Redis beyond one server, started by the tests on free loopback ports: a Cluster of primaries with a replica each
(`redis-server --cluster-enabled yes`, `redis-cli --cluster create`), and a primary with a replica watched by three
Sentinels. Every server has a password (and the Sentinels one of their own); each is a process of ours, stopped,
killed (SIGKILL), frozen (SIGSTOP) or started again by the drills, and killed with the process that started it.
Needs `redis-server` and `redis-cli` 7 or newer on PATH (shard channels); `missing()` says why they cannot run."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis

from localservers import free_port
from localservers.redis import _die_with_parent_hook

PASSWORD = "drill-secret"
SENTINEL_PASSWORD = "sentinel-secret"
MASTER = "wovepaper"


@dataclass(frozen=True)
class Tls:
    """A CA and a certificate for 127.0.0.1 it signed, as files: every server speaks TLS only (`--port 0`)."""

    ca: Path
    cert: Path
    key: Path

    def server_args(self) -> list[str]:
        return [
            "--tls-cert-file", str(self.cert), "--tls-key-file", str(self.key), "--tls-ca-cert-file", str(self.ca),
            "--tls-auth-clients", "no", "--tls-replication", "yes",
        ]  # fmt: skip

    def url_options(self) -> str:
        """`REDIS_URL`'s query: trust the CA (redis-py's option)."""
        return f"?ssl_ca_certs={self.ca}"

    def client_kwargs(self) -> dict[str, Any]:
        return {"ssl": True, "ssl_ca_certs": str(self.ca)}


def make_tls(directory: Path) -> Tls:
    """A throwaway CA and a server certificate for 127.0.0.1, valid for a day."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "wovepaper drill CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
        .sign(ca_key, hashes.SHA256())
    )
    tls = Tls(directory / "ca.pem", directory / "server.pem", directory / "server.key")
    tls.ca.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    tls.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    tls.key.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return tls


def missing() -> str | None:
    """Why the Cluster and Sentinel drills cannot run here, or None."""
    server, cli = shutil.which("redis-server"), shutil.which("redis-cli")
    if server is None or cli is None:
        return "needs redis-server and redis-cli (7 or newer) on PATH"
    out = subprocess.run([server, "--version"], capture_output=True, text=True, timeout=10).stdout
    version = re.search(r"v=(\d+)\.", out)
    if version is None or int(version.group(1)) < 7:
        return f"needs redis-server 7 or newer (shard channels), found: {out.strip()}"
    return None


@dataclass
class Node:
    """One redis-server of ours: its port, its directory and the arguments it is (re)started with."""

    port: int
    directory: Path
    args: list[str]
    process: subprocess.Popen[bytes] | None = None
    tls: Tls | None = None

    def start(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        log = (self.directory / "server.log").open("ab")
        self.process = subprocess.Popen(
            [shutil.which("redis-server") or "redis-server", *self.args],
            cwd=self.directory,
            stdout=log,
            stderr=subprocess.STDOUT,
            preexec_fn=_die_with_parent_hook(),
        )
        log.close()
        deadline = time.monotonic() + 10
        while not self.answers():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"redis-server on {self.port} did not start: {self.log()[-2000:]}")
            time.sleep(0.05)

    def client(self, password: str | None = PASSWORD, **kwargs: Any) -> redis.Redis:
        tls = self.tls.client_kwargs() if self.tls is not None else {}
        return redis.Redis(host="127.0.0.1", port=self.port, password=password, socket_timeout=5, **tls, **kwargs)

    def answers(self, password: str | None = PASSWORD) -> bool:
        try:
            with self.client(password, socket_connect_timeout=0.5) as c:
                return bool(c.ping())
        except redis.RedisError:
            return False

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL, as a crash."""
        if self.alive():
            assert self.process is not None
            os.kill(self.process.pid, signal.SIGCONT)
            self.process.kill()
            self.process.wait(10)

    def freeze(self) -> None:
        os.kill(self.pid, signal.SIGSTOP)

    def thaw(self) -> None:
        os.kill(self.pid, signal.SIGCONT)

    def stop(self) -> None:
        if self.alive():
            assert self.process is not None
            os.kill(self.process.pid, signal.SIGCONT)
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)

    def log(self) -> str:
        path = self.directory / "server.log"
        return path.read_text(errors="replace") if path.exists() else ""


def _data_args(port: int, tls: Tls | None, *extra: str) -> list[str]:
    listen = ["--port", str(port)] if tls is None else ["--port", "0", "--tls-port", str(port), *tls.server_args()]
    return [
        *listen, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
        "--requirepass", PASSWORD, "--masterauth", PASSWORD, "--loglevel", "warning", *extra,
    ]  # fmt: skip


def _cli(*args: str, tls: Tls | None = None, timeout: float = 120) -> str:
    over_tls = ["--tls", "--cacert", str(tls.ca)] if tls is not None else []
    result = subprocess.run(
        [shutil.which("redis-cli") or "redis-cli", *over_tls, "-a", PASSWORD, "--no-auth-warning", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if result.returncode != 0:
        raise RuntimeError(f"redis-cli {' '.join(args[:3])} failed: {result.stdout[-2000:]} {result.stderr[-2000:]}")
    return result.stdout


def until(predicate: Any, timeout_s: float, what: str, every_s: float = 0.1) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if predicate():
                return
        except redis.RedisError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"not within {timeout_s:g} s: {what}")
        time.sleep(every_s)


@dataclass
class LocalCluster:
    nodes: list[Node]
    node_timeout_ms: int
    tls: Tls | None = None
    stopped: bool = False

    @property
    def url(self) -> str:
        """`REDIS_URL` for the API: any node (the first that is alive)."""
        node = next((n for n in self.nodes if n.alive()), self.nodes[0])
        if self.tls is not None:
            return f"rediss://:{PASSWORD}@127.0.0.1:{node.port}/0{self.tls.url_options()}"
        return f"redis://:{PASSWORD}@127.0.0.1:{node.port}/0"

    def table(self) -> list[dict[str, Any]]:
        """CLUSTER NODES as a live node sees it: id, port, role, failed, the primary's id, slots."""
        node = next(n for n in self.nodes if n.alive() and n.answers())
        with node.client() as c:
            nodes = c.execute_command("CLUSTER NODES")
        rows = []
        for address, row in nodes.items():
            flags = row["flags"].split(",")
            rows.append(
                {
                    "id": row["node_id"],
                    "port": int(address.split(":")[1].split("@")[0]),
                    "role": "primary" if "master" in flags else "replica",
                    "failed": "fail" in flags or "fail?" in flags,
                    "primary_id": row["master_id"],
                    "slots": row["slots"],
                }
            )
        return rows

    def primaries(self) -> list[Node]:
        ports = {r["port"] for r in self.table() if r["role"] == "primary" and r["slots"] and not r["failed"]}
        return [n for n in self.nodes if n.port in ports]

    def node_id(self, node: Node) -> str:
        with node.client() as c:
            return bytes(c.execute_command("CLUSTER MYID")).decode()

    def healthy(self) -> bool:
        """Every live node says the cluster is ok, every slot has a live primary, every live replica is in sync."""
        live = [n for n in self.nodes if n.alive()]
        for n in live:
            with n.client(decode_responses=True) as c:
                if c.execute_command("CLUSTER INFO").get("cluster_state") != "ok":
                    return False
                replication = c.info("replication")
                if replication.get("role") == "slave" and replication.get("master_link_status") != "up":
                    return False
        return True

    def wait_healthy(self, timeout_s: float = 60) -> None:
        until(self.healthy, timeout_s, "the cluster is ok")

    def reshard(self, source: Node, target: Node, slots: int) -> None:
        """Moves `slots` slots (with their keys, MIGRATE) from one primary to another: `redis-cli --cluster
        reshard`, as an operator runs it."""
        _cli(
            "--cluster", "reshard", f"127.0.0.1:{source.port}",
            "--cluster-from", self.node_id(source), "--cluster-to", self.node_id(target),
            "--cluster-slots", str(slots), "--cluster-yes", "--cluster-pipeline", "50", tls=self.tls,
        )  # fmt: skip

    def move_slot(self, slot: int, source: Node, target: Node) -> None:
        """Moves one slot, with its keys, as `redis-cli --cluster reshard` moves each (IMPORTING, MIGRATING,
        MIGRATE, then the new owner announced to every primary)."""
        source_id, target_id = self.node_id(source), self.node_id(target)
        with source.client() as src, target.client() as dst:
            dst.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", source_id)
            src.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", target_id)
            while keys := src.execute_command("CLUSTER", "GETKEYSINSLOT", slot, 100):
                src.execute_command("MIGRATE", "127.0.0.1", target.port, "", 0, 5000, "AUTH", PASSWORD, "KEYS", *keys)
            for node in self.primaries():
                with node.client() as c:
                    c.execute_command("CLUSTER", "SETSLOT", slot, "NODE", target_id)

    def stop(self) -> None:
        for n in self.nodes:
            n.stop()
        self.stopped = True


def start_cluster(
    work: Path, *, primaries: int = 3, replicas: int = 1, node_timeout_ms: int = 1000, tls: Tls | None = None
) -> LocalCluster:
    """A Cluster of `primaries` primaries with `replicas` replicas each, every node on a free loopback port (its bus
    on another), `cluster-node-timeout` short so that a dead primary's replica takes over in a few seconds; with
    `tls`, the clients, the bus and the replication speak TLS only."""
    nodes = []
    for i in range(primaries * (1 + replicas)):
        port = free_port()
        args = _data_args(
            port,
            tls,
            *(["--tls-cluster", "yes"] if tls is not None else []),
            "--cluster-enabled", "yes", "--cluster-port", str(free_port()),
            "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", str(node_timeout_ms),
            # A replica that was away a while still takes over (the default refuses after 10 node timeouts).
            "--cluster-replica-validity-factor", "0",
        )  # fmt: skip
        nodes.append(Node(port, work / f"node{i}", args, tls=tls))
    cluster = LocalCluster(nodes, node_timeout_ms, tls)
    try:
        for n in nodes:
            n.start()
        _cli(
            "--cluster", "create", *(f"127.0.0.1:{n.port}" for n in nodes),
            "--cluster-replicas", str(replicas), "--cluster-yes", tls=tls,
        )  # fmt: skip
        cluster.wait_healthy()
    except BaseException:
        cluster.stop()
        raise
    return cluster


@dataclass
class LocalSentinel:
    primary: Node
    replica: Node
    sentinels: list[Node]
    down_after_ms: int
    tls: Tls | None = None

    @property
    def addresses(self) -> str:
        """`WOVEPAPER_REDIS_SENTINELS`."""
        return ",".join(f"127.0.0.1:{s.port}" for s in self.sentinels)

    @property
    def url(self) -> str:
        """`REDIS_URL` under Sentinel: the primary's password (and TLS); its host is not used."""
        if self.tls is not None:
            return f"rediss://:{PASSWORD}@{MASTER}/0{self.tls.url_options()}"
        return f"redis://:{PASSWORD}@{MASTER}/0"

    def env(self) -> dict[str, str]:
        return {
            "REDIS_URL": self.url,
            "WOVEPAPER_REDIS_SENTINELS": self.addresses,
            "WOVEPAPER_REDIS_SENTINEL_MASTER": MASTER,
            "WOVEPAPER_REDIS_SENTINEL_PASSWORD": SENTINEL_PASSWORD,
        }

    def current_primary(self) -> Node:
        """The data node the Sentinels name as primary now."""
        for s in self.sentinels:
            if not s.alive():
                continue
            try:
                with s.client(SENTINEL_PASSWORD) as c:
                    host, port = c.execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER)
            except redis.RedisError:
                continue
            return next(n for n in (self.primary, self.replica) if n.port == int(port))
        raise RuntimeError("no sentinel answers")

    def in_sync(self) -> bool:
        """The named primary answers as one, and the other data node (when alive) replicates from it."""
        primary = self.current_primary()
        with primary.client(decode_responses=True) as c:
            if c.info("replication").get("role") != "master":
                return False
        for n in (self.primary, self.replica):
            if n is primary or not n.alive():
                continue
            with n.client(decode_responses=True) as c:
                info = c.info("replication")
                if info.get("role") != "slave" or info.get("master_link_status") != "up":
                    return False
                if int(info.get("master_port", 0)) != primary.port:
                    return False
        return True

    def stop(self) -> None:
        for n in (*self.sentinels, self.primary, self.replica):
            n.stop()


def start_sentinel(work: Path, *, down_after_ms: int = 1000, tls: Tls | None = None) -> LocalSentinel:
    """A primary, its replica and three Sentinels (quorum 2) watching it, all with passwords; with `tls`, everything
    (the Sentinels too) speaks TLS only."""
    primary_port, replica_port = free_port(), free_port()
    primary = Node(primary_port, work / "primary", _data_args(primary_port, tls), tls=tls)
    replica = Node(
        replica_port,
        work / "replica",
        _data_args(replica_port, tls, "--replicaof", "127.0.0.1", str(primary_port)),
        tls=tls,
    )
    sentinels = []
    for i in range(3):
        port = free_port()
        directory = work / f"sentinel{i}"
        directory.mkdir(parents=True, exist_ok=True)
        conf = directory / "sentinel.conf"
        listen = (
            f"port {port}\n"
            if tls is None
            else f"port 0\ntls-port {port}\n"
            + "".join(
                f"{name.removeprefix('--')} {value}\n"
                for name, value in zip(tls.server_args()[::2], tls.server_args()[1::2], strict=True)
            )
        )
        conf.write_text(
            f"{listen}bind 127.0.0.1\ndir {directory}\n"
            f"sentinel monitor {MASTER} 127.0.0.1 {primary_port} 2\n"
            f"sentinel auth-pass {MASTER} {PASSWORD}\n"
            f"sentinel down-after-milliseconds {MASTER} {down_after_ms}\n"
            f"sentinel failover-timeout {MASTER} 10000\n"
            f"sentinel parallel-syncs {MASTER} 1\n"
            f"requirepass {SENTINEL_PASSWORD}\nsentinel sentinel-pass {SENTINEL_PASSWORD}\n"
        )
        sentinels.append(Node(port, directory, [str(conf), "--sentinel"], tls=tls))
    local = LocalSentinel(primary, replica, sentinels, down_after_ms, tls)
    try:
        primary.start()
        replica.start()
        for s in sentinels:
            _start_sentinel(s)
        until(local.in_sync, 30, "the replica is in sync")
        until(lambda: _sentinels_agree(local), 30, "the sentinels see each other and the replica")
    except BaseException:
        local.stop()
        raise
    return local


def _start_sentinel(node: Node) -> None:
    log = (node.directory / "server.log").open("ab")
    node.process = subprocess.Popen(
        [shutil.which("redis-server") or "redis-server", *node.args],
        cwd=node.directory,
        stdout=log,
        stderr=subprocess.STDOUT,
        preexec_fn=_die_with_parent_hook(),
    )
    log.close()
    until(lambda: node.answers(SENTINEL_PASSWORD), 10, f"sentinel {node.port} answers", every_s=0.05)


def _sentinels_agree(local: LocalSentinel) -> bool:
    for s in local.sentinels:
        with s.client(SENTINEL_PASSWORD, decode_responses=True) as c:
            state = c.execute_command("SENTINEL", "MASTER", MASTER)
            fields = dict(zip(state[::2], state[1::2], strict=False)) if isinstance(state, list) else dict(state)
            if int(fields.get("num-other-sentinels", 0)) < 2 or int(fields.get("num-slaves", 0)) < 1:
                return False
    return True
