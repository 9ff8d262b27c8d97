#!/bin/bash
# Checkpoint and restore under load: an NF of each stateful type (as a
# process, and the monitor inline too) behind a generator of FLOWS
# connections at RATE packets/s (default 1 Mpps); 5 checkpoints and 5 restores each, timed at the
# CLI (request → file written / request → every instance restored), and
# the packets lost meanwhile (drops_total before and after).
#   scripts/measure-checkpoint.sh [FLOWS]   (SLUICE=path/to/sluice)
set -e
B=${SLUICE:-$(dirname "$0")/../target/release/sluice}
FLOWS=${1:-16384}
RATE=${RATE:-1000000}
D=$(mktemp -d)
$B daemon --socket $D/s.sock --state-dir $D/state > $D/daemon.log 2>&1 &
DP=$!
trap "kill $DP 2>/dev/null; wait $DP 2>/dev/null; rm -rf $D" EXIT
for i in $(seq 50); do [ -S $D/s.sock ] && break; sleep 0.1; done
S="$B --socket $D/s.sock"
run() { # NAME TYPE ISOLATION CONFIG
  cat > $D/spec.yaml <<SPEC
settings:
  flow_table: { idle_timeout_ms: 60000 }
ports:
  - { name: gen, kind: generator, flows: $FLOWS, protocol: tcp, packets_per_flow: 100000000, size: 64, rate_pps: $RATE }
  - { name: out, kind: sink }
nfs:
  - { name: $1, type: $2, isolation: $3, config: $4 }
chains:
  - { name: main, from: gen, nfs: [$1], to: out }
SPEC
  $S apply -f $D/spec.yaml > /dev/null
  sleep 2
  d0=$($S stats -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["drops_total"])')
  if ! $S checkpoint $1 -o $D/$1.ck > /dev/null; then
    echo "$2 ($3): not checkpointable"; return
  fi
  ck=(); rs=()
  for k in 1 2 3 4 5; do
    t0=$(date +%s%N); out=$($S checkpoint $1 -o $D/$1.ck); t1=$(date +%s%N)
    ck+=($(( (t1 - t0) / 1000 )))
    t0=$(date +%s%N); $S restore $1 $D/$1.ck > /dev/null; t1=$(date +%s%N)
    rs+=($(( (t1 - t0) / 1000 )))
  done
  d1=$($S stats -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["drops_total"])')
  med() { printf '%s\n' "$@" | sort -n | sed -n 3p; }
  echo "$2 ($3): $(echo "$out" | grep -o '[0-9]* bytes of state'), checkpoint p50 $(med "${ck[@]}") us, restore p50 $(med "${rs[@]}") us, drops during: $((d1 - d0))"
}
run mon monitor process "{}"
run mon monitor inline "{}"
for t in firewall nat load_balancer; do
  case $t in
    firewall) cfg="{ default: accept, tcp_loose: true }" ;;
    nat) cfg="{ inside: [10.0.0.0/16], pool: [192.0.2.0/30], capacity: 65536 }" ;;
    load_balancer) cfg="{ vip: 10.0.0.100, ports: [80], proto: any, mode: nat, backends: [{ name: a, addr: 10.0.1.1, port: 8080 }, { name: b, addr: 10.0.1.2, port: 8080 }] }" ;;
  esac
  run $t $t process "$cfg"
done
