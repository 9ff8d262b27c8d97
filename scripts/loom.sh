#!/usr/bin/env bash
# Loom model checks of sluice-mem's ring, pool and wake-word protocol
# (crates/sluice-mem/tests/loom.rs). Takes well under a minute once built.
#
# Builds in its own target directory (default target-loom/, override with
# LOOM_TARGET_DIR) because `--cfg loom` changes every crate's build and would
# otherwise invalidate the normal target/. The preemption bound defaults to 3
# (LOOM_MAX_PREEMPTIONS overrides it; it must be below 256); unbounded
# exploration of the ring model runs for tens of minutes. Extra arguments go
# to the test binary, e.g. `scripts/loom.sh wake_is_never_lost`.
# Set CARGO_BUILD_JOBS=1 to keep the build off a shared machine's other core.
set -euo pipefail
cd "$(dirname "$0")/.."

export LOOM_MAX_PREEMPTIONS="${LOOM_MAX_PREEMPTIONS:-3}"
export RUSTFLAGS="${RUSTFLAGS:+$RUSTFLAGS }--cfg loom"
export CARGO_TARGET_DIR="${LOOM_TARGET_DIR:-$PWD/target-loom}"

start=$(date +%s)
cargo test -p sluice-mem --test loom --release -- "$@"
echo "loom: model checks passed in $(($(date +%s) - start)) s" \
  "(LOOM_MAX_PREEMPTIONS=$LOOM_MAX_PREEMPTIONS, build included)"
