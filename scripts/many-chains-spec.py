#!/usr/bin/env python3
"""Prints a spec of N forwarders, each in a chain of its own on one
generator port (UDP flows over dst_ports 1..M, M = N unless given, chain
i matching port i; flows to ports above N match no chain; F flows, 4,096
unless given): what the worker does per chain at scale.
  scripts/many-chains-spec.py [N] [inline|process] [M] [F] > spec.yaml
  sluice run spec.yaml --duration 3 --json"""
import sys

n = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
isolation = sys.argv[2] if len(sys.argv) > 2 else "inline"
m = int(sys.argv[3]) if len(sys.argv) > 3 else n
flows = int(sys.argv[4]) if len(sys.argv) > 4 else 4096
print("ports:")
print(f"  - {{ name: gen, kind: generator, flows: {flows}, protocol: udp, size: 64, dst_ports: 1-{m} }}")
print("  - { name: out, kind: sink }")
print("nfs:")
for i in range(1, n + 1):
    print(f"  - {{ name: n{i}, type: forwarder, isolation: {isolation} }}")
print("chains:")
for i in range(1, n + 1):
    print(f"  - {{ name: c{i}, from: gen, match: {{ proto: udp, dst_port: {i} }}, nfs: [n{i}], to: out }}")
