"""Drives the demo page in headless Chromium (through chromedriver's WebDriver API) through
a standalone login and a simulated EHR launch, checking the patient banner and the
observations table, and keeps a screenshot in artifacts/. Skips with a message when
Chromium or chromedriver is not installed."""
import base64, json, os, pathlib, shutil, signal, socket, subprocess, sys, tempfile, time, urllib.request

root = pathlib.Path(__file__).resolve().parent.parent
chromium = shutil.which("chromium") or shutil.which("chromium-browser")
driver = shutil.which("chromedriver")
if not chromium or not driver:
    print("browser test SKIPPED: chromium and chromedriver are not installed (apt-get install chromium chromium-driver)")
    sys.exit(0)

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]

def call(method, url, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read() or b"{}")

def wait_port(port, timeout=30):
    end = time.time() + timeout
    while time.time() < end:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"port {port} did not open")

bff_port, ehr_port, driver_port = free_port(), free_port(), free_port()
binary = root / ".build/debug/smart-bff"
demo = subprocess.Popen([str(binary), "demo", "--port", str(bff_port), "--sandbox-port", str(ehr_port)],
                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
# Chromium's profile and scratch directories go into a directory of ours, removed at the end.
scratch = tempfile.mkdtemp(prefix="smart-bff-browser-")
chrome = subprocess.Popen([driver, f"--port={driver_port}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                          env={**os.environ, "TMPDIR": scratch})
session = None
try:
    wait_port(bff_port); wait_port(driver_port)
    base = f"http://127.0.0.1:{driver_port}"
    caps = {"capabilities": {"alwaysMatch": {"browserName": "chrome", "goog:chromeOptions": {
        "binary": chromium, "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1000,900"]}}}}
    session = call("POST", base + "/session", caps)["value"]["sessionId"]
    s = f"{base}/session/{session}"

    def find(css):
        value = call("POST", s + "/element", {"using": "css selector", "value": css})["value"]
        if "element-6066-11e4-a52e-4f735466cecf" not in value:
            raise LookupError(f"{css}: {str(value)[:200]}")
        return value["element-6066-11e4-a52e-4f735466cecf"]

    def text(css):
        return call("GET", f"{s}/element/{find(css)}/text")["value"]

    def wait_text(css, predicate, timeout=20):
        end = time.time() + timeout
        last = None
        while time.time() < end:
            try:
                last = text(css)
                if predicate(last):
                    return last
            except Exception as error:
                last = last or f"error: {error}"
            time.sleep(0.2)
        raise SystemExit(f"timed out waiting for {css}: last text {last!r}")

    app = f"http://127.0.0.1:{bff_port}/"
    call("POST", s + "/url", {"url": app})
    wait_text("#status", lambda t: "Not signed in" in t)
    call("POST", f"{s}/element/{find('#standalone')}/click", {})
    wait_text("#patients", lambda t: "Amy Shaw" in t)          # the sandbox's patient picker
    call("POST", f"{s}/element/{find('#patients a')}/click", {})
    banner = wait_text("#banner", lambda t: "Amy Shaw" in t)
    count = wait_text("#count", lambda t: t.endswith("observations"))
    assert count == "25 observations", count                   # every page followed through the BFF
    out = root / "artifacts"; out.mkdir(exist_ok=True)
    png = base64.b64decode(call("GET", s + "/screenshot")["value"])
    (out / "demo-standalone-login.png").write_bytes(png)
    # A second launch (simulated EHR launch, another patient) in the same browser.
    call("POST", f"{s}/element/{find('#ehr-launch')}/click", {})
    wait_text("#banner", lambda t: "Daniel Reyes" in t)
    (out / "demo-ehr-launch.png").write_bytes(base64.b64decode(call("GET", s + "/screenshot")["value"]))
    # An injected inline handler (what an XSS would add) does not run: the page's own inline
    # script and style are allowed by their hashes, not by 'unsafe-inline'.
    call("POST", s + "/execute/sync", {"args": [], "script":
         "document.body.insertAdjacentHTML('beforeend', '<img src=\"/nothing-here\" onerror=\"document.title=\\'injected\\'\">');"})
    time.sleep(1)
    title = call("GET", s + "/title")["value"]
    assert title != "injected", "an injected inline handler ran: the demo's CSP allows inline script"
    # A read that fails once signed in (an EHR outage: the BFF's 502 problem) is shown, not a
    # page left half drawn. The outage is simulated in the page's fetch, for /fhir/ alone, by a
    # script that runs before the page's own on the next load (Chromium's DevTools protocol).
    outage = call("POST", s + "/goog/cdp/execute", {"cmd": "Page.addScriptToEvaluateOnNewDocument", "params": {"source": """
        const real = window.fetch;
        window.fetch = (path, options) => String(path).startsWith("/fhir/")
          ? Promise.resolve(new Response(JSON.stringify({status: 502, title: "Bad Gateway", detail: "The EHR could not be reached."}),
                                         {status: 502, headers: {"Content-Type": "application/problem+json"}}))
          : real(path, options);"""}})["value"]
    call("POST", s + "/url", {"url": app})
    failure = wait_text("#status", lambda t: "502" in t)
    assert "The EHR could not be reached." in failure, failure
    call("POST", s + "/goog/cdp/execute", {"cmd": "Page.removeScriptToEvaluateOnNewDocument", "params": {"identifier": outage["identifier"]}})
    call("POST", s + "/url", {"url": app})
    wait_text("#banner", lambda t: "Daniel Reyes" in t)
    call("POST", f"{s}/element/{find('#logout')}/click", {})
    wait_text("#status", lambda t: "Not signed in" in t)
    print(f"browser test passed: {banner!r}, {count}; screenshots in artifacts/")
finally:
    if session:
        try: call("DELETE", f"http://127.0.0.1:{driver_port}/session/{session}")
        except Exception: pass
    chrome.terminate()
    try:
        chrome.wait(timeout=10)
    except subprocess.TimeoutExpired:
        chrome.kill()
    shutil.rmtree(scratch, ignore_errors=True)
    demo.send_signal(signal.SIGINT)
    try:
        demo.wait(timeout=20)
    except subprocess.TimeoutExpired:
        demo.kill()
