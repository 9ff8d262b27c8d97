"""Reads several `sluice bench chain --json` (or `bench nfs --json`)
objects from stdin and prints the median run (by Mpps) on one line, with
every run's rate."""
import json
import sys

dec = json.JSONDecoder()
text = sys.stdin.read()
runs, i = [], 0
while True:
    rest = text[i:].lstrip()
    if not rest:
        break
    obj, n = dec.raw_decode(rest)
    runs.append(obj)
    i = len(text) - len(rest) + n
runs.sort(key=lambda r: r["mpps"])
m = runs[len(runs) // 2]
lat = m["latency_ns"]
rates = ", ".join("%.2f" % r["mpps"] for r in runs)
common = "%.3f Mpps (runs %s)  p50 %.1f us  p99 %.1f us  p99.9 %.1f us  drops %d  leaked %d" % (
    m["mpps"], rates, lat["p50"] / 1e3, lat["p99"] / 1e3, lat["p999"] / 1e3, m["drops_total"],
    m["leaked_buffers"])
if "nfs" in m:  # bench nfs
    nf = ", ".join("%s %.1f" % (n["name"], n["ns_per_packet"]) for n in m["nfs"])
    print("realistic chain, %d flows, %s: %s  NF ns/pkt %s" % (m["flows"], m["isolation"], common, nf))
else:
    offered = m["offered_pps"] or "max"
    nf = [round(x, 1) for x in m["nf_ns_per_packet"]]
    print("length %d %-7s x%d workers offered %8s: %s  NF ns/pkt %s"
          % (m["length"], m["isolation"], m.get("workers", 1), offered, common, nf))
