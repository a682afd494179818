// ReadRankFileContents / WriteRankFileContents over the layout of
// rank_file_format.h: the reader checks the FNV-1a 64 trailer in one
// streaming pass, then reads the header, the range table and each range's
// three arrays; the writer hashes as it writes.
#include "common/checkpoint/rank_file_io.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/checkpoint/atomic_file.h"
#include "common/checkpoint/rank_file_format.h"
#include "common/checkpoint/rank_file_verify.h"
#include "common/plan/plan_hash.h"
#include "common/status.h"

namespace zshard::checkpoint {
namespace {

absl::Status Corrupt(const std::string& path, absl::string_view why) {
  return absl::DataLossError(absl::StrCat("checkpoint file ", path, ": ", why));
}

// Reads exactly `size` bytes at `offset`.
bool ReadAt(std::ifstream& in, char* out, size_t size, int64_t offset) {
  in.seekg(offset);
  return static_cast<bool>(in.read(out, static_cast<std::streamsize>(size)));
}

}  // namespace

std::string RankFileNameOf(int rank) {
  return absl::StrFormat("rank-%05d.zsc", rank);
}

absl::StatusOr<RankFileContents> ReadRankFileContents(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) {
    const int error = errno;
    if (error == ENOENT) {
      return absl::NotFoundError(
          absl::StrCat("checkpoint file ", path, " is missing"));
    }
    return absl::PermissionDeniedError(absl::StrCat(
        "checkpoint file ", path, " cannot be read: ", std::strerror(error)));
  }
  const int64_t size = static_cast<int64_t>(in.tellg());
  ZSHARD_ASSIGN_OR_RETURN(VerifiedRankFile verified,
                          VerifyRankFile(
                              [&in](char* out, size_t n, int64_t offset) {
                                return ReadAt(in, out, n, offset);
                              },
                              size, path));
  const format::Header& header = verified.header;
  RankFileContents out;
  out.step = header.step;
  out.adam_step = header.adam_step;
  out.rank = header.rank;
  for (size_t i = 0; i < verified.ranges.size(); ++i) {
    const format::RangeRecord& r = verified.ranges[i];
    RankFileRange range;
    range.param_index = r.param_index;
    range.expert_rank = r.expert_rank;
    range.begin = r.begin;
    range.end = r.end;
    const size_t n = static_cast<size_t>(r.end - r.begin);
    int64_t at = r.offset;
    for (std::vector<float>* a :
         {&range.master, &range.exp_avg, &range.exp_avg_sq}) {
      a->resize(n);
      if (!ReadAt(in, reinterpret_cast<char*>(a->data()), n * sizeof(float),
                  at)) {
        return Corrupt(path, absl::StrCat("short read of range ", i));
      }
      at += static_cast<int64_t>(n * sizeof(float));
    }
    out.ranges.push_back(std::move(range));
  }
  return out;
}

absl::StatusOr<WrittenRankFile> WriteRankFileContents(
    const RankFileContents& contents, const std::string& dir) {
  format::Header header;
  header.ranges = static_cast<uint32_t>(contents.ranges.size());
  header.step = contents.step;
  header.adam_step = contents.adam_step;
  header.rank = contents.rank;
  std::string head = format::EncodeHeader(header);
  int64_t offset =
      format::kHeaderBytes +
      format::kRangeBytes * static_cast<int64_t>(contents.ranges.size());
  for (const RankFileRange& r : contents.ranges) {
    const size_t n = static_cast<size_t>(r.end - r.begin);
    if (r.end <= r.begin || r.master.size() != n || r.exp_avg.size() != n ||
        r.exp_avg_sq.size() != n) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rank file range of param ", r.param_index, " [", r.begin, ", ",
          r.end, ") does not hold ", r.end - r.begin, " values per array"));
    }
    head += format::EncodeRange(format::RangeRecord{
        r.param_index, r.expert_rank, r.begin, r.end, offset});
    offset += (r.end - r.begin) * format::kBytesPerElement;
  }
  WrittenRankFile written;
  written.name = RankFileNameOf(contents.rank);
  AtomicFile file;
  ZSHARD_RETURN_IF_ERROR(file.Open(absl::StrCat(dir, "/", written.name)));
  plan::Fnv1a64 hash;
  auto write = [&](const void* data, size_t bytes) {
    hash.Bytes(data, bytes);
    return file.Write(absl::string_view(static_cast<const char*>(data), bytes));
  };
  ZSHARD_RETURN_IF_ERROR(write(head.data(), head.size()));
  for (const RankFileRange& r : contents.ranges) {
    for (const std::vector<float>* a : {&r.master, &r.exp_avg, &r.exp_avg_sq}) {
      ZSHARD_RETURN_IF_ERROR(write(a->data(), a->size() * sizeof(float)));
    }
  }
  const uint64_t digest = hash.digest();
  ZSHARD_RETURN_IF_ERROR(file.Write(absl::string_view(
      reinterpret_cast<const char*>(&digest), sizeof(digest))));
  written.bytes = file.bytes();
  ZSHARD_RETURN_IF_ERROR(file.Commit());
  written.checksum = absl::StrFormat("%016x", digest);
  return written;
}

}  // namespace zshard::checkpoint
