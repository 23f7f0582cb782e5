#!/usr/bin/env python3
"""N connections pipeline GET /healthz (ROUNDS x 2 000 each, 68 KB a round) with 4 KiB receive
buffers and never read: the server's resident memory per such connection.
Usage: smart-bff sandbox --port P &  then  Benchmarks/slow_readers.py P N PID_OF_SANDBOX
(ROUNDS=4 by default: more than 10 000 requests would reach the per-connection request limit.)"""
import socket, sys, time, os
port, n = int(sys.argv[1]), int(sys.argv[2])
pid = int(sys.argv[3])
def rss():
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS"): return int(line.split()[1])
base = rss()
ROUNDS = int(os.environ.get("ROUNDS", "4"))
req = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n" * 2000
socks = []
for i in range(n):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(("127.0.0.1", port))
    s.setblocking(False)
    socks.append(s)
for round in range(ROUNDS):
    for s in socks:
        try: s.send(req)
        except BlockingIOError: pass
    time.sleep(0.2)
time.sleep(2)
print(f"{n} slow readers: RSS {base} -> {rss()} KiB, {(rss()-base)/n:.0f} KiB each")
