#!/usr/bin/env python3
"""Runs frames through Linux nftables and prints what happened to each.

usage: nft_diff.py FRAMES.pcap RULESET.nft SUFFIX

Builds three network namespaces joined by veth pairs,

    fwa-SUFFIX (a0) <-> (f0 10.1.0.1) fwf-SUFFIX (f1 10.2.0.1) <-> (b0) fwb-SUFFIX

loads RULESET.nft (a forward-hook filter) into the middle one, which routes
between 10.1.0.0/24 and 10.2.0.0/24 and between fd01::/64 and fd02::/64,
with static neighbours for 10.1.0.2 / fd01::2 (a0) and 10.2.0.2 / fd02::2
(b0), and reassembly timeouts of 1 s (net.ipv4.ipfrag_time,
net.netfilter.nf_conntrack_frag6_timeout); every other sysctl keeps its
default (nf_conntrack_checksum 1, nf_conntrack_tcp_be_liberal 0,
nf_conntrack_tcp_loose 1). a0 and b0 have no IP address, so nothing
answers there: every frame is injected with AF_PACKET on the side its
source address is on, after the delay its pcap timestamp holds, and the
script watches both sides for up to 60 ms. A forwarded frame is
recognised by its IPv4 identification or IPv6 flow label and addresses
(fragments of a datagram share them, so the frame completing a datagram
"passes" when any of its fragments comes out). It prints one JSON list:
per frame "pass" (it came out on the other side), "reject" (a TCP RST or
ICMP destination unreachable came back to its sender) or "drop".
Namespaces are removed on exit, also on failure.
"""
import ctypes
import json
import os
import select
import socket
import struct
import subprocess
import sys
import time

ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4
CLONE_NEWNET = 0x40000000
libc = ctypes.CDLL("libc.so.6", use_errno=True)


def sh(*args):
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL)


def setns(name):
    fd = os.open(f"/var/run/netns/{name}", os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), "setns")
    finally:
        os.close(fd)


def mac(ns, dev):
    out = subprocess.run(["ip", "-n", ns, "-j", "link", "show", dev], check=True, capture_output=True).stdout
    return json.loads(out)[0]["address"]


def read_pcap(path):
    b = open(path, "rb").read()
    off, frames = 24, []
    while off + 16 <= len(b):
        sec, usec, incl = struct.unpack_from("<III", b, off)
        frames.append((sec + usec / 1e6, b[off + 16 : off + 16 + incl]))
        off += 16 + incl
    return frames


def mac_bytes(m):
    return bytes(int(x, 16) for x in m.split(":"))


