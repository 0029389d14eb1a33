#!/usr/bin/env bash
# Builds the Dockerfile with podman on a machine that reaches no image registry, and proves the
# image: it starts on SQLite and on PostgreSQL, its health check passes, it runs as a user that is
# not root, its data outlives the container in the volume, and SIGTERM drains it (exit 0).
#
# The Dockerfile's two base images (rust:1.95-bookworm, debian:bookworm-slim) are made here from
# Debian's packages with debootstrap and tagged with the names the Dockerfile pulls, so that the
# Dockerfile stays the one users build elsewhere. The builder carries this machine's Rust
# toolchain (the rustup "stable" the project is built with).
#
# Usage: scripts/container.sh [WORK_DIR]   (as root; podman, runc and debootstrap are installed
# when missing; PostgreSQL at 127.0.0.1:5432, user postgres, trust auth, as on the CI machine).
# docs/OPERATING.md, "The container", has a run's output and what each step is for.
set -euo pipefail
cd "$(dirname "$0")/.."
work=${1:-/tmp/chatgate-container}
mkdir -p "$work"
say() { printf '\n== %s\n' "$*"; }

# This machine's sandbox: root without CAP_SYS_RESOURCE, so no limit may be raised (podman
# raises nofile and nproc by default, and runc was refused even the machine's own nproc), and a
# hybrid cgroup layout that crun refuses; runc takes it. Limits below the machine's are allowed.
limits=(--ulimit nofile=16384:16384 --ulimit nproc=16384:16384)
podman=(podman --runtime runc)
# podman asks systemd for health-check timers, which this machine has not: its complaints are
# dropped, and the health check is run by `podman healthcheck run` below.
quiet() { "$@" 2> >(grep -v "systemd" >&2); }
plain() { sed 's/\x1b\[[0-9;]*m//g'; }

