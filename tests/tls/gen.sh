#!/bin/sh
# Test certificates for neve's TLS tests (never for production): two CAs, each with a server
# certificate for localhost and 127.0.0.1, and client certificates for mutual TLS, valid for 100
# years. Made once with OpenSSL 3 and
# committed, so tests need no tool to make them; run again to remake them.
set -eu
cd "$(dirname "$0")"
for n in 1 2; do
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 36500 \
    -subj "/CN=neve test CA $n" -keyout "ca$n.key" -out "ca$n.pem" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -subj "/CN=localhost" -keyout "server$n.key" -out "server$n.csr" 2>/dev/null
  printf '%s\n' "basicConstraints=critical,CA:FALSE" "keyUsage=critical,digitalSignature" \
    "extendedKeyUsage=serverAuth" "subjectAltName=DNS:localhost,IP:127.0.0.1" \
    "subjectKeyIdentifier=hash" "authorityKeyIdentifier=keyid" > ext.cnf
  openssl x509 -req -in "server$n.csr" -CA "ca$n.pem" -CAkey "ca$n.key" -CAcreateserial \
    -days 36500 -extfile ext.cnf -out "server$n.pem" 2>/dev/null
  rm -f "server$n.csr" "ca$n.key" "ca$n.srl" ext.cnf
done
# Mutual TLS: two client CAs, each with a client certificate (the tests rotate from one to the
# other).
for n in client other; do
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 36500 \
    -subj "/CN=neve test $n CA" -keyout "$n-ca.key" -out "$n-ca.pem" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -subj "/CN=neve test $n" -keyout "$n.key" -out "$n.csr" 2>/dev/null
  printf '%s\n' "basicConstraints=critical,CA:FALSE" "keyUsage=critical,digitalSignature" \
    "extendedKeyUsage=clientAuth" "subjectKeyIdentifier=hash" "authorityKeyIdentifier=keyid" > ext.cnf
  openssl x509 -req -in "$n.csr" -CA "$n-ca.pem" -CAkey "$n-ca.key" -CAcreateserial \
    -days 36500 -extfile ext.cnf -out "$n.pem" 2>/dev/null
  rm -f "$n.csr" "$n-ca.key" "$n-ca.srl" ext.cnf
done
