#!/usr/bin/env bash
# The whole test suite: formatting, lints, every crate's unit, property,
# integration and fault tests, the daemon's API fuzzed from its OpenAPI
# document (with schemathesis), every cargo-fuzz target briefly (with
# cargo-fuzz), the DPDK port (with libdpdk-dev), the loom
# model checks and Miri (with a nightly toolchain that has it).
set -euo pipefail
cd "$(dirname "$0")/.."

# Each stage says how long it took, so a slow CI run shows where.
stage_start=$SECONDS
stage() {
  echo "   (took $((SECONDS - stage_start)) s)"
  stage_start=$SECONDS
  echo "== $*"
}

stage "cargo fmt --check"
cargo fmt --all -- --check
stage "cargo clippy (all targets, warnings are errors)"
cargo clippy --workspace --all-targets -- -D warnings
stage "cargo test"
cargo test --workspace
stage "API fuzzing from the OpenAPI document (scripts/api-fuzz.sh, schemathesis)"
SLUICE_BIN="${CARGO_TARGET_DIR:-target}/debug/sluice" scripts/api-fuzz.sh
stage "fuzz targets (scripts/fuzz.sh, ${FUZZ_SECONDS:-5} s each)"
FUZZ_SECONDS="${FUZZ_SECONDS:-5}" scripts/fuzz.sh
if pkg-config --exists libdpdk 2>/dev/null; then
  stage "DPDK port (sluice-nic --features dpdk)"
  cargo clippy -p sluice-nic --all-targets --features dpdk -- -D warnings
  cargo test -p sluice-nic --features dpdk
else
  echo "note: libdpdk-dev is not installed; skipping the DPDK port's tests (.ci/run installs it)"
fi
if [ -x scripts/loom.sh ]; then
  stage "loom model checks"
  scripts/loom.sh
fi
if cargo +nightly miri --version >/dev/null 2>&1; then
  stage "miri (sluice-mem: rings, pool, wake word)"
  scripts/miri.sh
else
  echo "note: nightly miri is not installed; skipping scripts/miri.sh"
fi
echo "   (took $((SECONDS - stage_start)) s; $SECONDS s in all)"
