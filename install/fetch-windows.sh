#!/usr/bin/env bash
# fetch-windows.sh
#
# Provisions what building memd's Windows hooks on Linux and running them under Wine needs.
# install/test.sh calls it on Linux x86_64 unless MEMD_WINDOWS=0:
#
#   rustup target x86_64-pc-windows-gnu    Rust's standard library for Windows (GNU ABI)
#   gcc-mingw-w64-x86-64 (Debian)          the linker, and the C compiler for ring and SQLite
#   g++-mingw-w64-x86-64 (Debian)          the C++ compiler for usearch; install/build-windows.sh
#                                          uses its posix-thread variant (std::mutex)
#   wine64 (Debian)                        runs the .exe files: /usr/lib/wine/wine64
#   CACHE/windows/onnxruntime.dll          ONNX Runtime for Windows, from PyPI's onnxruntime
#                                          wheel for win_amd64 (the version and sha256 pinned
#                                          like fetch-runtime.sh's Linux library)
#   CACHE/windows/bcryptprimitives.dll     a test-only shim built here from
#                                          install/windows/bcryptprimitives.c: Rust's std
#                                          imports ProcessPrng from that DLL, which Wine 8.0
#                                          lacks. Never shipped; never committed.
#
# CACHE is ${XDG_CACHE_HOME:-~/.cache}/memd. The Debian versions are pinned (WINE_VERSION,
# MINGW_VERSION); when the pinned one is no longer offered, the newest offered one is installed
# and a warning names both. Running it again when everything is in place does nothing.
# Needs root (or sudo) to install packages; Debian x86_64 only.
set -euo pipefail

readonly WINE_VERSION=${MEMD_WINE_VERSION:-8.0~repack-4}
readonly MINGW_VERSION=${MEMD_MINGW_VERSION:-12.2.0-14+25.2}
readonly TARGET=x86_64-pc-windows-gnu
readonly WINE=/usr/lib/wine/wine64
readonly ORT_VERSION=1.31.1
readonly ORT_MEMBER=onnxruntime/capi/onnxruntime.dll
readonly ORT_SHA256=8482d2ee174e28504f99730fb01d6861575870283de4ed3a897ad39170d9a9b9

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
readonly SHIM_SRC=$repo_root/install/windows/bcryptprimitives.c
readonly DEST=${XDG_CACHE_HOME:-$HOME/.cache}/memd/windows

say() { printf 'fetch-windows: %s\n' "$*"; }
die() {
    printf 'fetch-windows: error: %s\n' "$*" >&2
    exit 1
}

installed_version() {
    { dpkg-query -W -f='${Status} ${Version}\n' "$1" 2>/dev/null || true; } |
        awk '$3 == "installed" { print $4 }'
}

offered() {
    { apt-cache madison "$1" 2>/dev/null || true; } | awk -F'|' '{ gsub(/ /, "", $2); print $2 }' | grep -qxF "$2"
}

# Installs package $1 at the pinned version $2 (or newer, when the pin is gone) unless an equal
# or newer version is installed.
apt_package() {
    local package=$1 pin=$2 have version
    have=$(installed_version "$package")
    if [[ -n "$have" ]] && dpkg --compare-versions "$have" ge "$pin"; then
        say "$package $have already installed"
        return 0
    fi
    local sudo=()
    if [[ $(id -u) -ne 0 ]]; then
        command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null ||
            die "installing $package needs root: run 'sudo apt-get install --no-install-recommends $package', or this script as root"
        sudo=(sudo -n)
    fi
    if [[ -z "${APT_UPDATED:-}" ]]; then
        say "updating apt's package lists"
        "${sudo[@]}" apt-get update -qq || die "apt-get update failed"
        APT_UPDATED=1
    fi
    version=$pin
    if ! offered "$package" "$pin"; then
        version=$({ apt-cache policy "$package" || true; } | awk '/Candidate:/ { print $2 }')
        [[ -n "$version" && "$version" != "(none)" ]] || die "apt offers no $package package"
        say "warning: pinned $package $pin is no longer offered; installing $version"
    fi
    say "installing $package $version"
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        "$package=$version" >/dev/null || die "apt-get install $package=$version failed"
}

rust_target() {
    command -v rustup >/dev/null 2>&1 || die "rustup is needed to add the $TARGET target"
    if rustup target list --installed | grep -qxF "$TARGET"; then
        say "rust target $TARGET already installed"
    else
        say "adding rust target $TARGET"
        rustup target add "$TARGET" || die "rustup target add $TARGET failed"
    fi
}

