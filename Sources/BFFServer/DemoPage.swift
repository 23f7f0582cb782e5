import Cryptography
import Foundation

/// The demo front end served at `/` by `smart-bff demo`: one static page, no build step.
/// It is the example front-end developers copy: it never sees a token, sends `X-CSRF: 1`
/// and `X-BFF-Launch` on every call, and follows FHIR paging through the BFF.
enum DemoPage {
    static func html(ehrLaunchURL: String) -> String {
        template.replacingOccurrences(of: "{{EHR_LAUNCH_URL}}", with: ehrLaunchURL)
    }

    /// The Content-Security-Policy of `page` (what `html` made): its one inline script and one
    /// inline style are allowed by their SHA-256 hashes (no `'unsafe-inline'`: a script
    /// injected into the page would not run), it loads nothing from elsewhere, and no other
    /// site may frame it.
    static func contentSecurityPolicy(of page: String) -> String {
        "default-src 'self'; script-src \(hashSource(of: "script", in: page)); style-src \(hashSource(of: "style", in: page)); "
            + "frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
    }

    /// `'sha256-…'` of the text inside `page`'s `<element>` (a CSP Level 2 hash source).
    private static func hashSource(of element: String, in page: String) -> String {
        guard let open = page.range(of: "<\(element)>"), let close = page.range(of: "</\(element)>", range: open.upperBound..<page.endIndex) else {
            preconditionFailure("the demo page has no <\(element)>")
        }
        return "'sha256-" + Data(SHA256.hash(String(page[open.upperBound..<close.lowerBound]))).base64EncodedString() + "'"
    }

    static let template = #"""
<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>smart-bff demo</title>
<style>
  body { font: 16px/1.5 system-ui, sans-serif; margin: 2rem auto; max-width: 52rem; padding: 0 1rem; color: #1b1f24; }
  header { display: flex; gap: .75rem; align-items: center; flex-wrap: wrap; }
  button, a.button { font: inherit; padding: .45rem .9rem; border-radius: .4rem; border: 1px solid #3b5bdb; background: #3b5bdb; color: #fff; cursor: pointer; text-decoration: none; }
  button.secondary { background: #fff; color: #3b5bdb; }
  #banner { border: 1px solid #ced4da; border-radius: .5rem; padding: .75rem 1rem; margin: 1rem 0; background: #f8f9fa; }
  table { border-collapse: collapse; width: 100%; }
  th, td { text-align: left; padding: .3rem .5rem; border-bottom: 1px solid #e9ecef; }
  .muted { color: #6c757d; }
</style>
</head>
<body>
<h1>smart-bff demo</h1>
<header>
  <button id="standalone">Standalone launch</button>
  <a class="button" id="ehr-launch" href="{{EHR_LAUNCH_URL}}">Simulated EHR launch</a>
  <button id="logout" class="secondary" hidden>Log out</button>
</header>
<p id="status" class="muted">Not signed in.</p>
<section id="app" hidden>
  <div id="banner"></div>
  <p id="user" class="muted"></p>
  <h2>Observations</h2>
  <table><thead><tr><th>Date</th><th>Observation</th><th>Value</th></tr></thead><tbody id="observations"></tbody></table>
  <p id="count" class="muted"></p>
</section>
<script>
// The launch this tab acts for: the callback adds ?bff_launch=…; keep it per tab.
const params = new URLSearchParams(location.search);
if (params.get("bff_launch")) {
  sessionStorage.setItem("bff_launch", params.get("bff_launch"));
  history.replaceState(null, "", location.pathname);
}
const launch = sessionStorage.getItem("bff_launch");

// Every call to the BFF: the cookie goes by itself; X-CSRF and X-BFF-Launch are ours to send.
async function bff(path, options = {}) {
  const headers = { "X-CSRF": "1", ...(options.headers || {}) };
  if (launch) headers["X-BFF-Launch"] = launch;
  const response = await fetch(path, { ...options, headers, credentials: "same-origin" });
  if (response.status === 401) throw new Error("signed-out");
  if (!response.ok) {
    // Errors are problem details (RFC 9457): their detail says what went wrong.
    const problem = await response.json().catch(() => null);
    throw new Error(`${path}: HTTP ${response.status}${problem && problem.detail ? ` (${problem.detail})` : ""}`);
  }
  return response.status === 204 ? null : response.json();
}

const text = (id, value) => { document.getElementById(id).textContent = value; };

async function show() {
  const session = await bff("/session");
  const context = await bff("/context");
  document.getElementById("app").hidden = false;
  document.getElementById("logout").hidden = false;
  text("status", "Signed in.");
  text("user", `Signed in as ${session.fhirUser || session.sub} · scopes: ${session.scope}`);
  if (context.patient) {
    const patient = await bff(`/fhir/Patient/${encodeURIComponent(context.patient)}`);
    const name = (patient.name && patient.name[0]) || {};
    text("banner", `${(name.given || []).join(" ")} ${name.family || ""} · born ${patient.birthDate || "?"} · ${patient.gender || ""}`);
    document.getElementById("banner").dataset.patient = context.patient;
    await loadObservations(context.patient);
  } else {
    text("banner", "No patient in context.");
  }
}

async function loadObservations(patient) {
  const rows = document.getElementById("observations");
  rows.textContent = "";
  let url = `/fhir/Observation?patient=${encodeURIComponent(patient)}&_count=10`;
  let count = 0;
  while (url) {
    const bundle = await bff(url);
    for (const entry of bundle.entry || []) {
      const o = entry.resource, q = o.valueQuantity || {};
      const tr = document.createElement("tr");
      for (const value of [(o.effectiveDateTime || "").slice(0, 10), (o.code && o.code.text) || "", `${q.value ?? ""} ${q.unit ?? ""}`]) {
        const td = document.createElement("td");
        td.textContent = value;
        tr.appendChild(td);
      }
      rows.appendChild(tr);
      count++;
    }
    // Paging links point at the BFF (it rewrote them), so they work as they are.
    const next = (bundle.link || []).find(l => l.relation === "next");
    url = next ? new URL(next.url).pathname + new URL(next.url).search : null;
  }
  text("count", `${count} observations`);
}

document.getElementById("standalone").onclick = () => { location.href = "/login?return_to=/"; };
// Ends this tab's launch only (X-BFF-Launch, as on every call): another tab's stays. The
// tab keeps the ended launch's id, so that it shows itself signed out rather than fall back
// to the browser's other launch.
document.getElementById("logout").onclick = async () => {
  await bff("/logout", { method: "POST" }).catch(() => {}); // 204, or the launch had already ended
  location.href = "/";
};
// Whatever fails (not signed in, the EHR down, a read outside the scopes) shows in the status line.
show().catch(error => text("status", error.message === "signed-out" ? "Not signed in." : error.message));
</script>
</body>
</html>
"""#
}
