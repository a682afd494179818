// MakeTlsFiles: P-256 keys (fast to make), a self-signed CA, and two leaf
// certificates with the extensions gRPC's TLS stack checks (subjectAltName, key
// usages).

#include "tests/testing/tls_certs.h"

#include <fstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tests/testing/subprocess.h"

namespace zshard::testing {
namespace {

absl::Status RunOpenssl(const std::string& dir,
                        const std::vector<std::string>& args) {
  Subprocess::Options options;
  options.argv = {"/usr/bin/openssl"};
  options.argv.insert(options.argv.end(), args.begin(), args.end());
  options.stdout_path = dir + "/openssl.out";
  options.stderr_path = dir + "/openssl.log";
  auto child = Subprocess::Start(options);
  if (!child.ok()) return child.status();
  std::optional<int> rc = (*child)->Wait(30000);
  if (!rc.has_value() || *rc != 0) {
    return absl::InternalError(
        absl::StrCat("openssl ", absl::StrJoin(args, " "), " failed"));
  }
  return absl::OkStatus();
}

absl::Status WriteText(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  return out ? absl::OkStatus()
             : absl::InternalError(absl::StrCat("cannot write '", path, "'"));
}

// Key + CSR for `cn`, then a certificate signed by the CA with `ext`.
absl::Status MakeLeaf(const std::string& dir, const std::string& stem,
                      const std::string& cn, const std::string& ext) {
  const std::string base = dir + "/" + stem;
  absl::Status s = RunOpenssl(
      dir, {"req", "-new", "-newkey", "ec", "-pkeyopt",
            "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", base + ".key",
            "-out", base + ".csr", "-subj", "/CN=" + cn});
  if (!s.ok()) return s;
  s = WriteText(base + ".ext", ext);
  if (!s.ok()) return s;
  return RunOpenssl(
      dir, {"x509", "-req", "-in", base + ".csr", "-CA", dir + "/ca.crt",
            "-CAkey", dir + "/ca.key", "-CAcreateserial", "-days", "2",
            "-sha256", "-extfile", base + ".ext", "-out", base + ".crt"});
}

}  // namespace

absl::StatusOr<TlsFiles> MakeTlsFiles(const std::string& dir) {
  absl::Status s =
      RunOpenssl(dir, {"req", "-x509", "-newkey", "ec", "-pkeyopt",
                       "ec_paramgen_curve:prime256v1", "-nodes", "-keyout",
                       dir + "/ca.key", "-out", dir + "/ca.crt", "-days", "2",
                       "-subj", "/CN=zshard test ca", "-addext",
                       "basicConstraints=critical,CA:TRUE", "-addext",
                       "keyUsage=critical,keyCertSign,cRLSign"});
  if (!s.ok()) return s;
  // clientAuth too: etcd's JSON gateway dials etcd's own gRPC port with
  // the server certificate, and --client-cert-auth checks it as a client.
  s = MakeLeaf(dir, "server", "localhost",
               "basicConstraints=CA:FALSE\n"
               "keyUsage=digitalSignature,keyEncipherment\n"
               "extendedKeyUsage=serverAuth,clientAuth\n"
               "subjectAltName=DNS:localhost,IP:127.0.0.1\n");
  if (!s.ok()) return s;
  s = MakeLeaf(dir, "client", "zshard-client",
               "basicConstraints=CA:FALSE\n"
               "keyUsage=digitalSignature,keyEncipherment\n"
               "extendedKeyUsage=clientAuth\n");
  if (!s.ok()) return s;
  TlsFiles files;
  files.ca_cert = dir + "/ca.crt";
  files.server_cert = dir + "/server.crt";
  files.server_key = dir + "/server.key";
  files.client_cert = dir + "/client.crt";
  files.client_key = dir + "/client.key";
  return files;
}

}  // namespace zshard::testing
