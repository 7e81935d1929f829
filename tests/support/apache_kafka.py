"""Apache Kafka itself for tests: the broker's jars from Maven Central, KRaft nodes as
processes on loopback.

* The jars come from tests/support/kafka_jars.py (Maven Central, cached). CI fetches them
  as a step before pytest (``python -m tests.support.apache_kafka fetch``); a fixture
  that finds no cache fetches them itself. ``cronwire serve`` never does.
* ``KafkaCluster(n)`` formats KRaft storage (``kafka.tools.StorageTool``) and starts n
  combined nodes (each broker + controller, static quorum) with ``kafka.Kafka``;
  replication factor ``min(n, 3)``, ``min.insync.replicas`` 2 when n >= 3. Each node can
  be stopped, killed (-9), frozen (SIGSTOP), thawed and started again on its own data.

The broker settings every node shares are ``KRAFT_SETTINGS`` (docker-compose.kafka.yml
sets the same, which tests/unit/test_docker_compose_kafka.py checks).
"""

from __future__ import annotations

import base64
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from cronwire.loopback import free_port
from tests.support.kafka_jars import (
    APACHE_KAFKA_VERSION,
    classpath,
    fetch_jars,
    fetch_tools_jar,
    java,
)
from tests.support.loopback_ports import answers

# kafka-tools' main class for leader elections (``KafkaCluster.tool``).
LEADER_ELECTION = "org.apache.kafka.tools.LeaderElectionCommand"

# Small heaps: three nodes and the suite share two cores.
JVM_OPTIONS = ("-Xms64m", "-Xmx384m", "-XX:+UseSerialGC", "-XX:+ExitOnOutOfMemoryError",
               "-XX:-UsePerfData", "-Djava.awt.headless=true")
# Tests: the quick compiler only. It starts a node sooner and leaves the suite's two cores
# to the suite; the brokers' load in tests is small. Load tests get the full JIT.
QUICK_START = ("-XX:TieredStopAtLevel=1",)

# What every node runs with, single node or cluster (and what the compose file sets).
KRAFT_SETTINGS: dict[str, str] = {
    "process.roles": "broker,controller",
    "controller.listener.names": "CONTROLLER",
    "inter.broker.listener.name": "PLAINTEXT",
    "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
    # cronwire creates its topic through the admin API; nothing may create it by accident.
    "auto.create.topics.enable": "false",
    "group.initial.rebalance.delay.ms": "0",
}
# Test-only: the in-process suites' consumer groups use a 2 s session (tests/support/
# kafka.FAST_GROUP); Apache Kafka refuses one below this bound (6 s by default).
# `cronwire serve` uses 10 s, which the default bound accepts.
TEST_ONLY_SETTINGS: dict[str, str] = {
    "group.min.session.timeout.ms": "1000",
    "log.cleaner.dedupe.buffer.size": str(16 * 1024 * 1024),
}


def replication_settings(nodes: int) -> dict[str, str]:
    factor = min(nodes, 3)
    isr = "2" if factor >= 3 else "1"
    return {
        "default.replication.factor": str(factor),
        "min.insync.replicas": isr,
        "offsets.topic.replication.factor": str(factor),
        "transaction.state.log.replication.factor": str(factor),
        "transaction.state.log.min.isr": isr,
        "share.coordinator.state.topic.replication.factor": str(factor),
        "share.coordinator.state.topic.min.isr": isr,
    }


def as_environment(settings: dict[str, str]) -> dict[str, str]:
    """Broker settings as the apache/kafka image reads them (``KAFKA_`` + upper snake)."""
    return {"KAFKA_" + key.upper().replace(".", "_"): value for key, value in settings.items()}


def _cluster_id() -> str:
    return base64.urlsafe_b64encode(os.urandom(16)).decode().rstrip("=")


_LOG4J = """\
Configuration:
  Appenders:
    Console: {name: STDOUT, PatternLayout: {pattern: "[%d] %p %m (%c)%n"}}
  Loggers:
    Root: {level: INFO, AppenderRef: [{ref: STDOUT}]}
    Logger:
      - {name: kafka.log.LogCleaner, level: WARN}
      - {name: org.apache.kafka.common.config.AbstractConfig, level: WARN}
"""


