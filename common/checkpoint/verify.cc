// VerifyFiles: streams each rank file through FNV-1a 64 (every byte before
// the 8-byte trailer, as the writer hashed them) and compares the digest with
// the manifest's and with the trailer.
#include "common/checkpoint/verify.h"

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/plan/plan_hash.h"

namespace zshard::checkpoint {
namespace {

constexpr int64_t kTrailerBytes = 8;
constexpr size_t kBlockBytes = size_t{1} << 20;

absl::Status VerifyFile(const std::string& path, int64_t bytes,
                        const std::string& checksum) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) {
    const int error = errno;
    std::string message = absl::StrCat(
        "checkpoint file ", path, " cannot be read: ", std::strerror(error));
    if (error == ENOENT) {
      return absl::NotFoundError(
          absl::StrCat("checkpoint file ", path, " is missing"));
    }
    return absl::PermissionDeniedError(message);
  }
  const int64_t size = static_cast<int64_t>(in.tellg());
  if (size != bytes || size < kTrailerBytes) {
    return absl::DataLossError(absl::StrCat(
        "checkpoint file ", path, ": ", size, " bytes, the manifest records ",
        bytes, " (truncated or corrupt)"));
  }
  in.seekg(0);
  plan::Fnv1a64 hash;
  std::vector<char> block(kBlockBytes);
  for (int64_t left = size - kTrailerBytes; left > 0;) {
    const size_t n = static_cast<size_t>(
        std::min<int64_t>(left, static_cast<int64_t>(kBlockBytes)));
    if (!in.read(block.data(), static_cast<std::streamsize>(n))) {
      return absl::DataLossError(
          absl::StrCat("checkpoint file ", path, ": short read"));
    }
    hash.Bytes(block.data(), n);
    left -= static_cast<int64_t>(n);
  }
  uint64_t trailer = 0;
  in.read(reinterpret_cast<char*>(&trailer), sizeof(trailer));
  const std::string digest = absl::StrFormat("%016x", hash.digest());
  if (!in || trailer != hash.digest() || digest != checksum) {
    return absl::DataLossError(
        absl::StrCat("checkpoint file ", path,
                     ": checksum mismatch (truncated or corrupt)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status VerifyFiles(const std::string& dir,
                         const std::vector<ExpectedFile>& files) {
  for (const ExpectedFile& f : files) {
    absl::Status s =
        VerifyFile(absl::StrCat(dir, "/", f.path), f.bytes, f.checksum);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace zshard::checkpoint
