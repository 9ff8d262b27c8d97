#!/bin/bash
# What the API's views cost as the platform grows: a daemon with NFS
# inline forwarders, each in a chain of its own, answers 50 requests of
# each kind on one kept connection. Prints each request's p50 (µs, at the
# client). The forwarders are process NFs (the spec's default; a report
# reads their CPU time from /proc), or inline ones with ISOLATION=inline.
#   scripts/measure-views.sh [NFS]   (SLUICE=path/to/sluice, ISOLATION=process|inline)
set -e
B=${SLUICE:-$(dirname "$0")/../target/release/sluice}
NFS=${1:-1000}
ISOLATION=${ISOLATION:-process}
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
  for i in $(seq $NFS); do echo "  - { name: n$i, type: forwarder, isolation: $ISOLATION }"; done
  echo "chains:"
  for i in $(seq $NFS); do
    echo "  - { name: c$i, from: gen, match: { proto: tcp, dst_port: $i }, nfs: [n$i], to: out }"
  done
} > $D/spec.yaml
$B --socket $D/s.sock apply -f $D/spec.yaml > /dev/null
python3 "$(dirname "$0")/api_timing.py" "$D/s.sock" views "$NFS"