@dataclass
class KafkaNode:
    node_id: int
    port: int
    controller_port: int
    home: Path
    process: subprocess.Popen[bytes] | None = None
    quick: bool = True
    _starts: int = 0  # "started" lines in the log before the latest start

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def log_file(self) -> Path:
        return self.home / "server.log"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log(self) -> str:
        return self.log_file.read_text(encoding="utf-8", errors="replace") if self.log_file.exists() else ""

    def start(self, cp: str) -> None:
        assert not self.running, f"node {self.node_id} is running"
        self._reap()
        self.home.mkdir(parents=True, exist_ok=True)
        self._starts = self.log().count(_STARTED)
        with self.log_file.open("ab") as log:
            self.process = subprocess.Popen(
                [java() or "java", *JVM_OPTIONS, *(QUICK_START if self.quick else ()),
                 f"-Dlog4j2.configurationFile={self.home / 'log4j2.yaml'}",
                 "-cp", cp, "kafka.Kafka", str(self.home / "server.properties")],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def wait_started(self, within: float) -> None:
        """The broker logged its start (the port answers after that line)."""
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            if self.process is None or self.process.poll() is not None:
                tail = "\n".join(self.log().splitlines()[-15:])
                raise RuntimeError(f"kafka node {self.node_id} exited; its log ends:\n{tail}")
            if self.log().count(_STARTED) > self._starts and answers(self.port):
                return
            time.sleep(0.1)
        raise RuntimeError(f"kafka node {self.node_id} did not start in {within}s; see {self.log_file}")

    def stop(self, within: float = 60.0) -> int | None:
        """SIGTERM (a controlled shutdown: leadership moves first), SIGKILL after ``within``."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.thaw()
            self.process.terminate()
            try:
                self.process.wait(within)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        return self._reap()

    def kill(self) -> int | None:
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(30)
        return self._reap()

    def freeze(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)

    def thaw(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)

    def _reap(self) -> int | None:
        process, self.process = self.process, None
        return None if process is None else process.wait(30)


@dataclass
class KafkaCluster:
    """``size`` combined KRaft nodes on loopback under ``home``."""

    home: Path
    size: int = 1
    quick: bool = True  # QUICK_START (tests); False for load tests
    nodes: list[KafkaNode] = field(default_factory=list)
    _cp: str = field(default="", repr=False)

    @property
    def bootstrap(self) -> str:
        return ",".join(node.address for node in self.nodes)

    def node(self, node_id: int) -> KafkaNode:
        return next(node for node in self.nodes if node.node_id == node_id)

    def properties(self, node: KafkaNode) -> dict[str, str]:
        voters = ",".join(f"{n.node_id}@127.0.0.1:{n.controller_port}" for n in self.nodes)
        return {
            **KRAFT_SETTINGS, **replication_settings(self.size), **TEST_ONLY_SETTINGS,
            "node.id": str(node.node_id),
            "controller.quorum.voters": voters,
            "listeners": f"PLAINTEXT://127.0.0.1:{node.port},CONTROLLER://127.0.0.1:{node.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{node.port}",
            "log.dirs": str(node.home / "data"),
        }

    def start(self, within: float = 120.0) -> str:
        """Format every node's storage and start them all; the bootstrap list."""
        if java() is None:
            raise RuntimeError("Apache Kafka needs a Java runtime (java not on PATH)")
        self._cp = classpath()
        self.nodes = [KafkaNode(i, free_port(),
                                free_port(), self.home / f"node-{i}",
                                quick=self.quick) for i in range(1, self.size + 1)]
        cluster_id = _cluster_id()
        formats = []
        for node in self.nodes:
            node.home.mkdir(parents=True, exist_ok=True)
            (node.home / "log4j2.yaml").write_text(_LOG4J, encoding="utf-8")
            (node.home / "server.properties").write_text(
                "".join(f"{k}={v}\n" for k, v in self.properties(node).items()), encoding="utf-8")
            formats.append(subprocess.Popen(
                [java() or "java", "-Xmx128m", "-XX:+UseSerialGC",
                 f"-Dlog4j2.configurationFile={node.home / 'log4j2.yaml'}",
                 *QUICK_START, "-cp", self._cp, "kafka.tools.StorageTool", "format",
                 f"--cluster-id={cluster_id}",  # an id may start with "-"
                 "-c", str(node.home / "server.properties")],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL))
        failed = [fmt.args for fmt in formats if fmt.wait(120) != 0]
        if failed:
            raise RuntimeError(f"formatting KRaft storage failed: {failed[0]}")
        for node in self.nodes:
            node.start(self._cp)
        for node in self.nodes:
            node.wait_started(within)
        return self.bootstrap

    def restart(self, node_id: int, within: float = 120.0) -> None:
        """Start a stopped or killed node again on its own data."""
        node = self.node(node_id)
        node.start(self._cp)
        node.wait_started(within)

    def stop(self, within: float = 20.0) -> None:
        """Every node at once (one by one, the last would wait for a quorum that is gone),
        SIGKILL for any still running after ``within`` seconds."""
        for node in self.nodes:
            if node.running:
                node.thaw()
                assert node.process is not None
                node.process.terminate()
        deadline = time.monotonic() + within
        for node in self.nodes:
            node.stop(within=max(0.1, deadline - time.monotonic()))

    def tool(self, main_class: str, *args: str, within: float = 120.0) -> str:
        """Run one of Kafka's command-line tools (a ``main_class`` of kafka-tools, e.g.
        ``org.apache.kafka.tools.LeaderElectionCommand``) against this cluster; its output.
        A tool that exits non-zero raises with what it said."""
        cp = os.pathsep.join((str(fetch_tools_jar()), self._cp or classpath()))
        result = subprocess.run(
            [java() or "java", "-Xmx128m", "-XX:+UseSerialGC", *QUICK_START,
             f"-Dlog4j2.configurationFile={self.nodes[0].home / 'log4j2.yaml'}",
             "-cp", cp, main_class, "--bootstrap-server", self.bootstrap, *args],
            capture_output=True, text=True, timeout=within, stdin=subprocess.DEVNULL, check=False)
        if result.returncode != 0:
            raise RuntimeError(f"{main_class} {' '.join(args)} exited {result.returncode}:\n"
                               f"{result.stdout[-2000:]}{result.stderr[-2000:]}")
        return result.stdout

    def quorum_leader(self) -> int | None:
        """The node id of the active controller (the KRaft quorum's leader), read from the
        nodes' logs: the highest epoch any node says it leads."""
        best: tuple[int, int] | None = None
        for node in self.nodes:
            for epoch in _LEADER_EPOCH.findall(node.log()):
                if best is None or int(epoch) > best[0]:
                    best = (int(epoch), node.node_id)
        return None if best is None else best[1]


_STARTED = "Kafka Server started"
_LEADER_EPOCH = re.compile(r"Completed transition to Leader\(.*?\), epoch=(\d+), epochStartOffset")


def main(argv: list[str]) -> int:
    """``fetch``: the jars into the cache (CI's step). ``run NODES DIR``: a cluster of
    NODES in DIR until SIGTERM or Ctrl-C, its bootstrap list on stdout (for load tests
    against Apache Kafka by hand)."""
    if argv[1:] == ["fetch"]:
        print(f"apache kafka {APACHE_KAFKA_VERSION}: jars in {fetch_jars()}")
        return 0
    if len(argv) == 4 and argv[1] == "run" and argv[2].isdigit():
        cluster = KafkaCluster(Path(argv[3]), size=int(argv[2]), quick=False)
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        try:
            print(cluster.start(), flush=True)
            signal.pause()
        except KeyboardInterrupt:
            pass
        finally:
            cluster.stop()
        return 0
    print("usage: python -m tests.support.apache_kafka fetch | run NODES DIR", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
