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
#include "common/plan/plan_hash.h"

namespace zshard::checkpoint {
namespace {

constexpr size_t kBlockBytes = size_t{1} << 20;

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

absl::Status Corrupt(const std::string& path, const std::string& why) {
  return absl::DataLossError(absl::StrCat("checkpoint file ", path, ": ", why));
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
  const int64_t size = st.st_size;
  if (size < format::kHeaderBytes + format::kTrailerBytes) {
    return Corrupt(path, absl::StrCat("truncated (", size, " bytes)"));
  }
  // The checksum first: nothing in the file is trusted before it matches.
  const int64_t body = size - format::kTrailerBytes;
  plan::Fnv1a64 hash;
  std::vector<char> block(kBlockBytes);
  for (int64_t at = 0; at < body;) {
    const size_t n = static_cast<size_t>(
        std::min<int64_t>(body - at, static_cast<int64_t>(kBlockBytes)));
    if (!ReadAt(fd, block.data(), n, at)) {
      return Corrupt(path, absl::StrCat("short read at byte ", at));
    }
    hash.Bytes(block.data(), n);
    at += static_cast<int64_t>(n);
  }
  uint64_t trailer = 0;
  if (!ReadAt(fd, &trailer, sizeof(trailer), body)) {
    return Corrupt(path, "short read of the checksum");
  }
  if (trailer != hash.digest()) {
    return Corrupt(path, "checksum mismatch (truncated or corrupt)");
  }

  char head[format::kHeaderBytes];
  format::Header header;
  if (!ReadAt(fd, head, sizeof(head), 0) ||
      !format::DecodeHeader(head, header)) {
    return Corrupt(path, "not a rank checkpoint file (bad magic)");
  }
  if (header.version != format::kVersion) {
    return Corrupt(path, absl::StrCat("unknown version ", header.version));
  }
  const int64_t table_end =
      format::kHeaderBytes + format::kRangeBytes * int64_t{header.ranges};
  if (table_end > body) return Corrupt(path, "range table past the end");
  std::vector<char> table(
      static_cast<size_t>(table_end - format::kHeaderBytes));
  if (!ReadAt(fd, table.data(), table.size(), format::kHeaderBytes)) {
    return Corrupt(path, "short read of the range table");
  }
  RankFileReader reader;
  for (uint32_t i = 0; i < header.ranges; ++i) {
    const format::RangeRecord r =
        format::DecodeRange(table.data() + i * format::kRangeBytes);
    if (r.param_index < 0 || r.expert_rank < 0 || r.begin < 0 ||
        r.end <= r.begin || r.offset < table_end ||
        r.offset + (r.end - r.begin) * format::kBytesPerElement > body) {
      return Corrupt(path, absl::StrCat("range ", i, " is malformed"));
    }
    reader.entries_.push_back(
        Entry{r.param_index, r.expert_rank, r.begin, r.end, r.offset});
  }
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
