"""Validates openapi.yaml as OpenAPI 3.1 and checks it names every endpoint of the contract."""
import sys
import yaml
from openapi_spec_validator import validate

spec = yaml.safe_load(open("openapi.yaml"))
validate(spec)
required = ["/launch", "/login", "/callback", "/session", "/session/handoff", "/context", "/logout",
            "/fhir/{path}", "/.well-known/jwks.json", "/healthz", "/readyz", "/metrics", "/openapi.yaml"]
missing = [p for p in required if p not in spec["paths"]]
if missing:
    sys.exit(f"openapi.yaml lacks {missing}")
print(f"openapi.yaml: valid OpenAPI {spec['openapi']}, {len(spec['paths'])} paths")
