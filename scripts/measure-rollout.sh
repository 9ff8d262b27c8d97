#!/bin/bash
# Rollout under load: time from request to the old version's retirement,
# and loss/reordering, 3 rollouts in a row on one daemon.
set -e
B=${SLUICE:-$(dirname "$0")/../target/release/sluice}
D=$(mktemp -d)
$B daemon --socket $D/s.sock --state-dir $D/state > $D/daemon.log 2>&1 &
DP=$!
trap "kill $DP 2>/dev/null; wait $DP 2>/dev/null" EXIT
for i in $(seq 50); do [ -S $D/s.sock ] && break; sleep 0.1; done
cat > $D/spec.yaml <<S
settings:
  flow_table: { idle_timeout_ms: 1000 }
ports:
  - { name: gen, kind: generator, flows: 1024, protocol: tcp, packets_per_flow: 1000, size: 64, rate_pps: 1000000 }
  - { name: out, kind: sink }
nfs:
  - { name: acl, type: acl, isolation: process, replicas: 2, config: { default: accept } }
  - { name: fwd, type: forwarder, isolation: process }
chains:
  - { name: main, from: gen, nfs: [acl, fwd], to: out }
S
$B --socket $D/s.sock apply -f $D/spec.yaml > /dev/null
sleep 2
for k in 1 2 3; do
  printf 'default: accept\nrules:\n  - { action: drop, proto: udp, dst_port: %d }\n' $k > $D/c$k.yaml
  t0=$(date +%s.%N)
  out=$($B --socket $D/s.sock rollout acl --config $D/c$k.yaml --wait)
  t1=$(date +%s.%N)
  held=$(echo "$out" | grep -o '([0-9]* flows)')
  echo "rollout $k: $(echo "$t1 - $t0" | bc) s to retire, held $held"
  sleep 1
done
$B --socket $D/s.sock stats -o json | python3 -c '
import json,sys; s=json.load(sys.stdin)
o=[p for p in s["ports"] if p["name"]=="out"][0]
print("packets_in",s["packets_in"],"out",s["packets_out"],"drops",s["drops_total"],"reordered",o.get("reordered"),"dups",o.get("duplicates"), "drops by", s.get("drops"))'
