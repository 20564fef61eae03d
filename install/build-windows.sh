#!/usr/bin/env bash
# build-windows.sh [extra cargo args]
#
# Cross-builds memd for Windows (x86_64-pc-windows-gnu) on Linux: memd.exe (daemon, CLI, MCP
# bridge), hook-prompt.exe and hook-stop.exe, after install/fetch-windows.sh. What the plain
# `cargo build --target x86_64-pc-windows-gnu` lacks, set here for this one invocation:
#
#   mingw-w64's posix-thread compilers   usearch's C++ uses std::mutex / std::thread, which the
#                                        default (win32-thread) g++ of Debian lacks
#   install/windows/include              a Windows.h case shim (usearch includes <Windows.h>;
#                                        mingw-w64 ships windows.h; Linux names are case-sensitive)
#   static libstdc++, -static            libstdc++ (for the C++ crates, through cc's
#                                        CXXSTDLIB_STATIC), libgcc and winpthread inside the
#                                        .exe, so it needs no mingw DLLs beside it
#
# The build goes to its own target dir, ${MEMD_WINDOWS_TARGET_DIR:-<repo>/target-win}, so these
# settings never invalidate the Linux build in ./target. The default profile is dev (debug);
# pass --release for an optimised build. Output: <target dir>/x86_64-pc-windows-gnu/<profile>/.
# Usage: install/build-windows.sh [--release] [other cargo build args]
# A debug build for the Wine tests needs less compiling with the dependencies unoptimised:
# install/build-windows.sh --config 'profile.dev.package."*".opt-level=0'
set -euo pipefail

readonly TARGET=x86_64-pc-windows-gnu
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"

die() {
    printf 'build-windows: error: %s\n' "$*" >&2
    exit 1
}

for tool in x86_64-w64-mingw32-gcc-posix x86_64-w64-mingw32-g++-posix; do
    command -v "$tool" >/dev/null 2>&1 || die "$tool is missing: run install/fetch-windows.sh"
done
rustup target list --installed 2>/dev/null | grep -qxF "$TARGET" ||
    die "the Rust target $TARGET is missing: run install/fetch-windows.sh"

export CARGO_TARGET_DIR=${MEMD_WINDOWS_TARGET_DIR:-$repo_root/target-win}
export CC_x86_64_pc_windows_gnu=x86_64-w64-mingw32-gcc-posix
export CXX_x86_64_pc_windows_gnu=x86_64-w64-mingw32-g++-posix
export AR_x86_64_pc_windows_gnu=x86_64-w64-mingw32-ar
export CXXFLAGS_x86_64_pc_windows_gnu="-I$repo_root/install/windows/include"
export CXXSTDLIB_STATIC_x86_64_pc_windows_gnu=1
export CARGO_TARGET_X86_64_PC_WINDOWS_GNU_LINKER=x86_64-w64-mingw32-gcc-posix
export CARGO_TARGET_X86_64_PC_WINDOWS_GNU_RUSTFLAGS="-C link-arg=-static"

cargo build --locked --target "$TARGET" -p memd -p hook-prompt -p hook-stop "$@"

profile=debug
for arg in "$@"; do
    [[ "$arg" == --release ]] && profile=release
done
out=$CARGO_TARGET_DIR/$TARGET/$profile
for exe in memd hook-prompt hook-stop; do
    [[ -f "$out/$exe.exe" ]] || die "$out/$exe.exe was not produced"
    # Only Windows' own DLLs (and bcryptprimitives.dll, which Windows 10+ has) may be imported.
    if command -v x86_64-w64-mingw32-objdump >/dev/null 2>&1; then
        mingw=$(x86_64-w64-mingw32-objdump -p "$out/$exe.exe" |
            awk '/DLL Name:/ { print $3 }' | grep -iE '^lib(stdc|gcc|winpthread)' || true)
        [[ -z "$mingw" ]] || die "$exe.exe needs mingw's DLLs ($(echo "$mingw" | tr '\n' ' '))"
    fi
done
printf 'build-windows: built %s\n' "$out/memd.exe $out/hook-prompt.exe $out/hook-stop.exe"
