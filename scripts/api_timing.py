#!/usr/bin/env python3
"""Times requests to a sluice daemon on one kept connection of its UNIX
socket (used by scripts/measure-stats.sh and scripts/measure-views.sh).

    api_timing.py SOCKET stats REQUESTS   # GET /v1/stats, 5 ms apart: p50, p99
    api_timing.py SOCKET views NFS        # one NF, port, chain; all NFs; stats: p50
"""
import json
import socket
import statistics
import sys
import time


class Daemon:
    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX)
        self.s.connect(path)

    def get(self, url):
        self.s.sendall(f"GET {url} HTTP/1.1\r\nhost: sluice\r\n\r\n".encode())
        buf = b""
        while b"\r\n\r\n" not in buf:
            buf += self.s.recv(1 << 20)
        head, _, body = buf.partition(b"\r\n\r\n")
        status = head.split(b" ")[1]
        if status != b"200":
            sys.exit(f"{url}: {head.decode(errors='replace')}")
        length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length"))
        while len(body) < length:
            body += self.s.recv(1 << 20)
        return body

    def timed(self, url, n, gap_s=0.0):
        took = []
        for _ in range(n):
            t = time.perf_counter()
            self.get(url)
            took.append((time.perf_counter() - t) * 1e6)
            time.sleep(gap_s)
        return sorted(took)


def main():
    path, mode, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    d = Daemon(path)
    if mode == "stats":
        took = d.timed("/v1/stats", n, 0.005)
        if json.loads(d.get("/v1/stats"))["packets_out"] == 0:
            sys.exit("no traffic")
        print(f"stats_p50_us={statistics.median(took):.0f} "
              f"stats_p99_us={took[int(n * 0.99)]:.0f}")
    elif mode == "views":
        mid = n // 2
        urls = [f"/v1/nfs/n{mid}", "/v1/ports/out", f"/v1/chains/c{mid}", "/v1/nfs",
                "/v1/stats"]
        print(" ".join(f"{u}={statistics.median(d.timed(u, 50)):.0f}" for u in urls))
    else:
        sys.exit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
