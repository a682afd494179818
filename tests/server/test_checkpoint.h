// Checkpoint fixtures for the coordinator's tests: a manifest for the test
// job's model and rank files sealed with the FNV-1a 64 trailer that
// checkpoint::VerifyFiles checks (their content is not a real rank file).
#pragma once

#include <cstdint>
#include <fstream>
#include <string>

#include "absl/strings/str_format.h"
#include "common/plan/plan_hash.h"
#include "zshard/v1/worker_service.pb.h"

namespace zshard::server::testing {

// Writes DIR/PATH: `body` then its FNV-1a 64 trailer, as a rank file
// ends; records the size and checksum in `f`.
inline void WriteSealedFile(const std::string& dir, v1::CheckpointFile* f,
                            const std::string& body = "rank file body") {
  plan::Fnv1a64 hash;
  hash.Bytes(body.data(), body.size());
  const uint64_t digest = hash.digest();
  std::ofstream out(dir + "/" + f->path(), std::ios::binary);
  out << body;
  out.write(reinterpret_cast<const char*>(&digest), sizeof(digest));
  f->set_bytes(static_cast<int64_t>(body.size() + sizeof(digest)));
  f->set_checksum(absl::StrFormat("%016x", digest));
}

// A manifest on disk for the test job's model ("a": 1000, "b": 2100), with
// its rank file.
inline v1::CheckpointManifest GoodManifest(const std::string& dir) {
  v1::CheckpointManifest m;
  m.set_job("demo");
  m.set_step(40);
  m.set_adam_step(40);
  m.set_dir(dir);
  m.set_world(1);
  m.set_instances(1);
  m.add_param_names("a");
  m.add_param_numels(1000);
  m.add_param_names("b");
  m.add_param_numels(2100);
  v1::CheckpointFile* f = m.add_files();
  f->set_path("rank-00000.zsc");
  v1::ParamRange* a = f->add_ranges();
  a->set_param_index(0);
  a->set_end(1000);
  v1::ParamRange* b = f->add_ranges();
  b->set_param_index(1);
  b->set_end(2100);
  WriteSealedFile(dir, f);
  return m;
}

}  // namespace zshard::server::testing
