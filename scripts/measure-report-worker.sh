#!/bin/bash
# What a report costs the worker (its packets wait meanwhile): a daemon
# with NFS process forwarders, each in a chain of its own, is asked
# GET /v1/stats REQ times while `perf` samples its worker thread; prints
# the worker's CPU time under `Worker::shard_result` per report.
#   scripts/measure-report-worker.sh [NFS] [REQ]   (SLUICE=path/to/sluice; needs perf, curl)
set -e
B=${SLUICE:-$(dirname "$0")/../target/release/sluice}
NFS=${1:-1000}
REQ=${2:-100}
F=999
D=$(mktemp -d)
$B daemon --socket $D/s.sock --state-dir $D/state --max-nfs $((NFS + 8)) \
  --max-chains $((NFS + 8)) > $D/daemon.log 2>&1 &
DP=$!
trap "kill $DP 2>/dev/null; wait $DP 2>/dev/null; rm -rf $D" EXIT
for i in $(seq 50); do [ -S $D/s.sock ] && break; sleep 0.1; done
{
  echo "ports:"
  echo "  - { name: gen, kind: generator, flows: 64, protocol: udp, size: 64, rate_pps: 100000 }"
  echo "  - { name: out, kind: sink }"
  echo "nfs:"
  for i in $(seq $NFS); do echo "  - { name: n$i, type: forwarder }"; done
  echo "chains:"
  for i in $(seq $NFS); do
    echo "  - { name: c$i, from: gen, match: { proto: tcp, dst_port: $i }, nfs: [n$i], to: out }"
  done
} > $D/spec.yaml
$B --socket $D/s.sock apply -f $D/spec.yaml > /dev/null
sleep 2
TID=$(ps -T -p $DP -o spid,comm | awk '/sluice-worker-0/ {print $1}')
perf record -q -F $F --call-graph dwarf,8192 -t "$TID" -o $D/perf.data -- bash -c \
  "for i in \$(seq $REQ); do curl -s --unix-socket $D/s.sock http://x/v1/stats > /dev/null; done" \
  > /dev/null 2>&1
TOTAL=$(perf report -i $D/perf.data --no-children -n --sort comm --stdio 2>/dev/null |
  awk '/^ +[0-9]/ {s += $2} END {print s}')
SHARE=$(perf report -i $D/perf.data --children --sort symbol --stdio 2>/dev/null |
  awk '/^ +[0-9].*Worker>::shard_result/ {sub("%", "", $1); print $1; exit}')
python3 -c "
t, s = $TOTAL, float('${SHARE:-0}')
print(f'worker samples {t}, {s}% in shard_result: {s / 100 * t / $F / $REQ * 1000:.3f} ms per report')"
