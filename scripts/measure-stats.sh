#!/bin/bash
# What a live report costs while packets flow: a daemon with SINKS chains
# (generator → forwarder → sink, 50 kpps each) answers REQUESTS
# `GET /v1/stats`, 5 ms apart, on one kept connection. Prints the
# request's p50 and p99 (µs, at the client). A report is made on the
# worker's thread, between its packets: what it costs there is most of
# the request.
#   scripts/measure-stats.sh [SINKS] [REQUESTS]   (SLUICE=path/to/sluice)
set -e
B=${SLUICE:-$(dirname "$0")/../target/release/sluice}
SINKS=${1:-4}
REQUESTS=${2:-300}
D=$(mktemp -d)
$B daemon --socket $D/s.sock --state-dir $D/state > $D/daemon.log 2>&1 &
DP=$!
trap "kill $DP 2>/dev/null; wait $DP 2>/dev/null; rm -rf $D" EXIT
for i in $(seq 50); do [ -S $D/s.sock ] && break; sleep 0.1; done
{
  echo "ports:"
  for i in $(seq $SINKS); do
    echo "  - { name: g$i, kind: generator, flows: 256, protocol: udp, size: 64, rate_pps: 50000 }"
    echo "  - { name: s$i, kind: sink }"
  done
  echo "nfs:"
  for i in $(seq $SINKS); do echo "  - { name: f$i, type: forwarder }"; done
  echo "chains:"
  for i in $(seq $SINKS); do echo "  - { name: c$i, from: g$i, nfs: [f$i], to: s$i }"; done
} > $D/spec.yaml
$B --socket $D/s.sock apply -f $D/spec.yaml > /dev/null
sleep 1
python3 "$(dirname "$0")/api_timing.py" "$D/s.sock" stats "$REQUESTS"
