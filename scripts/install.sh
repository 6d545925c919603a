#!/usr/bin/env bash
# Make this machine ready for fencecheck: a Docker engine that answers, the package installed
# with its dev tools, and the node images built. Safe to run again; quick when all is in place.
#
#   scripts/install.sh            # as root (or with sudo available)
#
# Environment: FENCECHECK_DEBIAN_MIRROR overrides the mirror read from apt's sources for the
# image build; DOCKERD_LOG (default /var/log/dockerd.log) receives the engine's output when this
# script has to start it.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dockerd_log="${DOCKERD_LOG:-/var/log/dockerd.log}"
python="${PYTHON:-python3}"

say() { printf '\033[1m==> %s\033[0m\n' "$*"; }
die() { printf 'install.sh: %s\n' "$*" >&2; exit 1; }

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"
    elif command -v sudo >/dev/null; then sudo "$@"
    else die "'$*' needs root; run this script as root"
    fi
}

engine_answers() { docker info >/dev/null 2>&1; }

# 1. The engine: Debian's docker.io (engine 20.10) when none is installed.
if ! command -v dockerd >/dev/null; then
    say "installing docker.io from Debian"
    as_root apt-get update
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y docker.io
fi
# debootstrap builds the base image; nsenter (util-linux) gives the fast fault path.
missing=()
command -v debootstrap >/dev/null || missing+=(debootstrap)
command -v nsenter >/dev/null || missing+=(util-linux)
# Headless Chromium and its driver open the HTML reports in the browser tests.
command -v chromium >/dev/null || missing+=(chromium)
command -v chromedriver >/dev/null || missing+=(chromium-driver)
# The lazy file system's own tests mount it on this host with Debian's python3 and pyfuse3.
/usr/bin/python3 -c "import pyfuse3" 2>/dev/null || missing+=(python3-pyfuse3)
command -v fusermount3 >/dev/null || missing+=(fuse3)
# The reference lock server's clock tests run it on this host under libfaketime.
dpkg -s libfaketime >/dev/null 2>&1 || missing+=(libfaketime)
if [ ${#missing[@]} -gt 0 ]; then
    say "installing ${missing[*]}"
    as_root apt-get update
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y "${missing[@]}"
fi

# 2. Start dockerd when nothing answers, then wait for it.
if ! engine_answers; then
    say "starting dockerd (log: $dockerd_log)"
    as_root sh -c "nohup dockerd >>'$dockerd_log' 2>&1 </dev/null &"
    for _ in $(seq 1 120); do
        engine_answers && break
        sleep 0.5
    done
    engine_answers || die "dockerd did not answer within 60 s; see $dockerd_log"
fi

# 3. The package, editable, with dev tools, at the versions CI tested (constraints.txt); skipped
# when pyproject.toml and constraints.txt have not changed since.
stamp_dir="${XDG_CACHE_HOME:-$HOME/.cache}/fencecheck"
# Keyed by this checkout's path and interpreter too: an editable install points at one checkout,
# and a fresh clone elsewhere (CI) or a new virtual environment must install itself rather than
# test another folder's code.
stamp="$stamp_dir/install-$( (echo "$repo"; command -v "$python"; cat "$repo/pyproject.toml" "$repo/constraints.txt") | sha256sum | cut -c1-16)"
installed_here() {
    (cd / && "$python" -c "import sys, harness; sys.exit(harness.__file__.startswith('$repo/') is False)") 2>/dev/null
}
if [ ! -e "$stamp" ] || ! installed_here; then
    say "pip install -c constraints.txt -e '.[dev]'"
    (cd "$repo" && "$python" -m pip install --quiet -c constraints.txt -e '.[dev]')
    mkdir -p "$stamp_dir" && touch "$stamp"
fi

# 4. Images: rebuilt only when their recipe (docker/) changed.
say "images"
"$python" -m harness images build --all
