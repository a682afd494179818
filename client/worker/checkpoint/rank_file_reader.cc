// RankFileReader: opens a rank file, verifies its checksum (streamed, in
// blocks) and its header and range table, then serves ranges with pread.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/worker/checkpoint/checkpoint_file.h"
#include "common/checkpoint/rank_file_format.h"
#include "common/checkpoint/rank_file_verify.h"
#include "common/status.h"

namespace zshard::checkpoint {
namespace {

// Reads exactly `size` bytes at `offset`; false on a short read or error.
bool ReadAt(int fd, void* out, size_t size, int64_t offset) {
  char* at = static_cast<char*>(out);
  while (size > 0) {
    const ssize_t n = pread(fd, at, size, offset);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    at += n;
    size -= static_cast<size_t>(n);
    offset += n;
  }
  return true;
}

}  // namespace

RankFileReader::File::~File() {
  if (fd >= 0) close(fd);
}

absl::StatusOr<RankFileReader> RankFileReader::Open(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int error = errno;
    const std::string message = absl::StrCat(
        "checkpoint file ", path, " cannot be opened: ", std::strerror(error));
    if (error == ENOENT) return absl::NotFoundError(message);
    if (error == EACCES) return absl::PermissionDeniedError(message);
    return absl::InternalError(message);
  }
  auto file = std::make_shared<File>();
  file->fd = fd;
  struct stat st;
  if (fstat(fd, &st) != 0) {
    return absl::InternalError(absl::StrCat(
        "checkpoint file ", path, " cannot be read: ", std::strerror(errno)));
  }
  ZSHARD_ASSIGN_OR_RETURN(VerifiedRankFile verified,
                          VerifyRankFile(
                              [fd](char* out, size_t n, int64_t offset) {
                                return ReadAt(fd, out, n, offset);
                              },
                              static_cast<int64_t>(st.st_size), path));
  RankFileReader reader;
  for (const format::RangeRecord& r : verified.ranges) {
    reader.entries_.push_back(
        Entry{r.param_index, r.expert_rank, r.begin, r.end, r.offset});
  }
  const format::Header& header = verified.header;
  reader.path_ = path;
  reader.file_ = std::move(file);
  reader.step_ = header.step;
  reader.adam_step_ = header.adam_step;
  reader.rank_ = header.rank;
  return reader;
}

std::vector<plan::CheckpointFragment> RankFileReader::ranges() const {
  std::vector<plan::CheckpointFragment> out;
  for (const Entry& e : entries_) {
    out.push_back(
        plan::CheckpointFragment{e.param_index, e.expert_rank, e.begin, e.end});
  }
  return out;
}

absl::Status RankFileReader::Read(int param_index, int expert_rank,
                                  int64_t begin, int64_t end, float* master,
                                  float* exp_avg, float* exp_avg_sq) const {
  // Walks the range through the entries that hold it (normally one).
  int64_t cursor = begin;
  while (cursor < end) {
    const Entry* hit = nullptr;
    for (const Entry& e : entries_) {
      if (e.param_index == param_index && e.expert_rank == expert_rank &&
          e.begin <= cursor && cursor < e.end) {
        hit = &e;
        break;
      }
    }
    if (hit == nullptr) {
      return absl::NotFoundError(
          absl::StrCat("checkpoint file ", path_, " does not hold param ",
                       param_index, " (expert rank ", expert_rank,
                       ") elements [", cursor, ", ", end, ")"));
    }
    const int64_t stop = std::min(end, hit->end);
    const int64_t n = hit->end - hit->begin;
    const int64_t skip = (cursor - hit->begin) * int64_t{sizeof(float)};
    const size_t bytes = static_cast<size_t>(stop - cursor) * sizeof(float);
    const int64_t out = cursor - begin;
    const int64_t array = n * int64_t{sizeof(float)};
    if (!ReadAt(file_->fd, master + out, bytes, hit->offset + skip) ||
        !ReadAt(file_->fd, exp_avg + out, bytes, hit->offset + array + skip) ||
        !ReadAt(file_->fd, exp_avg_sq + out, bytes,
                hit->offset + 2 * array + skip)) {
      return absl::DataLossError(
          absl::StrCat("checkpoint file ", path_, ": short read of param ",
                       param_index, " elements [", cursor, ", ", stop, ")"));
    }
    cursor = stop;
  }
  return absl::OkStatus();
}

}  // namespace zshard::checkpoint
