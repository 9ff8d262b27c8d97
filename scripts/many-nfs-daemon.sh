# Sourced by the measure-* scripts that ask a large platform: starts a
# daemon ($B) in a fresh directory $D with $NFS forwarders ($ISOLATION,
# default process), each in a chain of its own behind one generator, and
# stops it (and removes $D) when the calling script exits. Sets D and DP
# (the daemon's pid).
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
