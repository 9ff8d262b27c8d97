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
. "$(dirname "$0")/many-nfs-daemon.sh"
python3 "$(dirname "$0")/api_timing.py" "$D/s.sock" views "$NFS"
