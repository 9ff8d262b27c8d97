#!/usr/bin/env bash
# Miri (undefined behaviour, data races, weak-memory effects) over the parts
# of sluice-mem it can execute. Needs a nightly toolchain with the miri and
# rust-src components:
#   rustup component add --toolchain nightly miri rust-src
# Builds in target-miri/ (override with MIRI_TARGET_DIR). Skipped, because
# Miri cannot run them: everything that creates an Arena (memfd_create,
# syscall 319, is unsupported, and so are shared file mappings), i.e. the
# arena (and its dma), crossing, link and link_blob unit tests (the arena's layout
# arithmetic does run); and the two long native thread tests
# (200 000 ring items, 2 x 10 000 pool rounds), whose small counterparts are
# in tests/threads.rs. Extra arguments go to every test binary.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! cargo +nightly miri --version >/dev/null 2>&1; then
  echo "miri: not available; install it with" \
    "'rustup component add --toolchain nightly miri rust-src'" >&2
  exit 1
fi

export CARGO_TARGET_DIR="${MIRI_TARGET_DIR:-$PWD/target-miri}"
# rustix passes the futex address to syscall() as an integer; without this
# Miri warns about integer-to-pointer casts on every futex call.
export MIRIFLAGS="${MIRIFLAGS:--Zmiri-permissive-provenance}"
start=$(date +%s)
cargo +nightly miri test -p sluice-mem --lib -- \
  --skip arena::tests:: \
  --skip arena::dma::tests:: \
  --skip crossing::tests:: \
  --skip link::tests:: \
  --skip link_blob::tests:: \
  --skip ring::tests::threads_transfer_every_item_in_order \
  --skip pool::tests::two_caches_share_the_pool "$@"
cargo +nightly miri test -p sluice-mem --test threads -- "$@"
echo "miri: passed in $(($(date +%s) - start)) s"
