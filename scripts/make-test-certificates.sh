#!/usr/bin/env bash
# Makes the TLS certificates the tests use (Sources/BFFTesting/TestCertificates.swift) and
# prints that file. Test-only material: a throwaway CA and EC P-256 keys, valid 2020–2126 except
# the one made to be expired. Run it only to replace them:
#   scripts/make-test-certificates.sh > Sources/BFFTesting/TestCertificates.swift
set -euo pipefail
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir"
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }

# Every certificate goes through `openssl ca`, the one command that sets both dates: valid ones
# from 2020 (a clock a little behind still accepts them) to 2126.
mkdir -p db && : > db/index && echo 01 > db/serial
cat > ca.cnf <<CNF
[ca]
default_ca = test
[test]
database = db/index
serial = db/serial
new_certs_dir = db
default_md = sha256
policy = any
copy_extensions = none
unique_subject = no
[any]
commonName = supplied
CNF
# sign NAME CN EXTENSIONS STARTDATE ENDDATE [ISSUER]: NAME.key and NAME.pem, signed by
# ISSUER (ca) or, without one, by NAME's own key.
sign() {
  key "$1.key"
  openssl req -new -key "$1.key" -subj "/CN=$2" -out "$1.csr"
  printf '%b' "$3" > "$1.ext"
  if [ $# -ge 6 ]; then
    openssl ca -batch -config ca.cnf -cert "$6.pem" -keyfile "$6.key" -in "$1.csr" -extfile "$1.ext" \
      -startdate "$4" -enddate "$5" -notext -out "$1.pem" 2>/dev/null
  else
    openssl ca -batch -config ca.cnf -selfsign -keyfile "$1.key" -in "$1.csr" -extfile "$1.ext" \
      -startdate "$4" -enddate "$5" -notext -out "$1.pem" 2>/dev/null
  fi
}
valid=(20200101000000Z 21260101000000Z)
server() { echo "subjectAltName=$1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n"; }
sign ca "smart-bff test CA" "basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign\nsubjectKeyIdentifier=hash\n" "${valid[@]}"
sign localhost localhost "$(server DNS:localhost,IP:127.0.0.1)" "${valid[@]}" ca
sign othername ehr.example.org "$(server DNS:ehr.example.org)" "${valid[@]}" ca
sign expired localhost "$(server DNS:localhost,IP:127.0.0.1)" 20000101000000Z 20010101000000Z ca
sign selfsigned localhost "$(server DNS:localhost,IP:127.0.0.1)" "${valid[@]}"
sign subjectonly localhost "basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n" "${valid[@]}" ca

pem() { sed 's/^/        /' "$1"; }
cat <<SWIFT
// Made by scripts/make-test-certificates.sh; regenerate with it rather than editing.

/// TLS certificates and keys for tests (EC P-256): a throwaway CA and server certificates it
/// signed, for \`TLSTestServer\`. Test-only; the private keys protect nothing.
public enum TestCertificates {
    /// A certificate and its private key, PEM.
    public struct Identity: Sendable {
        public let certificatePEM: String
        public let privateKeyPEM: String
    }

    /// The CA that signed \`localhost\`, \`otherName\`, \`expired\` and \`subjectOnly\`.
    public static let caPEM = """
$(pem ca.pem)
        """

    /// For \`localhost\` and \`127.0.0.1\`, signed by the CA, valid 2020–2126.
    public static let localhost = Identity(certificatePEM: """
$(pem localhost.pem)
        """, privateKeyPEM: """
$(pem localhost.key)
        """)

    /// For \`ehr.example.org\` only, signed by the CA: right chain, wrong name for localhost.
    public static let otherName = Identity(certificatePEM: """
$(pem othername.pem)
        """, privateKeyPEM: """
$(pem othername.key)
        """)

    /// For \`localhost\`, signed by the CA, valid only in the year 2000.
    public static let expired = Identity(certificatePEM: """
$(pem expired.pem)
        """, privateKeyPEM: """
$(pem expired.key)
        """)

    /// For \`localhost\`, self-signed: no CA vouches for it.
    public static let selfSigned = Identity(certificatePEM: """
$(pem selfsigned.pem)
        """, privateKeyPEM: """
$(pem selfsigned.key)
        """)

    /// CN=localhost with no subjectAltName, signed by the CA: names are checked against SANs
    /// only (RFC 9525 §6), so it is for no host.
    public static let subjectOnly = Identity(certificatePEM: """
$(pem subjectonly.pem)
        """, privateKeyPEM: """
$(pem subjectonly.key)
        """)
}
SWIFT
