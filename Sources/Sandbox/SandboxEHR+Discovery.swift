import HTTPCore
import JSON
import JWTVerification

extension SandboxEHR {
    /// `GET /fhir/.well-known/smart-configuration` (SMART App Launch 2.x discovery).
    func smartConfiguration() -> JSONValue {
        var config: JSONValue = [
            "issuer": .string(issuer), "jwks_uri": .string(baseURL + "/jwks"),
            "authorization_endpoint": .string(baseURL + "/authorize"), "token_endpoint": .string(baseURL + "/token"),
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "token_endpoint_auth_methods_supported": ["none", "client_secret_basic", "private_key_jwt"],
            "token_endpoint_auth_signing_alg_values_supported": ["RS384", "ES384"],
            "scopes_supported": ["openid", "fhirUser", "launch", "launch/patient", "patient/*.rs", "patient/*.read", "user/*.rs", "offline_access", "online_access"],
            "response_types_supported": ["code"], "code_challenge_methods_supported": ["S256"],
            "capabilities": ["launch-ehr", "launch-standalone", "client-public", "client-confidential-symmetric",
                             "client-confidential-asymmetric", "context-ehr-patient", "context-ehr-encounter",
                             "context-standalone-patient", "permission-offline", "permission-patient", "permission-v1",
                             "permission-v2", "sso-openid-connect"],
        ]
        if options.idTokenIssuer != nil { config = config.removing("issuer") }
        if options.openIDConfigurationAtOAuthServerOnly { config = config.removing("issuer").removing("jwks_uri") }
        if options.revocation { config = config.setting("revocation_endpoint", .string(baseURL + "/revoke")) }
        if options.issParameter { config = config.setting("authorization_response_iss_parameter_supported", true) }
        for (name, value) in options.smartConfigurationMembers { config = config.setting(name, .string(value)) }
        return config
    }

    /// `GET /fhir/.well-known/openid-configuration` (OpenID Connect Discovery 1.0).
    func openIDConfiguration() -> JSONValue {
        ["issuer": .string(issuer), "jwks_uri": .string(baseURL + "/jwks"), "authorization_endpoint": .string(baseURL + "/authorize"),
         "token_endpoint": .string(baseURL + "/token"), "response_types_supported": ["code"],
         "subject_types_supported": ["public"], "id_token_signing_alg_values_supported": ["RS256"]]
    }

    /// `GET /fhir/metadata`: a CapabilityStatement with the SMART `oauth-uris` extension.
    func capabilityStatement() -> JSONValue {
        let oauth: JSONValue = [
            "url": "http://fhir-registry.smarthealthit.org/StructureDefinition/oauth-uris",
            "extension": [["url": "authorize", "valueUri": .string(baseURL + "/authorize")],
                          ["url": "token", "valueUri": .string(baseURL + "/token")],
                          ["url": "revoke", "valueUri": .string(baseURL + "/revoke")]],
        ]
        return ["resourceType": "CapabilityStatement", "status": "active", "kind": "instance", "fhirVersion": "4.0.1",
                "format": ["json"], "rest": [["mode": "server", "security": ["extension": [oauth]],
                                              "resource": .array(["Patient", "Observation", "Condition", "MedicationRequest", "Encounter", "Practitioner"].map {
                                                  ["type": .string($0), "interaction": [["code": "read"], ["code": "search-type"]]]
                                              })]]]
    }

    /// `GET /jwks`: the current and retired ID-token signing keys (RS256).
    func jwks() async -> JSONValue {
        let keys = await state.jwks()
        return ["keys": .array(keys.map { JWK.encode($0.1.publicKey, keyID: $0.0) })]
    }

    /// The `smart_style_url` document (SMART App Launch 2.x, "Styling").
    static let smartStyle: JSONValue = [
        "color_background": "#edeae3", "color_error": "#9e2d2d", "color_highlight": "#69b5ce", "color_modal_backdrop": "",
        "color_success": "#498e49", "color_text": "#303030", "dim_border_radius": "6px", "dim_font_size": "13px",
        "dim_spacing_size": "20px", "font_family_body": "system-ui, sans-serif", "font_family_heading": "system-ui, sans-serif",
    ]
}
