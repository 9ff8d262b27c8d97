#!/usr/bin/env bash
# Instructions per item of sluice-mem's hot paths, counted with callgrind.
# Unlike the criterion benches' wall-clock times these counts do not move
# when the machine is busy, so they are the figures to compare across
# commits. Each op runs twice (ROUNDS and 2*ROUNDS rounds, in the `instr`
# bench binary) and the difference is divided by the extra items, which
# cancels process start-up and set-up. Needs valgrind. Usage:
#   scripts/bench-instr.sh [ROUNDS]      (default 10000)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-10000}

if ! command -v valgrind >/dev/null 2>&1; then
  echo "bench-instr: valgrind is not installed (apt-get install valgrind)" >&2
  exit 1
fi

bin=$(cargo bench -p sluice-mem --bench instr --no-run --message-format=json 2>/dev/null |
  grep -o '"executable":"[^"]*"' | sed 's/"executable":"\(.*\)"/\1/' | tail -n 1)
if [ -z "$bin" ] || [ ! -x "$bin" ]; then
  echo "bench-instr: could not build the instr bench" >&2
  exit 1
fi

# Total instructions callgrind counted for `instr OP N`.
count() {
  valgrind --tool=callgrind --callgrind-out-file=/dev/null "$bin" "$1" "$2" 2>&1 |
    sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}

printf '%-14s %8s %14s\n' op items/round instr/item
for spec in ring1:1 ring32:32 ring256:256 pool_pair:1 pool_batch32:32 hop32:32 hop32_wakes:32; do
  op=${spec%%:*}
  items=${spec##*:}
  a=$(count "$op" "$rounds")
  b=$(count "$op" $((2 * rounds)))
  awk -v op="$op" -v items="$items" -v a="$a" -v b="$b" -v n="$rounds" \
    'BEGIN { printf "%-14s %8d %14.2f\n", op, items, (b - a) / (n * items) }'
done