# Builds the shim unless the cached DLL was built from this very source.
shim() {
    local dll=$DEST/bcryptprimitives.dll stamp=$DEST/bcryptprimitives.sha256 sum
    [[ -f "$SHIM_SRC" ]] || die "$SHIM_SRC is missing"
    sum=$(sha256sum "$SHIM_SRC" | cut -d' ' -f1)
    if [[ -f "$dll" && "$(cat "$stamp" 2>/dev/null)" == "$sum" ]]; then
        say "shim $dll is current"
        return 0
    fi
    mkdir -p "$DEST"
    x86_64-w64-mingw32-gcc -shared -O2 -s -o "$dll.tmp" "$SHIM_SRC" -ladvapi32 ||
        die "building the bcryptprimitives.dll shim failed"
    mv "$dll.tmp" "$dll"
    printf '%s\n' "$sum" >"$stamp"
    say "built $dll"
}

# The Windows ONNX Runtime DLL, unless the cached one has the pinned sha256.
onnxruntime_dll() {
    local dll=$DEST/onnxruntime.dll work wheels
    if [[ -f "$dll" ]] && [[ "$(sha256sum "$dll" | cut -d' ' -f1)" == "$ORT_SHA256" ]]; then
        say "$dll is current (sha256 ok)"
        return 0
    fi
    python3 -m pip --version >/dev/null 2>&1 || die "pip is needed to download onnxruntime from PyPI"
    mkdir -p "$DEST"
    work=$(mktemp -d)
    # shellcheck disable=SC2064 # expand now: $work is local
    trap "rm -rf '$work'" RETURN
    say "downloading onnxruntime==$ORT_VERSION for win_amd64"
    PIP_REQUIRE_VIRTUALENV=false python3 -m pip download --quiet --no-deps --only-binary=:all: \
        --disable-pip-version-check --progress-bar off --python-version 3.11 \
        --platform win_amd64 -d "$work" "onnxruntime==$ORT_VERSION" ||
        die "could not download onnxruntime==$ORT_VERSION for win_amd64 (is PyPI reachable?)"
    wheels=("$work"/*.whl)
    python3 - "${wheels[0]}" "$ORT_MEMBER" "$work/onnxruntime.dll" <<'PY' || die "$ORT_MEMBER is not in the wheel"
import shutil, sys, zipfile
wheel, member, out = sys.argv[1:]
with zipfile.ZipFile(wheel) as z, z.open(member) as src, open(out, "wb") as dst:
    shutil.copyfileobj(src, dst)
PY
    [[ "$(sha256sum "$work/onnxruntime.dll" | cut -d' ' -f1)" == "$ORT_SHA256" ]] ||
        die "sha256 mismatch for $ORT_MEMBER from onnxruntime==$ORT_VERSION"
    mv "$work/onnxruntime.dll" "$dll"
    say "installed $dll (sha256 ok)"
}

main() {
    case "${1:-}" in -h | --help)
        printf 'usage: %s\n' "$0"
        exit 0
        ;;
    esac
    [[ "$(uname -s)-$(uname -m)" == Linux-x86_64 ]] || die "only Linux x86_64 is supported"
    command -v dpkg-query >/dev/null 2>&1 ||
        die "this script uses Debian's apt; install wine64 and mingw-w64 (x86_64) by hand"
    rust_target
    apt_package gcc-mingw-w64-x86-64 "$MINGW_VERSION"
    apt_package g++-mingw-w64-x86-64 "$MINGW_VERSION"
    apt_package wine64 "$WINE_VERSION"
    [[ -x "$WINE" ]] || die "$WINE is missing after installing wine64"
    command -v x86_64-w64-mingw32-gcc >/dev/null 2>&1 ||
        die "x86_64-w64-mingw32-gcc is missing after installing gcc-mingw-w64-x86-64"
    command -v x86_64-w64-mingw32-g++-posix >/dev/null 2>&1 ||
        die "x86_64-w64-mingw32-g++-posix is missing after installing g++-mingw-w64-x86-64"
    shim
    onnxruntime_dll
    say "ready: $("$WINE" --version 2>/dev/null || echo wine64), $(x86_64-w64-mingw32-gcc -dumpversion) mingw-w64 gcc"
}

main "$@"
