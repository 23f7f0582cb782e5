"""Opens N keep-alive connections, sends one request on each, keeps them idle until killed."""
import socket, sys, time
host, port, n, ready = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
conns = []
for _ in range(n):
    s = socket.create_connection((host, port))
    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: bench\r\n\r\n")
    s.recv(4096)
    conns.append(s)
open(ready, "w").write(str(len(conns)))
while True:
    time.sleep(1)
