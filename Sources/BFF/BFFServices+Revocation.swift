import SMART
import Sessions

extension BFFServices {
    /// Revokes the tokens of launches that have ended here (a logout, or another user's
    /// sign-in in the same browser) at their EHRs, where the EHR advertises a revocation
    /// endpoint (RFC 7009) on its token endpoint's origin. A failure is logged, not thrown: the launches are gone here either way.
    func revokeTokens(of ended: [(LaunchRecord, TokenSet)]) async {
        for (launch, tokens) in ended { await revoke(tokens, iss: launch.iss) }
    }

    /// The same for many launches (the sweeper's expired sessions), `width` at a time.
    func revokeTokens(of ended: [(LaunchRecord, TokenSet)], width: Int) async {
        await withTaskGroup(of: Void.self) { group in
            for (index, (launch, tokens)) in ended.enumerated() {
                if index >= width { await group.next() }
                group.addTask { await self.revoke(tokens, iss: launch.iss) }
            }
        }
    }

    /// Revokes `tokens`, of the EHR registered as `iss` (tokens no launch holds: a sign-in
    /// refused after its code was exchanged).
    func revoke(_ tokens: TokenSet, iss: String) async {
        guard let registration = registration(for: iss),
              let configuration = try? await metadata.configuration(for: iss),
              let endpoint = configuration.revocationEndpoint else { return }
        guard TokenClient.mayRevoke(at: endpoint, tokenEndpoint: configuration.tokenEndpoint) else {
            logger.warning("token revocation skipped", metadata: ["smart.iss": .string(iss), "error.detail": .string(TokenClient.revocationOffOrigin)])
            return
        }
        let pairs = [(tokens.refreshToken, "refresh_token"), (tokens.accessToken as String?, "access_token")]
        for case let (token?, hint) in pairs {
            do {
                try await tokenClient.revoke(token: token, hint: hint, clientID: registration.clientID,
                                             authentication: authentication(for: registration), revocationEndpoint: endpoint,
                                             tokenEndpoint: configuration.tokenEndpoint)
            } catch {
                logger.warning("token revocation failed", metadata: ["smart.iss": .string(iss), "error.detail": .string(error.detail)])
            }
        }
    }
}
