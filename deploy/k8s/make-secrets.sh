#!/usr/bin/env bash
# Replaces the placeholder secrets that the kustomizations read with real
# ones: a random admin token (base/secrets/admin-token) and, for
# components/tls, a CA, the coordinator's server certificate (for its
# Service's DNS names) and the workers' client certificate
# (components/tls/secrets/). The CA key stays outside the tree, in --ca-dir,
# so later runs can re-issue the leaf certificates under the same CA
# (rotation without a CA change). Never commit the files this writes.
#
#   deploy/k8s/make-secrets.sh [--namespace NS] [--days N] [--ca-dir DIR]
#                              [--out DIR] [--new-ca] [--keep-token]
#     --namespace  namespace the job runs in (default zshard), for the SANs
#     --days       leaf certificate lifetime (default 90)
#     --ca-dir     where ca.crt/ca.key live (default ~/.zshard-ca); a CA is
#                  created there if none exists
#     --out        write every file into DIR instead of the kustomize trees
#     --new-ca     create a new CA even if one exists (CA rotation)
#     --keep-token keep the current admin token
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
namespace=zshard
days=90
ca_dir=${HOME}/.zshard-ca
out=""
new_ca=0
keep_token=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --namespace) namespace=$2; shift 2 ;;
    --days) days=$2; shift 2 ;;
    --ca-dir) ca_dir=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --new-ca) new_ca=1; shift ;;
    --keep-token) keep_token=1; shift ;;
    *) echo "make-secrets.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
if [[ ! "$namespace" =~ ^[a-z0-9]([-a-z0-9]*[a-z0-9])?$ ]]; then
  echo "make-secrets.sh: namespace '$namespace' is not a DNS label" >&2
  exit 2
fi
command -v openssl >/dev/null || { echo "make-secrets.sh: openssl not found" >&2; exit 2; }

if [[ -n "$out" ]]; then
  token_dir=$out
  tls_dir=$out
else
  token_dir=$here/base/secrets
  tls_dir=$here/components/tls/secrets
fi
mkdir -p "$token_dir" "$tls_dir" "$ca_dir"
chmod 700 "$ca_dir"
umask 077
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if [[ $new_ca -eq 1 || ! -s "$ca_dir/ca.key" || ! -s "$ca_dir/ca.crt" ]]; then
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -days 3650 -subj "/CN=zshard-ca" \
    -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign" \
    -keyout "$ca_dir/ca.key" -out "$ca_dir/ca.crt" 2>/dev/null
  echo "make-secrets.sh: new CA in $ca_dir"
fi

# issue NAME CN EXTFILE: a P-256 key and a certificate signed by the CA.
issue() {
  local name=$1 cn=$2 ext=$3
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -subj "/CN=$cn" -keyout "$work/$name.key" -out "$work/$name.csr" 2>/dev/null
  openssl x509 -req -in "$work/$name.csr" -CA "$ca_dir/ca.crt" \
    -CAkey "$ca_dir/ca.key" -CAcreateserial -days "$days" \
    -extfile "$ext" -out "$work/$name.crt" 2>/dev/null
  install -m 0600 "$work/$name.key" "$tls_dir/$name.key"
  install -m 0644 "$work/$name.crt" "$tls_dir/$name.crt"
}

svc=zshard-coordinator
cat > "$work/coordinator.ext" <<EOF
basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=DNS:$svc,DNS:$svc.$namespace,DNS:$svc.$namespace.svc,DNS:$svc.$namespace.svc.cluster.local,DNS:localhost,IP:127.0.0.1
EOF
cat > "$work/worker.ext" <<EOF
basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=clientAuth
EOF
issue coordinator "$svc.$namespace.svc" "$work/coordinator.ext"
issue worker "zshard-worker.$namespace" "$work/worker.ext"
install -m 0644 "$ca_dir/ca.crt" "$tls_dir/ca.crt"

if [[ $keep_token -eq 0 || ! -s "$token_dir/admin-token" ]]; then
  openssl rand -hex 32 > "$token_dir/admin-token"
fi
echo "make-secrets.sh: wrote $token_dir/admin-token and $tls_dir/{ca,coordinator,worker}.* (namespace $namespace, $days days)"
