// Test certificates made with openssl at test time: a CA, a server
// certificate for 127.0.0.1/localhost and a client certificate, both signed
// by the CA.
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace zshard::testing {

// PEM file paths written under a directory.
struct TlsFiles {
  std::string ca_cert;
  std::string server_cert;
  std::string server_key;
  std::string client_cert;
  std::string client_key;
};

// Generates the files in `dir` by running /usr/bin/openssl. Internal when
// openssl fails (its stderr is in dir/openssl.log).
absl::StatusOr<TlsFiles> MakeTlsFiles(const std::string& dir);

}  // namespace zshard::testing
