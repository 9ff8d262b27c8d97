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
. "$(dirname "$0")/many-nfs-daemon.sh"
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
