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
python3 - "$D/s.sock" "$REQUESTS" <<'PY'
import json, socket, statistics, sys, time
path, n = sys.argv[1], int(sys.argv[2])
s = socket.socket(socket.AF_UNIX)
s.connect(path)
def get(url):
    s.sendall(f"GET {url} HTTP/1.1\r\nhost: sluice\r\n\r\n".encode())
    buf = b""
    while b"\r\n\r\n" not in buf:
        buf += s.recv(65536)
    head, _, body = buf.partition(b"\r\n\r\n")
    length = next(int(l.split(b":")[1]) for l in head.split(b"\r\n")
                  if l.lower().startswith(b"content-length"))
    while len(body) < length:
        body += s.recv(65536)
    return body
took = []
for _ in range(n):
    t = time.perf_counter()
    get("/v1/stats")
    took.append((time.perf_counter() - t) * 1e6)
    time.sleep(0.005)
took.sort()
assert json.loads(get("/v1/stats"))["packets_out"] > 0, "no traffic"
print(f"stats_p50_us={statistics.median(took):.0f} stats_p99_us={took[int(n * 0.99)]:.0f}")
PY