def main():
    frames_path, ruleset, suffix = sys.argv[1:4]
    A, F, B = f"fwa-{suffix}", f"fwf-{suffix}", f"fwb-{suffix}"
    frames = read_pcap(frames_path)
    home = os.open("/proc/self/ns/net", os.O_RDONLY)
    try:
        for ns in (A, F, B):
            sh("ip", "netns", "add", ns)
            if ns != F:
                for k in ("all", "default"):
                    sh("ip", "netns", "exec", ns, "sysctl", "-qw", f"net.ipv6.conf.{k}.disable_ipv6=1")
        sh("ip", "link", "add", "a0", "netns", A, "type", "veth", "peer", "name", "f0", "netns", F)
        sh("ip", "link", "add", "b0", "netns", B, "type", "veth", "peer", "name", "f1", "netns", F)
        sh("ip", "-n", F, "addr", "add", "10.1.0.1/24", "dev", "f0")
        sh("ip", "-n", F, "addr", "add", "10.2.0.1/24", "dev", "f1")
        sh("ip", "-n", F, "addr", "add", "fd01::1/64", "dev", "f0", "nodad")
        sh("ip", "-n", F, "addr", "add", "fd02::1/64", "dev", "f1", "nodad")
        for ns, dev in ((A, "a0"), (F, "f0"), (F, "f1"), (B, "b0"), (A, "lo"), (F, "lo"), (B, "lo")):
            sh("ip", "-n", ns, "link", "set", dev, "up")
        sh("ip", "netns", "exec", F, "sysctl", "-qw", "net.ipv4.ip_forward=1")
        sh("ip", "netns", "exec", F, "sysctl", "-qw", "net.ipv6.conf.all.forwarding=1")
        sh("ip", "netns", "exec", F, "sysctl", "-qw", "net.ipv4.ipfrag_time=1")
        a_mac, b_mac = mac(A, "a0"), mac(B, "b0")
        f0_mac, f1_mac = mac(F, "f0"), mac(F, "f1")
        sh("ip", "-n", F, "neigh", "add", "10.1.0.2", "lladdr", a_mac, "dev", "f0", "nud", "permanent")
        sh("ip", "-n", F, "neigh", "add", "10.2.0.2", "lladdr", b_mac, "dev", "f1", "nud", "permanent")
        sh("ip", "-n", F, "neigh", "add", "fd01::2", "lladdr", a_mac, "dev", "f0", "nud", "permanent")
        sh("ip", "-n", F, "neigh", "add", "fd02::2", "lladdr", b_mac, "dev", "f1", "nud", "permanent")
        sh("ip", "netns", "exec", F, "nft", "-f", ruleset)
        # The conntrack sysctls exist once the ruleset has loaded conntrack.
        sh("ip", "netns", "exec", F, "sysctl", "-qw", "net.netfilter.nf_conntrack_frag6_timeout=1")

        socks = {}
        for side, ns, dev in (("a", A, "a0"), ("b", B, "b0")):
            setns(ns)
            s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
            s.bind((dev, 0))
            s.setblocking(False)
            socks[side] = s
        if libc.setns(home, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), "setns back")
        time.sleep(0.2)
        for s in socks.values():  # drain anything from link setup
            while select.select([s], [], [], 0)[0]:
                s.recv(65535)

        results = []
        for delay, f in frames:
            if delay:
                time.sleep(delay)
            v6 = f[12:14] == b"\x86\xdd"
            if v6:
                src, side = f[22:38], "a" if f[22:24] == b"\xfd\x01" else "b"
            else:
                src, side = f[26:30], "a" if f[26:28] == bytes([10, 1]) else "b"
            other = "b" if side == "a" else "a"
            eth = (mac_bytes(f0_mac) + mac_bytes(a_mac)) if side == "a" else (mac_bytes(f1_mac) + mac_bytes(b_mac))
            socks[side].send(eth + f[12:])
            verdict = "drop"
            deadline = time.monotonic() + 0.06
            while verdict == "drop" and time.monotonic() < deadline:
                ready = select.select(list(socks.values()), [], [], max(0, deadline - time.monotonic()))[0]
                for s in ready:
                    data, addr = s.recvfrom(65535)
                    if addr[2] == PACKET_OUTGOING:
                        continue
                    if v6 and data[12:14] == b"\x86\xdd":
                        same = (data[15] & 15, data[16:18]) == (f[15] & 15, f[16:18])
                        if s is socks[other] and same and data[22:54] == f[22:54]:
                            verdict = "pass"
                        elif s is socks[side] and data[38:54] == src and data[20] == 58 and data[54] == 1:
                            verdict = "reject"
                    elif not v6 and data[12:14] == b"\x08\x00":
                        proto = data[23]
                        if s is socks[other] and data[18:20] == f[18:20] and data[26:34] == f[26:34]:
                            verdict = "pass"
                        elif s is socks[side] and data[30:34] == src:
                            l4 = 14 + (data[14] & 15) * 4
                            if (proto == 6 and data[l4 + 13] & 4) or (proto == 1 and data[l4] == 3):
                                verdict = "reject"
            results.append(verdict)
        print(json.dumps(results))
    finally:
        os.close(home)
        for ns in (A, F, B):
            subprocess.run(["ip", "netns", "del", ns], stderr=subprocess.DEVNULL)


if __name__ == "__main__":
    main()
