#include "common/checkpoint/rank_file_verify.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/plan/plan_hash.h"

namespace zshard::checkpoint {
namespace {

constexpr size_t kBlockBytes = size_t{1} << 20;

absl::Status Corrupt(const std::string& path, const std::string& why) {
  return absl::DataLossError(absl::StrCat("checkpoint file ", path, ": ", why));
}

}  // namespace

absl::StatusOr<VerifiedRankFile> VerifyRankFile(const ReadAtFn& read_at,
                                                int64_t size,
                                                const std::string& path) {
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
    if (!read_at(block.data(), n, at)) {
      return Corrupt(path, absl::StrCat("short read at byte ", at));
    }
    hash.Bytes(block.data(), n);
    at += static_cast<int64_t>(n);
  }
  uint64_t trailer = 0;
  if (!read_at(reinterpret_cast<char*>(&trailer), sizeof(trailer), body)) {
    return Corrupt(path, "short read of the checksum");
  }
  if (trailer != hash.digest()) {
    return Corrupt(path, "checksum mismatch (truncated or corrupt)");
  }

  char head[format::kHeaderBytes];
  VerifiedRankFile out;
  if (!read_at(head, sizeof(head), 0) ||
      !format::DecodeHeader(head, out.header)) {
    return Corrupt(path, "not a rank checkpoint file (bad magic)");
  }
  if (out.header.version != format::kVersion) {
    return Corrupt(path, absl::StrCat("unknown version ", out.header.version));
  }
  const int64_t table_end =
      format::kHeaderBytes + format::kRangeBytes * int64_t{out.header.ranges};
  if (table_end > body) return Corrupt(path, "range table past the end");
  std::vector<char> table(
      static_cast<size_t>(table_end - format::kHeaderBytes));
  if (!read_at(table.data(), table.size(), format::kHeaderBytes)) {
    return Corrupt(path, "short read of the range table");
  }
  for (uint32_t i = 0; i < out.header.ranges; ++i) {
    const format::RangeRecord r =
        format::DecodeRange(table.data() + i * format::kRangeBytes);
    // Written so that no product overflows.
    if (r.param_index < 0 || r.expert_rank < 0 || r.begin < 0 ||
        r.end <= r.begin || r.offset < table_end ||
        (r.end - r.begin) > (body - r.offset) / format::kBytesPerElement) {
      return Corrupt(path, absl::StrCat("range ", i, " is malformed"));
    }
    out.ranges.push_back(r);
  }
  return out;
}

}  // namespace zshard::checkpoint
