#!/usr/bin/env bash
# Builds the two hook binaries as static executables (glibc static-pie) with the `hook` profile.
#
# The static flag goes only to the final link of each hook (`cargo rustc ... -- -C
# target-feature=+crt-static`), never workspace-wide: memd itself loads a shared library and
# must stay dynamic. Output: $CARGO_TARGET_DIR/hook/hook-prompt and hook-stop (default
# target dir: ./target). Usage: install/build-hooks.sh [extra cargo args, e.g. --offline]
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"
target_dir="${CARGO_TARGET_DIR:-$repo_root/target}"
hooks=(hook-prompt hook-stop)

for hook in "${hooks[@]}"; do
    echo "building $hook (profile hook, static)"
    cargo rustc "$@" --profile hook -p "$hook" --bin "$hook" -- -C target-feature=+crt-static
done

status=0
for hook in "${hooks[@]}"; do
    bin="$target_dir/hook/$hook"
    if [[ ! -x "$bin" ]]; then
        echo "error: $bin was not produced" >&2
        status=1
        continue
    fi
    if command -v file >/dev/null 2>&1; then
        description="$(file -b "$bin")"
        # `file` says "static-pie linked" (newer) or "statically linked" for a static pie.
        if [[ "$description" == *static-pie* || "$description" == *"statically linked"* ]]; then
            echo "ok: $hook is static ($description)"
        else
            echo "error: $hook is not static: $description" >&2
            status=1
        fi
    else
        echo "note: 'file' is not installed; skipping the static-pie check for $hook"
    fi
    size_bytes="$(wc -c <"$bin" | tr -d ' ')"
    awk -v n="$hook" -v b="$size_bytes" -v p="$bin" \
        'BEGIN { printf "%-12s %9d bytes (%.2f MB)  %s\n", n, b, b / 1000000, p }'
done
exit "$status"
