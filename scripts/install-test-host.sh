#!/usr/bin/env bash
# Installs what a Debian 12 test host lacks for the image tier, and starts the engine:
#   - Docker engine (Debian's docker.io), started in the background when not running
#   - buildx, compose v2 and podman's quadlet: not in bookworm, but trixie's binaries run on
#     bookworm, so they are downloaded with a temporary sources list and unpacked into
#     TOOLS_DIR (no trixie package is ever installed)
#   - debootstrap, for `build.py base --bootstrap` where no OS image can be pulled
#   - python3-venv, for the unit tier's checkov venv (tests/run)
#   - prometheus (bookworm's): its promtool checks monitoring/'s rules and config in the unit tier,
#     and the serving tier starts the real prometheus against the served units
# Idempotent: a second run only checks. Needs root and the machine's own Debian mirror.
set -euo pipefail

TOOLS_DIR=${VLLM_TURING_TOOLS_DIR:-/opt/vllm-turing-tools}
log() { printf 'install-test-host: %s\n' "$*"; }

[ "$(id -u)" = 0 ] || { echo "install-test-host: run as root (apt-get, dockerd)" >&2; exit 2; }

apt_ready=
apt_install() {
    [ -n "$apt_ready" ] || { apt-get update -qq; apt_ready=1; }
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

command -v dockerd >/dev/null || { log "installing docker.io"; apt_install docker.io; }
command -v debootstrap >/dev/null || { log "installing debootstrap"; apt_install debootstrap; }
# tests/run makes a venv for checkov (tests/requirements-checkov.txt): Debian's venv needs ensurepip
python3 -c 'import ensurepip' 2>/dev/null || { log "installing python3-venv"; apt_install python3-venv; }
command -v promtool >/dev/null || { log "installing prometheus (promtool)"; apt_install prometheus; }

# The machine's own Debian mirror, read from its sources (deb822 or one-line format).
debian_mirror() {
    local uri
    uri=$(grep -hE '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}' | grep -v security | head -n1 || true)
    [ -n "$uri" ] || uri=$(grep -hE '^deb ' /etc/apt/sources.list 2>/dev/null | awk '{print $2}' | grep -v security | head -n1 || true)
    [ -n "$uri" ] || { echo "install-test-host: no Debian mirror in /etc/apt/sources*" >&2; exit 2; }
    echo "$uri"
}

fetch_trixie_binaries() {
    local work=$1; shift
    local lists="$work/lists" mirror
    mirror=$(debian_mirror)
    mkdir -p "$lists/partial" "$work/debs"
    echo "deb [trusted=yes] $mirror trixie main" > "$work/trixie.list"
    local opts=(-o "Dir::Etc::SourceList=$work/trixie.list" -o "Dir::Etc::SourceParts=-"
                -o "Dir::State::Lists=$lists" -o "APT::Get::List-Cleanup=0")
    apt-get "${opts[@]}" update -qq
    (cd "$work/debs" && apt-get "${opts[@]}" download "$@" >/dev/null)
    for deb in "$work"/debs/*.deb; do dpkg -x "$deb" "$work/root"; done
}

plugins=/root/.docker/cli-plugins
if ! { [ -x "$plugins/docker-compose" ] && [ -x "$plugins/docker-buildx" ] && [ -x "$TOOLS_DIR/bin/quadlet" ]; }; then
    log "fetching compose v2, buildx and quadlet from trixie into $TOOLS_DIR"
    work=$(mktemp -d)
    fetch_trixie_binaries "$work" docker-compose docker-buildx podman
    mkdir -p "$plugins" "$TOOLS_DIR/bin"
    install -m 0755 "$work/root/usr/libexec/docker/cli-plugins/docker-compose" "$plugins/docker-compose"
    install -m 0755 "$work/root/usr/libexec/docker/cli-plugins/docker-buildx" "$plugins/docker-buildx"
    install -m 0755 "$work/root/usr/libexec/podman/quadlet" "$TOOLS_DIR/bin/quadlet"
    rm -rf "$work"
fi

if ! docker info >/dev/null 2>&1; then
    log "starting dockerd in the background (log: /var/log/dockerd.log)"
    nohup dockerd >/var/log/dockerd.log 2>&1 &
    for _ in $(seq 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
    docker info >/dev/null 2>&1 || { echo "install-test-host: dockerd did not start, see /var/log/dockerd.log" >&2; exit 1; }
fi

log "ready: $(docker version --format 'engine {{.Server.Version}}'), $(docker compose version --short 2>/dev/null | sed 's/^/compose /'), $(docker buildx version | awk '{print "buildx", $2}'), quadlet at $TOOLS_DIR/bin/quadlet, $(promtool --version 2>&1 | awk 'NR==1 {print "promtool", $3}')"
