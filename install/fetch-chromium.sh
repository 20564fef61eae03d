#!/usr/bin/env bash
# fetch-chromium.sh
#
# Provisions headless Chromium and its WebDriver (chromedriver) for memd's dashboard tests, from
# Debian's packages `chromium` and `chromium-driver` (apt verifies the archive's signatures):
#
#   /usr/bin/chromium       the browser
#   /usr/bin/chromedriver   the W3C WebDriver server the tests drive it through
#
# The version is pinned (CHROMIUM_VERSION); the two packages must be the same version. Debian's
# security archive replaces a version when it publishes a fix, so when the pinned one is no
# longer offered the newest offered one is installed and a warning names both. Running it again
# when the pinned (or an equal) version is installed does nothing: apt keeps the downloaded
# packages in its own cache.
#
# Needs root (or sudo) to install; prints what to run otherwise. Debian only (Ubuntu ships
# Chromium as a snap, not as these packages).
set -euo pipefail

readonly CHROMIUM_VERSION=${MEMD_CHROMIUM_VERSION:-156.0.8078.108-1~deb12u1}

say() { printf 'fetch-chromium: %s\n' "$*"; }
die() {
    printf 'fetch-chromium: error: %s\n' "$*" >&2
    exit 1
}

installed_version() {
    { dpkg-query -W -f='${Status} ${Version}\n' "$1" 2>/dev/null || true; } |
        awk '$3 == "installed" { print $4 }'
}

# True when apt offers exactly this version of the package.
offered() {
    { apt-cache madison "$1" 2>/dev/null || true; } | awk -F'|' '{ gsub(/ /, "", $2); print $2 }' | grep -qxF "$2"
}

offered_all() {
    offered chromium "$1" && offered chromium-common "$1" && offered chromium-driver "$1"
}

main() {
    case "${1:-}" in -h | --help)
        printf 'usage: %s\n' "$0"
        exit 0
        ;;
    esac
    command -v dpkg-query >/dev/null 2>&1 || die "this script uses Debian's apt; install chromium and chromedriver by hand and put them on PATH"
    local have_browser have_driver
    have_browser=$(installed_version chromium)
    have_driver=$(installed_version chromium-driver)
    if [[ -n "$have_browser" && "$have_browser" == "$have_driver" ]] &&
        dpkg --compare-versions "$have_browser" ge "$CHROMIUM_VERSION"; then
        say "chromium and chromium-driver $have_browser already installed; nothing to do"
        return 0
    fi

    local sudo=()
    if [[ $(id -u) -ne 0 ]]; then
        command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null ||
            die "installing needs root: run 'sudo apt-get install chromium chromium-driver', or this script as root"
        sudo=(sudo -n)
    fi
    say "updating apt's package lists"
    "${sudo[@]}" apt-get update -qq || die "apt-get update failed"

    # The three packages must agree: chromium depends on chromium-common of its own version.
    local version=""
    if [[ -n "$have_browser" ]] && dpkg --compare-versions "$have_browser" ge "$CHROMIUM_VERSION" &&
        offered_all "$have_browser"; then
        version=$have_browser # keep the installed browser; add its driver
    elif offered_all "$CHROMIUM_VERSION"; then
        version=$CHROMIUM_VERSION
    else
        version=$({ apt-cache policy chromium || true; } | awk '/Candidate:/ { print $2 }')
        [[ -n "$version" && "$version" != "(none)" ]] || die "apt offers no chromium package"
        offered_all "$version" || die "apt offers chromium $version but not chromium-common and chromium-driver of that version"
        say "warning: pinned $CHROMIUM_VERSION is no longer offered; installing $version"
    fi
    say "installing chromium, chromium-common and chromium-driver $version"
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        --allow-downgrades "chromium=$version" "chromium-common=$version" "chromium-driver=$version" >/dev/null ||
        die "apt-get install chromium=$version chromium-common=$version chromium-driver=$version failed"
    /usr/bin/chromedriver --version >/dev/null || die "chromedriver does not run after installation"
    say "installed: $(/usr/bin/chromium --version 2>/dev/null | head -1); $(/usr/bin/chromedriver --version | head -1)"
}

main "$@"
