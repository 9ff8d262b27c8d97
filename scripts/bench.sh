#!/usr/bin/env bash
# Runs every benchmark side by side and prints the figures docs/benchmarks.md
# records. Absolute numbers are noisy on shared machines: compare within one
# run. Usage: scripts/bench.sh [seconds-per-system-run]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-5}
cargo build --release -p sluice-cli >/dev/null
bin=./target/release/sluice

echo "## System: sluice bench chain (64 B UDP, ${secs} s each, median of 3)"
chain() { # length isolation [rate]
  local args=(bench chain --length "$1" --isolation "$2" --duration "$secs" --json)
  [ -n "${3:-}" ] && args+=(--rate "$3")
  for _ in 1 2 3; do "$bin" "${args[@]}"; done | python3 -c '
import json, sys
dec = json.JSONDecoder(); text = sys.stdin.read(); runs = []; i = 0
while i < len(text):
    text_i = text[i:].lstrip()
    if not text_i: break
    obj, n = dec.raw_decode(text_i); runs.append(obj); i = len(text) - len(text_i) + n
runs.sort(key=lambda r: r["mpps"]); m = runs[len(runs) // 2]
print(f"length {m[\"length\"]} {m[\"isolation\"]:<7} offered {str(m[\"offered_pps\"] or \"max\"):>8}: "
      f"{m[\"mpps\"]:.3f} Mpps (runs {\", \".join(f\"{r[\"mpps\"]:.2f}\" for r in runs)})  "
      f"p50 {m[\"latency_ns\"][\"p50\"]/1e3:.1f} us  p99 {m[\"latency_ns\"][\"p99\"]/1e3:.1f} us  "
      f"p99.9 {m[\"latency_ns\"][\"p999\"]/1e3:.1f} us  drops {m[\"drops_total\"]}  leaked {m[\"leaked_buffers\"]}  "
      f"NF ns/pkt {[round(x, 1) for x in m[\"nf_ns_per_packet\"]]}")
'
}
chain 1 inline
chain 3 inline
chain 1 process
chain 3 process
max=$("$bin" bench chain --length 3 --isolation process --duration "$secs" --json | python3 -c 'import json,sys; print(int(json.load(sys.stdin)["mpps"] * 1e6))')
chain 3 process $((max / 2))

echo
echo "## Micro-benchmarks (criterion)"
crit() { cargo bench -p "$1" --bench "$2" -- --warm-up-time 1 --measurement-time 2 2>/dev/null | grep -E "time:" -B1 | grep -vE "^--$" | paste - - | sed -E 's/ +/ /g'; }
crit sluice-mem ring || true
crit sluice-mem pool || true
crit sluice-packet parse
crit sluice-dataplane flow_table
crit sluice-ports generator
crit sluice-ports sink
