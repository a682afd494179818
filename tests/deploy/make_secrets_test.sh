#!/usr/bin/env bash
# Runs deploy/k8s/make-secrets.sh into a scratch directory and checks what it
# wrote: certificates that chain to its CA, the coordinator's DNS names and
# server usage, the workers' client usage, private keys not world-readable,
# a 256-bit hex admin token; a second run keeps the CA (leaf rotation).
set -euo pipefail
command -v openssl >/dev/null || { echo "SKIP openssl not found"; exit 77; }
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL $*"; exit 1; }

bash "$root/deploy/k8s/make-secrets.sh" --namespace team-a --days 30 \
  --out "$work/out" --ca-dir "$work/ca"
out=$work/out
openssl verify -CAfile "$out/ca.crt" "$out/coordinator.crt" "$out/worker.crt" \
  || fail "certificates do not chain to the CA"
sans=$(openssl x509 -in "$out/coordinator.crt" -noout -ext subjectAltName)
for name in zshard-coordinator zshard-coordinator.team-a.svc \
    zshard-coordinator.team-a.svc.cluster.local; do
  grep -q "DNS:$name\(,\|$\)" <<<"$sans" || fail "coordinator certificate lacks DNS:$name"
done
openssl x509 -in "$out/coordinator.crt" -noout -ext extendedKeyUsage \
  | grep -q "Server Authentication" || fail "coordinator certificate is not for servers"
openssl x509 -in "$out/worker.crt" -noout -ext extendedKeyUsage \
  | grep -q "Client Authentication" || fail "worker certificate is not for clients"
for key in coordinator.key worker.key; do
  [[ $(stat -c %a "$out/$key") == 600 ]] || fail "$key is readable by others"
  openssl pkey -in "$out/$key" -noout || fail "$key is not a private key"
done
grep -Eq '^[0-9a-f]{64}$' "$out/admin-token" || fail "admin token is not 64 hex digits"

ca_before=$(openssl x509 -in "$work/ca/ca.crt" -noout -fingerprint)
token_before=$(cat "$out/admin-token")
bash "$root/deploy/k8s/make-secrets.sh" --out "$out" --ca-dir "$work/ca" --keep-token
[[ $(openssl x509 -in "$work/ca/ca.crt" -noout -fingerprint) == "$ca_before" ]] \
  || fail "a second run replaced the CA"
[[ $(cat "$out/admin-token") == "$token_before" ]] || fail "--keep-token changed the token"
openssl verify -CAfile "$out/ca.crt" "$out/coordinator.crt" >/dev/null \
  || fail "re-issued certificate does not chain to the kept CA"
if bash "$root/deploy/k8s/make-secrets.sh" --namespace 'Not_A_Label' --out "$work/bad" \
    --ca-dir "$work/ca" 2>/dev/null; then
  fail "an invalid namespace was accepted"
fi
echo "make-secrets: ok"
