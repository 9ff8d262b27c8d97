#!/usr/bin/env bash
# Runs every benchmark side by side and prints the figures docs/benchmarks.md
# records. Absolute numbers are noisy on shared machines: compare within one
# run. Usage: scripts/bench.sh [seconds-per-system-run]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-5}
cargo build --release -p sluice-cli >/dev/null
bin=./target/release/sluice

echo "## Host: sluice bench jitter (gaps in a pinned busy loop; the floor under tail latency)"
"$bin" bench jitter --duration "$secs"
echo
echo "## System: sluice bench chain (64 B UDP, ${secs} s each, median of 3)"
# Hypervisor steal (USER_HZ ticks, all CPUs) during a command: on a shared
# VM it explains most of the run-to-run spread, so it is printed next to
# every system figure.
steal() { awk '/^cpu /{print $9}' /proc/stat; }
with_steal() { local s0; s0=$(steal); "$@"; echo "  (hypervisor steal: $(( $(steal) - s0 )) ticks)"; }
chain() { # length isolation [rate [workers]]
  local args=(bench chain --length "$1" --isolation "$2" --duration "$secs" --json)
  [ -n "${3:-}" ] && args+=(--rate "$3")
  [ -n "${4:-}" ] && args+=(--workers "$4")
  with_steal bash -c 'for _ in 1 2 3; do "$0" "$@"; done | python3 scripts/median.py' "$bin" "${args[@]}"
}
chain 1 inline
chain 3 inline
chain 1 inline "" 2
chain 3 inline "" 2
chain 1 process
chain 3 process
chain 1 process "" 2
chain 3 process "" 2
# p99 at half of the maximum rate, for one and for two workers.
for w in 1 2; do
  max=$("$bin" bench chain --length 3 --isolation process --workers "$w" --duration "$secs" --json | python3 -c 'import json,sys; print(int(json.load(sys.stdin)["mpps"] * 1e6))')
  chain 3 process $((max / 2)) "$w"
done

echo
echo "## The realistic chain: sluice bench nfs (firewall → NAT → monitor → router, 4096 flows, median of 3)"
with_steal bash -c 'for _ in 1 2 3; do "$0" bench nfs --duration "$1" --json; done | python3 scripts/median.py' "$bin" "$secs"
echo "## The realistic chain at 100 k flows (the flow table and NF tables out of cache; ingress prefetches a batch's lookups)"
with_steal bash -c 'for _ in 1 2 3; do "$0" bench nfs --flows 100000 --duration "$1" --json; done | python3 scripts/median.py' "$bin" "$secs"

echo
echo "## Micro-benchmarks (criterion)"
crit() { cargo bench -p "$1" --bench "$2" -- --warm-up-time 1 --measurement-time 2 2>/dev/null | awk '
  /time:/ && /%/ { next }
  /time:/ { line = $0; sub(/^ +/, "", line); if (name != "" && line ~ /^time:/) print name, line; else print line; name = ""; next }
  /^[a-z0-9_]+\/[^ ]*$/ { name = $1 }'; }
crit sluice-mem ring || true
crit sluice-mem pool || true
crit sluice-packet parse
crit sluice-dataplane flow_table
crit sluice-ports generator
crit sluice-ports sink
if [ "${NF_BENCHES:-1}" = 1 ]; then
  for b in firewall nat router ids l2lb flowmon; do crit sluice-nfs "$b"; done
fi
