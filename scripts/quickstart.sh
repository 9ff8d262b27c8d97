#!/usr/bin/env bash
# Builds sluice and runs the quickstart spec on the built-in traffic
# generator: generator -> ACL -> monitor -> sink, each NF in its own process.
# Needs no root, no NIC and no huge pages. Extra arguments go to `sluice run`.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v cargo >/dev/null 2>&1; then
  echo "sluice needs a Rust toolchain (cargo). Install one from https://rustup.rs and retry." >&2
  exit 1
fi
cargo build --release -p sluice-cli
exec ./target/release/sluice run examples/quickstart.yaml --duration 5 "$@"
