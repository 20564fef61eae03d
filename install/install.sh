#!/usr/bin/env bash
# install.sh [--prefix DIR] [--yes] [--no-service] [--no-runtime]
#
# Builds memd and the two hooks from this checkout, installs them into ~/.local/bin (or
# DIR/bin), provisions the embedding runtime (install/fetch-runtime.sh, from PyPI), wires memd
# into Claude Code / Cursor (`memd init`) and starts the per-user service unless --no-service.
# Safe to run again: binaries are replaced atomically, `memd init` changes nothing twice, the
# service is restarted on the new binary. Downloads nothing except through cargo and pip.
#
#   --prefix DIR   install into DIR/bin instead of ~/.local/bin
#   --yes          ask nothing (memd init --yes: the sidecar stays local-only)
#   --no-service   do not install the systemd/launchd service (hooks start memd on demand)
#   --no-runtime   skip fetch-runtime.sh (search then works lexically until it is run)
set -euo pipefail

say() { printf 'install: %s\n' "$*"; }
die() {
    printf 'install: error: %s\n' "$*" >&2
    exit 1
}

usage() {
    sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'
}

prefix=""
yes=0
service=1
runtime=1
while [[ $# -gt 0 ]]; do
    case "$1" in
    --prefix)
        [[ $# -ge 2 ]] || die "--prefix needs a directory"
        prefix=$2
        shift 2
        ;;
    --prefix=*)
        prefix=${1#--prefix=}
        shift
        ;;
    --yes | -y)
        yes=1
        shift
        ;;
    --no-service)
        service=0
        shift
        ;;
    --no-runtime)
        runtime=0
        shift
        ;;
    -h | --help)
        usage
        exit 0
        ;;
    *)
        usage >&2
        die "unknown option: $1"
        ;;
    esac
done

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"
[[ -n "${HOME:-}" ]] || die "HOME is not set"
command -v cargo >/dev/null 2>&1 || die "cargo is required (install Rust from your package manager or rustup)"

if [[ -n "$prefix" ]]; then
    mkdir -p "$prefix"
    bin_dir="$(cd "$prefix" && pwd)/bin"
else
    bin_dir="$HOME/.local/bin"
fi
target_dir="${CARGO_TARGET_DIR:-$repo_root/target}"

say "building memd (release)"
cargo build --release --locked -p memd --bin memd

say "building the hooks"
if [[ "$(uname -s)" == "Linux" && -x install/build-hooks.sh ]]; then
    install/build-hooks.sh --locked
elif [[ "$(uname -s)" == "Linux" ]]; then
    for hook in hook-prompt hook-stop; do
        cargo rustc --locked --profile hook -p "$hook" --bin "$hook" -- -C target-feature=+crt-static
    done
else
    # Static glibc linking is a Linux matter; elsewhere the hook profile alone.
    cargo build --locked --profile hook -p hook-prompt -p hook-stop
fi

# Copy to a temporary name, then rename: a running daemon or hook keeps its old inode and no
# process ever sees a half-written executable.
install_bin() {
    local src=$1 name=$2
    [[ -x "$src" ]] || die "$src was not built"
    local tmp="$bin_dir/.$name.install.$$"
    cp "$src" "$tmp"
    chmod 755 "$tmp"
    mv -f "$tmp" "$bin_dir/$name"
    say "installed $bin_dir/$name"
}
mkdir -p "$bin_dir"
install_bin "$target_dir/release/memd" memd
install_bin "$target_dir/hook/hook-prompt" hook-prompt
install_bin "$target_dir/hook/hook-stop" hook-stop

if [[ $runtime -eq 1 ]]; then
    say "provisioning the embedding runtime"
    if ! install/fetch-runtime.sh; then
        say "warning: the embedding runtime could not be fetched; memd runs with lexical search until"
        say "         install/fetch-runtime.sh succeeds (then restart memd)"
    fi
fi

init_args=(init --bin-dir "$bin_dir")
if [[ $yes -eq 1 ]]; then
    init_args+=(--yes)
fi
say "configuring clients: memd ${init_args[*]}"
"$bin_dir/memd" "${init_args[@]}"

if [[ $service -eq 1 ]]; then
    say "installing the service"
    # Without a user service manager memd service says so and succeeds; a real failure is
    # reported but does not undo the install (the hooks start memd on demand).
    "$bin_dir/memd" service install || say "warning: the service could not be installed (see above)"
elif "$bin_dir/memd" status >/dev/null 2>&1; then
    say "note: a memd daemon is already running and keeps its old binary until it restarts"
fi

case ":$PATH:" in
*":$bin_dir:"*) ;;
*) say "note: $bin_dir is not on PATH; add it to use the memd command (the hooks use absolute paths)" ;;
esac

cat <<EOF

memd is installed:
  binaries  $bin_dir/memd, $bin_dir/hook-prompt, $bin_dir/hook-stop
  check     $bin_dir/memd doctor
To undo:
  $bin_dir/memd service uninstall     # stop and remove the service
  $bin_dir/memd uninstall             # remove hooks and MCP entries (add --purge to delete memories)
  rm $bin_dir/memd $bin_dir/hook-prompt $bin_dir/hook-stop
EOF
