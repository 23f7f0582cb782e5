#!/usr/bin/env python3
"""The varied half of Benchmarks/proxy-soak.sh: worker threads that cycle through every kind
of /fhir request a front end (or a broken one) sends, check each answer's status, and count.

Usage: soak_mix.py PORT COOKIE LAUNCH SECONDS [THREADS=4]
Prints one JSON object: requests by scenario, and every answer that was not the expected one.
"""
import http.client
import json
import socket
import sys
import threading
import time

PORT, COOKIE, LAUNCH, SECONDS = int(sys.argv[1]), sys.argv[2], sys.argv[3], float(sys.argv[4])
THREADS = int(sys.argv[5]) if len(sys.argv) > 5 else 4
SESSION = {"Cookie": COOKIE, "X-CSRF": "1", "X-BFF-Launch": LAUNCH}
BIG = 3_000_000        # streamed through whole
ABORTED = 16_000_000   # the client reads 64 KiB of it, then closes


def get(conn, path, headers, expect):
    conn.request("GET", path, headers=headers)
    response = conn.getresponse()
    body = response.read()
    return response.status == expect, body


def search(conn):
    ok, body = get(conn, "/fhir/Observation?patient=pat-1&_count=20", SESSION, 200)
    if not ok:
        return False
    links = [link["url"] for link in json.loads(body).get("link", []) if link.get("relation") == "next"]
    prefix = f"http://127.0.0.1:{PORT}/fhir/"
    if not links or not links[0].startswith(prefix):
        return False  # the paging link must lead back through smart-bff
    return get(conn, "/fhir/" + links[0][len(prefix):], SESSION, 200)[0]


def big(conn):
    ok, body = get(conn, f"/fhir/Binary/large?size={BIG}", SESSION, 200)
    return ok and len(body) == BIG


def raw(request, read_bytes):
    """Sends one request on a fresh socket, reads up to read_bytes (0: nothing), and leaves."""
    with socket.create_connection(("127.0.0.1", PORT)) as s:
        s.sendall(request)
        got = b""
        while len(got) < read_bytes:
            chunk = s.recv(65536)
            if not chunk:
                break
            got += chunk
        return got


def session_lines():
    return "".join(f"{k}: {v}\r\n" for k, v in SESSION.items())


def aborted(_conn):
    got = raw(f"GET /fhir/Binary/large?size={ABORTED} HTTP/1.1\r\nHost: x\r\n{session_lines()}\r\n".encode(), 65536)
    return got.startswith(b"HTTP/1.1 200 ")


def leaves(_conn):
    raw(f"GET /fhir/Patient/bench HTTP/1.1\r\nHost: x\r\n{session_lines()}\r\n".encode(), 0)
    return True


def post(conn):
    conn.request("POST", "/fhir/Patient", body=b"{}", headers={**SESSION, "Content-Type": "application/fhir+json"})
    response = conn.getresponse()
    response.read()
    return response.status == 405


SCENARIOS = {
    "search and next page": search,
    "3 MB streamed": big,
    "16 MB, client leaves after 64 KiB": aborted,
    "client leaves before the answer": leaves,
    "conditional read, 304": lambda c: get(c, "/fhir/Patient/pat-1", {**SESSION, "If-None-Match": 'W/"1"'}, 304)[0],
    "unknown resource, 404": lambda c: get(c, "/fhir/Patient/nope", SESSION, 404)[0],
    "encoded slash, 400": lambda c: get(c, "/fhir/Patient/..%2F..%2Fsecret", SESSION, 400)[0],
    "no session, 401": lambda c: get(c, "/fhir/Patient/pat-1", {}, 401)[0],
    "no X-CSRF, 403": lambda c: get(c, "/fhir/Patient/pat-1", {"Cookie": COOKIE, "X-BFF-Launch": LAUNCH}, 403)[0],
    "POST, 405": post,
}

counts = {name: 0 for name in SCENARIOS}
failures = {}
lock = threading.Lock()


def worker():
    conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=30)
    end = time.monotonic() + SECONDS
    while time.monotonic() < end:
        for name, scenario in SCENARIOS.items():
            try:
                ok = scenario(conn)
            except (OSError, http.client.HTTPException, ValueError) as error:
                ok = False
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=30)
                name = f"{name} ({type(error).__name__})"
            with lock:
                counts[name.split(" (")[0]] += 1
                if not ok:
                    failures[name] = failures.get(name, 0) + 1


threads = [threading.Thread(target=worker) for _ in range(THREADS)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(json.dumps({"requests": counts, "unexpected": failures}))