say "tools"
missing=()
for tool in podman runc debootstrap; do command -v "$tool" >/dev/null || missing+=("$tool"); done
if ((${#missing[@]})); then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >/dev/null
fi
podman --version

# A Debian rootfs made by debootstrap, imported as image NAME (once; kept in WORK_DIR).
base_image() {
  local name=$1 dir=$2 include=$3
  if ! "${podman[@]}" image exists "$name"; then
    [ -d "$dir" ] || debootstrap --variant=minbase --include="$include" bookworm "$dir" http://deb.debian.org/debian >/dev/null
    tar -C "$dir" -c . | "${podman[@]}" import --change 'CMD ["bash"]' - "$name" >/dev/null
  fi
  echo "$name: $("${podman[@]}" image inspect --format '{{.Size}}' "$name") bytes"
}

say "base images from debootstrap"
base_image docker.io/library/debian:bookworm-slim "$work/debian" ca-certificates
# The toolchain that builds the project here (rustc, cargo, the standard library), into /usr/local.
sysroot=$(rustc --print sysroot)
[ -n "$sysroot" ] && [ -x "$sysroot/bin/cargo" ] || { echo "no Rust toolchain with cargo at '$sysroot'" >&2; exit 1; }
if ! "${podman[@]}" image exists docker.io/library/rust:1.95-bookworm && [ ! -d "$work/rust" ]; then
  debootstrap --variant=minbase --include=ca-certificates,gcc,libc6-dev bookworm "$work/rust" \
    http://deb.debian.org/debian >/dev/null
  for part in bin lib libexec; do cp -a "$sysroot/$part/." "$work/rust/usr/local/$part/"; done
  # Cargo fetches crates through this machine's egress, whose certificates this machine trusts.
  if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
    cp /usr/local/share/ca-certificates/*.crt "$work/rust/usr/local/share/ca-certificates/"
    chroot "$work/rust" update-ca-certificates >/dev/null
  fi
fi
base_image docker.io/library/rust:1.95-bookworm "$work/rust" ca-certificates,gcc,libc6-dev
"${podman[@]}" run --rm "${limits[@]}" docker.io/library/rust:1.95-bookworm cargo --version

say "build"
start=$(date +%s)
# The docker format keeps HEALTHCHECK (OCI's image format has no field for it).
"${podman[@]}" build --format docker --pull=never --network=host "${limits[@]}" -t localhost/chatgate:check . \
  > "$work/build.log" 2>&1 || { tail -n 30 "$work/build.log"; exit 1; }
echo "built in $(($(date +%s) - start)) s: $("${podman[@]}" image inspect --format '{{.Size}}' localhost/chatgate:check) bytes"

# Starts the image as container NAME on port PORT with extra options; waits for its health check.
run_healthy() {
  local name=$1 port=$2; shift 2
  "${podman[@]}" rm -f "$name" >/dev/null 2>&1 || true
  quiet "${podman[@]}" run -d --name "$name" --network=host "${limits[@]}" -e "CHATGATE_LISTEN=127.0.0.1:$port" "$@" \
    localhost/chatgate:check >/dev/null
  for _ in $(seq 1 100); do
    "${podman[@]}" healthcheck run "$name" >/dev/null 2>&1 && { echo "$name: health check passes"; return 0; }
    sleep 0.2
  done
  "${podman[@]}" logs "$name" | tail -n 20
  return 1
}

# SIGTERM (podman stop) with a webhook in the container's hands: exit 0, and the log says it drained.
stop_drained() {
  local name=$1 port=$2
  "${podman[@]}" exec "$name" chatgate simulate whatsapp --url "http://127.0.0.1:$port" --text "order status 1234" \
    --id "wamid.CONTAINER-$name" | tail -n 1
  local begun; begun=$(date +%s%N)
  quiet "${podman[@]}" stop -t 30 "$name" >/dev/null
  echo "$name: stopped in $((($(date +%s%N) - begun) / 1000000)) ms, exit $("${podman[@]}" inspect --format '{{.State.ExitCode}}' "$name")"
  "${podman[@]}" logs "$name" 2>&1 | plain | grep -E "shutting down|stopped" | cut -c 29- || true
}

# Commands in the SQLite database of the volume, read from outside the container.
sqlite_commands() {
  local file; file="$("${podman[@]}" volume inspect --format '{{.Mountpoint}}' chatgate-check-data)/chatgate.db"
  python3 -c "import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute('SELECT COUNT(*) FROM commands').fetchone()[0])" "$file"
}

say "SQLite, in the volume"
"${podman[@]}" volume rm -f chatgate-check-data >/dev/null 2>&1 || true
run_healthy chatgate-sqlite 18080 -v chatgate-check-data:/app/data
echo "user: $("${podman[@]}" exec chatgate-sqlite id)"
stop_drained chatgate-sqlite 18080
echo "commands stored after it stopped: $(sqlite_commands)"
quiet "${podman[@]}" rm chatgate-sqlite >/dev/null
run_healthy chatgate-sqlite 18080 -v chatgate-check-data:/app/data
echo "volume after a new container: $("${podman[@]}" exec chatgate-sqlite ls -l /app/data | tail -n +2 | awk '{print $3, $5, $9}' | tr '\n' ' ')"
"${podman[@]}" exec chatgate-sqlite chatgate backup /app/data/backup-check | tail -n 2
quiet "${podman[@]}" rm -f chatgate-sqlite >/dev/null

say "PostgreSQL on this machine"
psql -h 127.0.0.1 -U postgres -qc "DROP DATABASE IF EXISTS chatgate_container" 2>/dev/null
psql -h 127.0.0.1 -U postgres -qc "CREATE DATABASE chatgate_container"
run_healthy chatgate-postgres 18081 -e CHATGATE_DATABASE_URL=postgres://postgres@127.0.0.1:5432/chatgate_container
stop_drained chatgate-postgres 18081
echo "commands stored after it stopped: $(psql -h 127.0.0.1 -U postgres -d chatgate_container -qAtc 'SELECT COUNT(*) FROM commands')"
quiet "${podman[@]}" rm -f chatgate-postgres >/dev/null
psql -h 127.0.0.1 -U postgres -qc "DROP DATABASE chatgate_container"
say "the image holds"
