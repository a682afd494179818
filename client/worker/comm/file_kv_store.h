// A KvStore in a directory shared by processes on one host: the rendezvous
// of ranks that run as separate processes without a coordinator (the
// collectives benchmark's --processes mode, local tools).
#pragma once

#include <string>
#include <vector>

#include "client/worker/comm/kv_store.h"

namespace zshard::comm {

// Each key is one file under `dir`, written atomically (temporary file and
// rename), so a reader sees either no value or a whole one. Get and Wait
// poll the directory with a short back-off until their deadline. The
// directory must exist and outlive the store; nothing is removed. Keys may
// hold any bytes (they are hex-encoded into file names). Thread-safe.
class FileKvStore final : public KvStore {
 public:
  explicit FileKvStore(std::string dir);

  absl::Status Set(absl::string_view key, absl::string_view value) override;
  absl::StatusOr<std::string> Get(absl::string_view key,
                                  int64_t timeout_ms) override;
  absl::Status Wait(const std::vector<std::string>& keys,
                    int64_t timeout_ms) override;

 private:
  // The file holding `key`.
  std::string PathOf(absl::string_view key) const;

  const std::string dir_;
};

}  // namespace zshard::comm
