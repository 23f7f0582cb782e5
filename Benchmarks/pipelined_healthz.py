"""Many GET /healthz pipelined on one connection in one write (the sandbox serves them on
the same HTTP server as smart-bff): the time until every answer is read, median of 7.
Usage: smart-bff sandbox --port P & python3 Benchmarks/pipelined_healthz.py P [requests=3000]"""
import socket, sys, threading, time
port = int(sys.argv[1]); n = int(sys.argv[2]) if len(sys.argv) > 2 else 3000
req = b"GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n"
def run():
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)
    data = req * n
    t0 = time.perf_counter()
    threading.Thread(target=lambda: s.sendall(data), daemon=True).start()
    got, buf = 0, b""
    while got < n:
        chunk = s.recv(1 << 20)
        if not chunk: break
        buf += chunk
        got = buf.count(b"HTTP/1.1 200")
    dt = time.perf_counter() - t0
    s.close()
    return dt, got
times = []
for _ in range(7):
    dt, got = run()
    times.append(dt)
times.sort()
print(f"{n} pipelined /healthz on one connection: median {times[3]*1000:.1f} ms ({got} answers)")
