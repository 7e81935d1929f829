"""Apache Kafka's jars for the tests, from Maven Central, cached.

``fetch_jars()`` resolves ``org.apache.kafka:kafka_2.13:APACHE_KAFKA_VERSION`` with its
runtime dependencies into a cache (``~/.cache/cronwire/kafka-<version>/libs``, or
``$CRONWIRE_KAFKA_CACHE``) once, through ``mvn -C`` (a bad checksum fails the fetch);
``fetch_tools_jar()`` adds ``kafka-tools``. tests/support/apache_kafka.py runs nodes
from them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import textwrap
from pathlib import Path

APACHE_KAFKA_VERSION = "4.1.1"
# Kafka 4 logs through SLF4J 2 to log4j2; the broker's own distribution ships these.
_LOGGING = (("org.slf4j", "slf4j-api", "2.0.17"),
            ("org.apache.logging.log4j", "log4j-slf4j2-impl", "2.25.3"),
            ("org.apache.logging.log4j", "log4j-core", "2.25.3"))


def cache_dir() -> Path:
    explicit = os.environ.get("CRONWIRE_KAFKA_CACHE")
    base = Path(explicit) if explicit else Path.home() / ".cache" / "cronwire"
    return base / f"kafka-{APACHE_KAFKA_VERSION}"


def java() -> str | None:
    return shutil.which("java")


def _pom() -> str:
    deps = [("org.apache.kafka", "kafka_2.13", APACHE_KAFKA_VERSION), *_LOGGING]
    listed = "\n".join(
        f"    <dependency><groupId>{g}</groupId><artifactId>{a}</artifactId>"
        f"<version>{v}</version></dependency>" for g, a, v in deps)
    return textwrap.dedent("""\
        <project xmlns="http://maven.apache.org/POM/4.0.0">
          <modelVersion>4.0.0</modelVersion>
          <groupId>cronwire.tests</groupId><artifactId>apache-kafka</artifactId>
          <version>1</version><packaging>pom</packaging>
          <dependencies>
        {deps}
          </dependencies>
        </project>
        """).format(deps=listed)


def fetch_jars(within: float = 900.0) -> Path:
    """The directory of the broker's jars, fetched with Maven on first use (checksums
    verified: ``-C``). The fetch lands in a temporary directory renamed into place, so an
    interrupted one is never mistaken for a complete cache."""
    home = cache_dir()
    libs = home / "libs"
    if (home / "complete").is_file():
        return libs
    mvn = shutil.which("mvn")
    if mvn is None:
        raise RuntimeError("Apache Kafka's jars are not cached and mvn is not installed")
    home.mkdir(parents=True, exist_ok=True)
    work = home / f"fetch-{os.getpid()}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    (work / "pom.xml").write_text(_pom(), encoding="utf-8")
    result = subprocess.run(
        [mvn, "-q", "-B", "-C", "-f", str(work / "pom.xml"), "dependency:copy-dependencies",
         "-DincludeScope=runtime", f"-DoutputDirectory={work / 'libs'}"],
        capture_output=True, text=True, timeout=within, stdin=subprocess.DEVNULL, check=False)
    if result.returncode != 0:
        shutil.rmtree(work, ignore_errors=True)
        raise RuntimeError(f"mvn could not fetch kafka_2.13:{APACHE_KAFKA_VERSION}:\n"
                           f"{result.stdout[-2000:]}{result.stderr[-2000:]}")
    shutil.rmtree(libs, ignore_errors=True)
    (work / "libs").rename(libs)
    shutil.rmtree(work, ignore_errors=True)
    (home / "complete").write_text(APACHE_KAFKA_VERSION + "\n", encoding="utf-8")
    return libs


def fetch_tools_jar(within: float = 300.0) -> Path:
    """``kafka-tools`` (the CLI tools' classes, e.g. ``kafka-broker-api-versions.sh``'s),
    which the broker does not need: fetched on its own with Maven (checksums verified) into
    ``<cache>/tools`` on first use, for the compose file's stand-in image (its
    healthcheck). Its dependencies are the broker's."""
    tools = cache_dir() / "tools"
    jar = tools / f"kafka-tools-{APACHE_KAFKA_VERSION}.jar"
    if jar.is_file():
        return jar
    mvn = shutil.which("mvn")
    if mvn is None:
        raise RuntimeError("kafka-tools is not cached and mvn is not installed")
    work = cache_dir() / f"tools-fetch-{os.getpid()}"
    shutil.rmtree(work, ignore_errors=True)
    result = subprocess.run(
        [mvn, "-q", "-B", "-C", "org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy",
         f"-Dartifact=org.apache.kafka:kafka-tools:{APACHE_KAFKA_VERSION}",
         f"-DoutputDirectory={work}"],
        capture_output=True, text=True, timeout=within, stdin=subprocess.DEVNULL, check=False)
    if result.returncode != 0 or not (work / jar.name).is_file():
        shutil.rmtree(work, ignore_errors=True)
        raise RuntimeError(f"mvn could not fetch kafka-tools:{APACHE_KAFKA_VERSION}:\n"
                           f"{result.stdout[-2000:]}{result.stderr[-2000:]}")
    shutil.rmtree(tools, ignore_errors=True)
    work.rename(tools)
    return jar


def classpath() -> str:
    return os.pathsep.join(str(jar) for jar in sorted(fetch_jars().glob("*.jar")))
