#!/usr/bin/env bash
# The whole test suite: formatting, lints, every crate's unit, property,
# integration and fault tests, and the loom model checks.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy (all targets, warnings are errors)"
cargo clippy --workspace --all-targets -- -D warnings
echo "== cargo test"
cargo test --workspace
if [ -x scripts/loom.sh ]; then
  echo "== loom model checks"
  scripts/loom.sh
fi
