// ShmRendezvous: records through the KvStore, polled with the deadline and
// the store's cancellation.
#include "client/worker/comm/shm_rendezvous.h"

#include <unistd.h>

#include <algorithm>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "common/file_io.h"

namespace zshard::comm {
namespace {

constexpr absl::Duration kPollStep = absl::Milliseconds(20);

std::string ReadTrimmed(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return "?";
  return std::string(absl::StripAsciiWhitespace(*text));
}

std::string ReadLinkOr(const char* path) {
  char buf[256];
  const ssize_t n = readlink(path, buf, sizeof(buf));
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "?";
}

}  // namespace

std::string LocalHostIdentity() {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  return absl::StrCat("boot=", ReadTrimmed("/proc/sys/kernel/random/boot_id"),
                      ";pid=", ReadLinkOr("/proc/self/ns/pid"),
                      ";ipc=", ReadLinkOr("/proc/self/ns/ipc"), ";host=", host);
}

ShmRendezvous::ShmRendezvous(KvStore* store, std::string group, int rank,
                             int size, absl::Time deadline)
    : store_(store),
      prefix_(absl::StrCat("shm/", group, "/")),
      rank_(rank),
      size_(size),
      deadline_(deadline) {}

std::string ShmRendezvous::Key(absl::string_view what, int rank) const {
  return absl::StrCat(prefix_, what, "/", rank);
}

absl::StatusOr<std::string> ShmRendezvous::Get(const std::string& key) {
  while (true) {
    if (store_->cancelled()) {
      return absl::AbortedError(
          absl::StrCat("shm rendezvous '", key, "': cancelled"));
    }
    const absl::Duration left = deadline_ - absl::Now();
    if (left <= absl::ZeroDuration()) {
      return absl::DeadlineExceededError(
          absl::StrCat("shm rendezvous '", key, "': timed out"));
    }
    const int64_t step_ms = std::max<int64_t>(
        1, absl::ToInt64Milliseconds(std::min(left, kPollStep)));
    absl::StatusOr<std::string> value = store_->Get(key, step_ms);
    if (value.ok() || !absl::IsDeadlineExceeded(value.status())) return value;
  }
}

absl::StatusOr<std::vector<ShmPeerRecord>> ShmRendezvous::Exchange(
    const ShmPeerRecord& mine) {
  const absl::Status set = store_->Set(
      Key("peer", rank_), absl::StrCat(mine.identity, "\n", mine.pid, "\n",
                                       mine.segment, "\n", mine.probe_address));
  if (!set.ok()) return set;
  std::vector<ShmPeerRecord> records(size_);
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) {
      records[r] = mine;
      continue;
    }
    absl::StatusOr<std::string> value = Get(Key("peer", r));
    if (!value.ok()) return value.status();
    std::vector<std::string> parts = absl::StrSplit(*value, '\n');
    if (parts.size() != 4 || !absl::SimpleAtoi(parts[1], &records[r].pid) ||
        !absl::SimpleAtoi(parts[3], &records[r].probe_address)) {
      return absl::InvalidArgumentError(
          absl::StrCat("shm rendezvous record of rank ", r, " is malformed"));
    }
    records[r].identity = std::move(parts[0]);
    records[r].segment = std::move(parts[2]);
  }
  return records;
}

absl::StatusOr<std::vector<std::string>> ShmRendezvous::AllGather(
    absl::string_view name, absl::string_view value) {
  const absl::Status set = store_->Set(Key(name, rank_), value);
  if (!set.ok()) return set;
  std::vector<std::string> values(size_);
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) {
      values[r] = std::string(value);
      continue;
    }
    absl::StatusOr<std::string> got = Get(Key(name, r));
    if (!got.ok()) return got.status();
    values[r] = std::move(got).value();
  }
  return values;
}

absl::Status CheckColocated(const std::vector<ShmPeerRecord>& records,
                            absl::string_view group) {
  for (size_t r = 0; r < records.size(); ++r) {
    if (records[r].identity != records[0].identity) {
      return absl::FailedPreconditionError(absl::StrCat(
          "shm transport of group '", group, "': rank ", r,
          " runs on another host or namespace (", records[r].identity,
          ") than rank 0 (", records[0].identity, ")"));
    }
    if (records[r].segment.empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat("shm transport of group '", group, "': rank ", r,
                       " could not create its shared-memory segment"));
    }
  }
  return absl::OkStatus();
}

}  // namespace zshard::comm
