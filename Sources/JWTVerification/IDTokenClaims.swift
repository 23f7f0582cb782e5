import JSON

/// What a valid ID token says.
public struct IDTokenClaims: Sendable {
    /// `sub`: the user at the issuer (non-empty).
    public let subject: String
    /// `fhirUser` (SMART), when the token carries one: a FHIR resource URL for the user.
    public let fhirUser: String?
    /// Every claim of the payload, as sent.
    public let claims: JSONValue
}
