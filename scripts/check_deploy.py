"""Static checks of deploy/: YAML parses, every BFF_* / DATABASE_URL variable named exists in
the configuration, probe paths and the compose/unit commands exist."""
import re, sys, pathlib, yaml

root = pathlib.Path(__file__).resolve().parent.parent
config_source = (root / "Sources/BFF/Configuration/BFFConfiguration+Environment.swift").read_text()
config_source += (root / "Sources/BFFServer/ServeCommand.swift").read_text()
config_source += (root / "Sources/PostgresStore/Migrator.swift").read_text()
config_source += (root / "Sources/BFFServer/Resources.swift").read_text()
known = set(re.findall(r'"((?:BFF_[A-Z_]+)|DATABASE_URL)"', config_source))
spec = yaml.safe_load((root / "openapi.yaml").read_text())
subcommands = {"serve", "migrate", "demo", "sandbox", "audit"}
problems = []

texts = {}
for path in (root / "deploy").rglob("*"):
    if path.is_file():
        texts[path] = path.read_text()
        if path.suffix in (".yaml", ".yml"):
            docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
            if not docs:
                problems.append(f"{path}: no YAML documents")
            for doc in docs:
                for probe in re.findall(r"'path': '([^']+)'", repr(doc)):
                    if probe not in spec["paths"]:
                        problems.append(f"{path}: probe path {probe} is not in openapi.yaml")
for path, text in texts.items():
    for name in set(re.findall(r"\b((?:BFF_[A-Z_]+)|DATABASE_URL)\b", text)):
        if name not in known:
            problems.append(f"{path}: {name} is not a configuration variable")
    for cmd in re.findall(r"smart-bff (serve|migrate|demo|sandbox|audit)\b", text):
        if cmd not in subcommands:
            problems.append(f"{path}: unknown subcommand {cmd}")
# The subcommands the image runs: compose services built from the Dockerfile, and the
# Kubernetes containers of the smart-bff image (other commands, postgres or a preStop
# sleep, are not smart-bff's).
compose = yaml.safe_load(texts[root / "deploy/compose.yaml"])
for name, service in compose.get("services", {}).items():
    if "build" in service and service.get("command", ["serve"])[0] not in subcommands:
        problems.append(f"deploy/compose.yaml: service {name} runs unknown subcommand {service['command'][0]}")
for doc in yaml.safe_load_all(texts[root / "deploy/kubernetes/smart-bff.yaml"]):
    template = (doc or {}).get("spec", {}).get("template", {}).get("spec", {})
    for c in template.get("containers", []):
        if "smart-bff" in c.get("image", "") and c.get("args", ["serve"])[0] not in subcommands:
            problems.append(f"kubernetes: container {c['name']} runs unknown subcommand {c['args'][0]}")

k8s = list(yaml.safe_load_all((root / "deploy/kubernetes/smart-bff.yaml").read_text()))
kinds = {d["kind"] for d in k8s if d}
for kind in ("Deployment", "Secret", "Job"):
    if kind not in kinds:
        problems.append(f"kubernetes manifests lack a {kind}")
# `kubectl apply -l smart-bff/stage=before-release` (the manifest's comment) must select what the Job needs, and the Job.
before = {d["kind"] for d in k8s if d and d["metadata"].get("labels", {}).get("smart-bff/stage") == "before-release"}
if before != {"Secret", "ConfigMap", "Job"}:
    problems.append(f"kubernetes: smart-bff/stage=before-release selects {sorted(before)}, not the Secret, the ConfigMap and the Job")
container = next(d for d in k8s if d and d["kind"] == "Deployment")["spec"]["template"]["spec"]["containers"][0]
if container["livenessProbe"]["httpGet"]["path"] != "/healthz" or container["readinessProbe"]["httpGet"]["path"] != "/readyz":
    problems.append("Deployment probes must be /healthz (liveness) and /readyz (readiness)")
if "BFF_TOKEN_KEY" not in yaml.safe_load_all((root / "deploy/kubernetes/smart-bff.yaml").read_text()).__next__()["stringData"]:
    problems.append("the Secret must hold BFF_TOKEN_KEY")

# The container image: its build stage must have every folder Package.swift names (the test
# targets' too, or `swift build` refuses), and its health check must run under a shell that
# has /dev/tcp (Debian's sh, dash, has not).
dockerfile = (root / "deploy/Dockerfile").read_text()
package = (root / "Package.swift").read_text()
for folder in ("Sources", "Tests"):
    if re.search(rf'\.{"testTarget" if folder == "Tests" else "target"}\(', package) and not re.search(rf"^COPY {folder}\b", dockerfile, re.M):
        problems.append(f"deploy/Dockerfile: the build stage does not copy {folder}/, which Package.swift's targets need")
for check in re.findall(r"HEALTHCHECK .*", dockerfile) + [str(d) for d in yaml.safe_load(texts[root / "deploy/compose.yaml"]).get("services", {}).values()]:
    if "/dev/tcp" in check and not re.search(r"\bbash\b", check):
        problems.append(f"a health check uses /dev/tcp without bash: {check[:80]}")
# A stop may take the shutdown deadline (BFFRuntime: audit entries written until then):
# systemd and Kubernetes must wait longer before they kill.
deadline = int(re.search(r"shutdownDeadline: Duration = \.seconds\((\d+)\)", (root / "Sources/BFF/BFFRuntime.swift").read_text()).group(1))
stop = int(re.search(r"^TimeoutStopSec=(\d+)", texts[root / "deploy/smart-bff.service"], re.M).group(1))
if stop <= deadline:
    problems.append(f"deploy/smart-bff.service: TimeoutStopSec={stop} does not exceed the {deadline} s shutdown deadline")
grace = next(d for d in k8s if d and d["kind"] == "Deployment")["spec"]["template"]["spec"].get("terminationGracePeriodSeconds", 30)
if grace <= deadline:
    problems.append(f"kubernetes: terminationGracePeriodSeconds {grace} does not exceed the {deadline} s shutdown deadline")
# Docker and compose kill 10 s after SIGTERM unless told otherwise.
compose_grace = compose["services"]["smart-bff"].get("stop_grace_period", "10s")
if int(re.fullmatch(r"(\d+)s", compose_grace).group(1)) <= deadline:
    problems.append(f"deploy/compose.yaml: smart-bff's stop_grace_period {compose_grace} does not exceed the {deadline} s shutdown deadline")
if container["readinessProbe"].get("timeoutSeconds", 1) < 2:
    problems.append("kubernetes: the readiness probe's timeout is under 2 s")
# `serve` listens only once migrations are applied: liveness must wait for a startup probe,
# or a long migration is killed and begun again, over and over.
if container.get("startupProbe", {}).get("httpGet", {}).get("path") != "/healthz":
    problems.append("kubernetes: the Deployment needs a startupProbe on /healthz (liveness would kill a pod migrating)")
pod = next(d for d in k8s if d and d["kind"] == "Deployment")["spec"]["template"]["spec"]
if pod.get("securityContext", {}).get("seccompProfile", {}).get("type") != "RuntimeDefault":
    problems.append("kubernetes: the pod needs seccompProfile RuntimeDefault (Pod Security 'restricted')")

if problems:
    sys.exit("\n".join(problems))
print(f"deploy/: {len(texts)} files checked, {len(known)} configuration variables known")
