#!/usr/bin/env bash
# fetch-clients.sh [NAME...]
#
# Installs the pinned agent clients the end-to-end tests run for real (headless, against a
# local stand-in for their model API), from npm:
#
#   DEST/<name>/node_modules/.bin/<bin>     one directory per client
#
# The list is install/clients/: one directory per client holding a package.json that names
# exactly one package at an exact version, and the package-lock.json npm wrote for it. `npm ci`
# installs what the lockfile says and checks every tarball against its sha512 `integrity`, so
# a client is only ever the bytes pinned here (the platform's native binary included). To add a
# client: a new directory with its package.json, then `npm install --package-lock-only` in it.
#
# DEST defaults to ${MEMD_CLIENTS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/memd/clients}, where the
# tests look. Running it again is cheap: a client whose lockfile is unchanged and whose binary
# reports the pinned version is left alone. NAME limits the run to those clients.
#
# Needs Node.js with npm (npm >= 7 for lockfile v3) and access to registry.npmjs.org.
set -euo pipefail

readonly LIST_DIR="$(cd "$(dirname "$0")" && pwd)/clients"
readonly STAMP=.memd-lock.sha256

say() { printf 'fetch-clients: %s\n' "$*"; }
die() {
    printf 'fetch-clients: error: %s\n' "$*" >&2
    exit 1
}

sha256_of() {
    if command -v sha256sum >/dev/null 2>&1; then
        sha256sum "$1" | cut -d' ' -f1
    else
        shasum -a 256 "$1" | cut -d' ' -f1
    fi
}

# Prints "PACKAGE VERSION BIN" for the client described in DIR, or fails naming what is wrong.
describe() {
    node - "$1" <<'JS'
const fs = require('fs'), path = require('path');
const dir = process.argv[2];
const fail = (m) => { console.error(`${dir}: ${m}`); process.exit(1); };
let pkg, lock;
try { pkg = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8')); }
catch (e) { fail(`package.json: ${e.message}`); }
try { lock = JSON.parse(fs.readFileSync(path.join(dir, 'package-lock.json'), 'utf8')); }
catch (e) { fail(`package-lock.json: ${e.message}`); }
const deps = Object.entries(pkg.dependencies || {});
if (deps.length !== 1) fail(`package.json must name exactly one dependency, names ${deps.length}`);
const [name, version] = deps[0];
if (!/^\d+\.\d+\.\d+$/.test(version)) fail(`${name} must be pinned to an exact version, is "${version}"`);
const entry = (lock.packages || {})[`node_modules/${name}`];
if (!entry) fail(`package-lock.json has no entry for ${name}; run npm install --package-lock-only`);
if (entry.version !== version) fail(`package-lock.json pins ${name}@${entry.version}, package.json says ${version}`);
if (!entry.integrity) fail(`package-lock.json has no integrity for ${name}`);
const bins = Object.keys(entry.bin || {});
if (bins.length !== 1) fail(`${name} must install exactly one command, installs ${bins.length}`);
console.log(`${name} ${version} ${bins[0]}`);
JS
}

# True when DEST holds this lockfile's install and its command reports VERSION.
is_current() {
    local dest=$1 lock=$2 bin=$3 version=$4
    [[ -f "$dest/$STAMP" ]] && [[ "$(cat "$dest/$STAMP")" == "$(sha256_of "$lock")" ]] &&
        "$dest/node_modules/.bin/$bin" --version 2>/dev/null | grep -qF "$version"
}

# Installs the client described in SRC into DEST, atomically: a failed run leaves DEST as it was.
install_client() {
    local src=$1 dest=$2 package=$3 version=$4 bin=$5 staged out
    staged="$dest.partial.$$"
    rm -rf "$staged"
    mkdir -p "$staged"
    cp "$src/package.json" "$src/package-lock.json" "$staged/"
    say "installing $package@$version (npm ci: every tarball checked against the lockfile's sha512)"
    if ! out=$(cd "$staged" && npm ci --no-audit --no-fund --loglevel=error 2>&1); then
        rm -rf "$staged"
        printf '%s\n' "$out" | sed 's/^/  npm: /' >&2
        die "npm ci failed for $package@$version (needs access to registry.npmjs.org)"
    fi
    if ! out=$("$staged/node_modules/.bin/$bin" --version 2>&1) || ! grep -qF "$version" <<<"$out"; then
        rm -rf "$staged"
        die "$package@$version installed, but \`$bin --version\` printed: $out (is there a native build for $(uname -s) $(uname -m)?)"
    fi
    sha256_of "$src/package-lock.json" >"$staged/$STAMP"
    rm -rf "$dest"
    mv "$staged" "$dest"
    say "installed $dest/node_modules/.bin/$bin ($out)"
}

main() {
    case "${1:-}" in -h | --help)
        sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'
        exit 0
        ;;
    esac
    command -v npm >/dev/null 2>&1 ||
        die "npm is required to install the clients (Debian/Ubuntu: apt-get install nodejs npm)"
    local root=${MEMD_CLIENTS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/memd/clients}
    mkdir -p "$root"
    local names=("$@") dir name desc package version bin
    if ((${#names[@]} == 0)); then
        for dir in "$LIST_DIR"/*/; do names+=("$(basename "$dir")"); done
    fi
    for name in "${names[@]}"; do
        dir="$LIST_DIR/$name"
        [[ -d "$dir" ]] || die "unknown client $name (known: $(ls "$LIST_DIR" | tr '\n' ' '))"
        desc=$(describe "$dir") || die "bad client description in $dir"
        read -r package version bin <<<"$desc"
        if is_current "$root/$name" "$dir/package-lock.json" "$bin" "$version"; then
            say "$package@$version already installed in $root/$name"
            continue
        fi
        install_client "$dir" "$root/$name" "$package" "$version" "$bin"
    done
}

main "$@"
