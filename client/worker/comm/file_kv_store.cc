// The directory-backed KvStore.
#include "client/worker/comm/file_kv_store.h"

#include <algorithm>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/file_io.h"

namespace zshard::comm {
namespace {

// Polls `present` until it returns true (OK) or `timeout_ms` passes. The
// interval starts at 0.2 ms and doubles to 10 ms: rendezvous keys usually
// appear within milliseconds, and a file has no change notification that
// works everywhere.
template <typename Fn>
bool PollUntil(Fn present, int64_t timeout_ms) {
  const absl::Time deadline = absl::Now() + absl::Milliseconds(timeout_ms);
  absl::Duration interval = absl::Microseconds(200);
  while (!present()) {
    const absl::Time now = absl::Now();
    if (now >= deadline) return false;
    absl::SleepFor(std::min(interval, deadline - now));
    interval = std::min(interval * 2, absl::Milliseconds(10));
  }
  return true;
}

}  // namespace

FileKvStore::FileKvStore(std::string dir) : dir_(std::move(dir)) {}

std::string FileKvStore::PathOf(absl::string_view key) const {
  return absl::StrCat(dir_, "/kv_", absl::BytesToHexString(key));
}

absl::Status FileKvStore::Set(absl::string_view key, absl::string_view value) {
  return WriteFileAtomic(PathOf(key), value);
}

absl::StatusOr<std::string> FileKvStore::Get(absl::string_view key,
                                             int64_t timeout_ms) {
  const std::string path = PathOf(key);
  absl::StatusOr<std::string> value;
  absl::Status error;
  const bool found = PollUntil(
      [&] {
        value = ReadFile(path);
        if (value.ok()) return true;
        if (value.status().code() != absl::StatusCode::kNotFound) {
          error = value.status();
          return true;
        }
        return false;
      },
      timeout_ms);
  if (!error.ok()) {
    return absl::UnavailableError(absl::StrCat(
        "file store key '", key, "' unreadable: ", error.message()));
  }
  if (!found) {
    return absl::DeadlineExceededError(absl::StrCat(
        "key '", key, "' did not appear within ", timeout_ms, " ms"));
  }
  return value;
}

absl::Status FileKvStore::Wait(const std::vector<std::string>& keys,
                               int64_t timeout_ms) {
  const absl::Time deadline = absl::Now() + absl::Milliseconds(timeout_ms);
  for (const std::string& key : keys) {
    const int64_t left =
        std::max<int64_t>(0, absl::ToInt64Milliseconds(deadline - absl::Now()));
    absl::StatusOr<std::string> value = Get(key, left);
    if (absl::IsDeadlineExceeded(value.status())) {
      return absl::DeadlineExceededError(
          absl::StrCat("keys did not all appear within ", timeout_ms, " ms"));
    }
    if (!value.ok()) return value.status();
  }
  return absl::OkStatus();
}

}  // namespace zshard::comm
