"""Checks the running demo from outside: signs in over plain HTTP (no browser), parses
/metrics with the Prometheus client's own parser, and runs schemathesis against
openapi.yaml with the real session: no server errors, no responses contradicting the spec."""
import http.cookiejar, os, pathlib, re, signal, socket, subprocess, sys, time, urllib.request
from urllib.parse import urljoin

root = pathlib.Path(__file__).resolve().parent.parent

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]

class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None

jar = http.cookiejar.CookieJar()
opener = urllib.request.build_opener(NoRedirect, urllib.request.HTTPCookieProcessor(jar))

def get(url, headers=None):
    try:
        r = opener.open(urllib.request.Request(url, headers=headers or {}), timeout=10)
        return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()

# A database that cannot be reached stops `serve` and `migrate` with one line naming
# DATABASE_URL and libpq's reason, not a bare "connection failed".
import base64, json, tempfile
with tempfile.TemporaryDirectory() as tmp:
    issuers = pathlib.Path(tmp) / "issuers.json"
    issuers.write_text(json.dumps([{"iss": "http://127.0.0.1:9/fhir", "client_id": "x"}]))
    unreachable = f"postgresql://bff:secret-pw@127.0.0.1:{free_port()}/bff"
    start_env = dict(os.environ, DATABASE_URL=unreachable, BFF_ISSUERS_FILE=str(issuers), BFF_LISTEN=f"127.0.0.1:{free_port()}",
                     BFF_TOKEN_KEY=base64.b64encode(os.urandom(32)).decode())
    for command in (["serve"], ["migrate"]):
        result = subprocess.run([str(root / ".build/debug/smart-bff")] + command, env=start_env, capture_output=True, text=True, timeout=60)
        line = result.stderr.strip().splitlines()[-1] if result.stderr.strip() else ""
        assert result.returncode == 1 and "DATABASE_URL: cannot connect to PostgreSQL" in line and "Connection refused" in line, (command, result.returncode, result.stderr)
        assert "secret-pw" not in result.stderr, "the password reached the output"
    print("start-up: an unreachable database is named as DATABASE_URL's problem, with libpq's reason")
    # demo: DATABASE_URL set means that database (the contract), so an unreachable one fails
    # the start, rather than a throwaway cluster starting.
    result = subprocess.run([str(root / ".build/debug/smart-bff"), "demo", "--port", str(free_port()), "--sandbox-port", str(free_port())],
                            env=dict(os.environ, DATABASE_URL=unreachable), capture_output=True, text=True, timeout=60)
    assert result.returncode == 1 and "using DATABASE_URL's database" in result.stderr and "DATABASE_URL: cannot connect" in result.stderr, result.stderr
    print("demo: DATABASE_URL, when set, is the database it uses")
    # A setting that names what cannot be used stops the start with exit 78 and one line
    # naming the variable, for the demo as for serve (the contract's rule).
    for command, extra in ((["serve"], {"BFF_OPENAPI_FILE": "/nonexistent/openapi.yaml"}),
                           (["serve"], {"BFF_MIGRATIONS_DIR": "/nonexistent"}), (["migrate"], {"BFF_MIGRATIONS_DIR": "/nonexistent"}),
                           (["demo", "--port", str(free_port()), "--sandbox-port", str(free_port())], {"BFF_OPENAPI_FILE": "/nonexistent/openapi.yaml"}),
                           (["demo", "--port", str(free_port()), "--sandbox-port", str(free_port())], {"BFF_LOG_LEVEL": "verbose"})):
        result = subprocess.run([str(root / ".build/debug/smart-bff")] + command, env=dict(start_env, **extra), capture_output=True, text=True, timeout=60)
        name = next(iter(extra))
        # serve's lines are JSON, as all its log lines; the other commands' plain text.
        named = f'"config.variable":"{name}"' if command == ["serve"] else f"\n{name}: "
        assert result.returncode == 78 and named in result.stderr, (command, extra, result.returncode, result.stderr)
    print("start-up: BFF_OPENAPI_FILE that cannot be read, BFF_MIGRATIONS_DIR without migrations, BFF_LOG_LEVEL unknown to the demo: exit 78, the variable named")
    # As a container's PID 1 (no default signal actions there), a SIGTERM during start-up
    # (the database not answering yet) ends the process at once.
    if os.geteuid() == 0:
        with socket.socket() as silent:
            silent.bind(("127.0.0.1", 0))
            silent.listen(8) # accepts into its backlog, never answers
            env = dict(start_env, DATABASE_URL=f"postgresql://bff@127.0.0.1:{silent.getsockname()[1]}/bff?connect_timeout=30")
            outer = subprocess.Popen(["unshare", "--pid", "--fork", str(root / ".build/debug/smart-bff"), "serve"], env=env,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(2)
            child = int(subprocess.run(["pgrep", "-P", str(outer.pid)], capture_output=True, text=True).stdout.split()[0])
            os.kill(child, signal.SIGTERM)
            assert outer.wait(timeout=5) == 128 + signal.SIGTERM, "SIGTERM during start-up was ignored as PID 1"
        print("start-up: as PID 1, SIGTERM while the database does not answer ends the process at once")
    # Ctrl-C early in the demo's start (its throwaway cluster being made) leaves no cluster
    # running and no folder behind, whenever it comes.
    import glob
    def demo_clusters():
        return glob.glob(os.path.join(tempfile.gettempdir(), "smart-bff-demo-pg*")) + glob.glob("/dev/shm/smart-bff-demo-pg*")
    before = set(demo_clusters())
    for delay in (0.3, 1.0):
        demo = subprocess.Popen([str(root / ".build/debug/smart-bff"), "demo", "--port", str(free_port()), "--sandbox-port", str(free_port())],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(delay)
        demo.send_signal(signal.SIGINT)
        assert demo.wait(timeout=60) in (0, 130), demo.returncode
        time.sleep(0.5)
        left = set(demo_clusters()) - before
        assert not left, f"Ctrl-C {delay} s into the demo left {left}"
    print("demo: Ctrl-C while it starts leaves no throwaway cluster behind")

# A port out of range is refused, not wrapped to 16 bits (70000 bound port 4464).
for command in (["sandbox", "--port", "70000"], ["demo", "--sandbox-port", "70000"], ["demo", "--port", "0"]):
    result = subprocess.run([str(root / ".build/debug/smart-bff")] + command, capture_output=True, text=True, timeout=30)
    assert result.returncode == 64 and "expected 1...65535" in result.stderr, (command, result.returncode, result.stderr)
print("ports out of range are refused")

# demo: SIGHUP (a closed terminal) stops it as SIGINT does, its throwaway PostgreSQL deleted.
def demo_clusters():
    return {p for p in pathlib.Path(tempfile.gettempdir()).glob("smart-bff-demo-pg*")}
demo_env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
def start_demo():
    """A demo on free ports, once it listens; and the throwaway clusters it made."""
    before = demo_clusters()
    port = free_port()
    demo = subprocess.Popen([str(root / ".build/debug/smart-bff"), "demo", "--port", str(port), "--sandbox-port", str(free_port())],
                            env=demo_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(300):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close(); break
        except OSError:
            time.sleep(0.1)
    return demo, demo_clusters() - before
hup, started = start_demo()
hup.send_signal(signal.SIGHUP)
assert hup.wait(timeout=30) == 0, "the demo did not stop cleanly on SIGHUP"
assert started and not (demo_clusters() & started), f"SIGHUP left the demo's PostgreSQL behind: {started}"
print("demo: SIGHUP stops it and deletes its PostgreSQL")

# demo: killed outright (SIGKILL: no handler of its own runs), its throwaway PostgreSQL is
# still stopped and deleted, by the watchdog each embedded cluster has.
killed, started = start_demo()
killed.kill()
killed.wait(timeout=10)
def left_running():
    return [f for f in started if subprocess.run(["pgrep", "-f", f"{f}/data"], capture_output=True).returncode == 0]
for _ in range(100):
    if not (demo_clusters() & started) and not left_running(): break
    time.sleep(0.1)
assert started and not (demo_clusters() & started) and not left_running(), \
    f"SIGKILL left the demo's PostgreSQL behind: {started}, running: {left_running()}"
print("demo: SIGKILL leaves no PostgreSQL behind (its watchdog stops and deletes it)")

bff_port, ehr_port = free_port(), free_port()
env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
demo = subprocess.Popen([str(root / ".build/debug/smart-bff"), "demo", "--port", str(bff_port), "--sandbox-port", str(ehr_port)],
                        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
base = f"http://127.0.0.1:{bff_port}"
try:
    for _ in range(300):
        try:
            socket.create_connection(("127.0.0.1", bff_port), timeout=0.5).close(); break
        except OSError:
            time.sleep(0.1)
    # Standalone login, by hand.
    status, headers, _ = get(base + "/login")
    assert status == 302, status
    status, _, page = get(headers["Location"])
    href = re.search(r'href="(/authorize/approve[^"]*)"', page.decode()).group(1).replace("&amp;", "&")
    status, headers, _ = get(f"http://127.0.0.1:{ehr_port}" + href)
    status, headers, _ = get(headers["Location"])
    assert status == 302 and "bff_launch=" in headers["Location"], (status, headers)
    launch = headers["Location"].split("bff_launch=")[1]
    cookie = "; ".join(f"{c.name}={c.value}" for c in jar)
    auth = {"Cookie": cookie, "X-CSRF": "1", "X-BFF-Launch": launch}
    assert get(base + "/session", auth)[0] == 200
    assert get(base + "/fhir/Observation?patient=pat-1", auth)[0] == 200

    # /metrics through the Prometheus text parser.
    from prometheus_client.parser import text_string_to_metric_families
    status, headers, body = get(base + "/metrics")
    families = {f.name: f for f in text_string_to_metric_families(body.decode())}
    for name in ("bff_http_requests", "bff_http_request_duration_seconds", "bff_upstream_duration_seconds",
                 "bff_token_refreshes", "bff_active_sessions", "bff_db_pool_connections", "bff_database_errors",
                 "bff_audit_pending_entries", "bff_audit_written_entries", "bff_audit_write_failures"):
        assert name in families, f"/metrics lacks {name}: {sorted(families)}"
    requests = {tuple(sorted(s.labels.items())): s.value for s in families["bff_http_requests"].samples}
    assert requests[(("route", "/fhir/*"), ("status", "200"))] >= 1, requests
    print(f"metrics: {len(families)} families parsed by prometheus_client")

    # schemathesis with the real session (logout excluded so the session lives to the end).
    command = [sys.executable, "-m", "schemathesis.cli", "run", str(root / "openapi.yaml"), "--url", base,
               "--checks", "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance",
               "--max-examples", os.environ.get("SCHEMATHESIS_EXAMPLES", "25"), "--exclude-path", "/logout",
               "-H", f"Cookie: {cookie}", "-H", "X-CSRF: 1", "-H", f"X-BFF-Launch: {launch}"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=900)
    tail = result.stdout.strip()
    print(tail)
    if result.returncode != 0:
        sys.exit("schemathesis found problems")
    print("schemathesis: no server errors, no responses contradicting openapi.yaml")
finally:
    demo.send_signal(signal.SIGINT)
    try:
        demo.wait(timeout=20)
    except subprocess.TimeoutExpired:
        demo.kill()
