# SPDX-License-Identifier: MIT
# Sourced by the TLS tests (not a test itself): certificates made here by
# openssl (skips the test when it is absent), in $C ($T_TMP/certs).
#
#   mkcert NAME CA EXTENSIONS
#       $C/NAME.pem and $C/NAME.key (P-256, mode 0600), signed by CA
#       ($C/CA.pem; "-": self-signed, a CA itself), with the x509v3
#       EXTENSIONS line ("subjectAltName=IP:127.0.0.1",
#       "extendedKeyUsage=clientAuth", "" for none).
command -v openssl >/dev/null || skip_all "needs openssl (scripts/install-deps)"
C=$T_TMP/certs
mkdir -p "$C"

mkcert() {
	local n=$1 ca=$2 ext=$3
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$C/$n.key" \
		-out "$C/$n.csr" -subj "/CN=$n" 2>/dev/null
	if [ "$ca" = - ]; then
		openssl x509 -req -in "$C/$n.csr" -signkey "$C/$n.key" -out "$C/$n.pem" -days 2 \
			-extfile <(printf 'basicConstraints=critical,CA:TRUE\nkeyUsage=keyCertSign\n') 2>/dev/null
	else
		openssl x509 -req -in "$C/$n.csr" -CA "$C/$ca.pem" -CAkey "$C/$ca.key" -CAcreateserial \
			-out "$C/$n.pem" -days 2 -extfile <(printf '%s\n' "$ext") 2>/dev/null
	fi
	chmod 600 "$C/$n.key"
}
