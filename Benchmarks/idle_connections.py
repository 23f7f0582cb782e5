"""Opens N keep-alive connections, sends one GET of PATH (default /healthz) on each and reads
its whole answer, then keeps them idle until killed. Writes N to READY once all are open.
usage: idle_connections.py HOST PORT N READY [PATH]"""
import socket, sys, time
host, port, n, ready = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
path = sys.argv[5] if len(sys.argv) > 5 else "/healthz"

def read_answer(s):
    data = b""
    while b"\r\n\r\n" not in data:
        data += s.recv(65536)
    head, body = data.split(b"\r\n\r\n", 1)
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(body) < length:
        body += s.recv(65536)

conns = []
for _ in range(n):
    s = socket.create_connection((host, port))
    s.sendall(b"GET " + path.encode() + b" HTTP/1.1\r\nHost: bench\r\n\r\n")
    read_answer(s)
    conns.append(s)
open(ready, "w").write(str(len(conns)))
while True:
    time.sleep(1)
