// A zip archive writer for the files torch.save makes: every entry stored
// (no compression) with its CRC-32, its data aligned to 64 bytes as
// torch's writer aligns it, zip64 records where a size or offset needs
// them. Deterministic: the same entries give the same bytes.
#pragma once

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace zshard::checkpoint {

// Where an archive's bytes go, in order: a file, a string. Returns the
// error of a failed write, which the writer passes on.
using ByteSink = std::function<absl::Status(absl::string_view bytes)>;

struct ZipWriterOptions {
  // Writes the zip64 forms of every entry and of the end of the central
  // directory even where the 32-bit fields would do (for tests of the
  // zip64 path on small archives). Default false: only where needed.
  bool force_zip64 = false;
};

// Writes one archive through a ByteSink. Not thread-safe; one archive per
// writer. After an error every later call returns FailedPrecondition.
class ZipWriter {
 public:
  explicit ZipWriter(ByteSink sink, ZipWriterOptions options = {});

  // Appends entry `name` (non-empty, unique in the archive, at most 65535
  // bytes) holding `data`. InvalidArgument for a bad or repeated name; the
  // sink's error otherwise.
  absl::Status Add(absl::string_view name, absl::string_view data);

  // Writes the central directory and the end records. Call once, last.
  absl::Status Finish();

  // Bytes written so far.
  uint64_t bytes() const { return offset_; }

 private:
  struct Entry {
    std::string name;
    uint32_t crc = 0;
    uint64_t size = 0;
    uint64_t offset = 0;  // of the local header
  };

  absl::Status Emit(absl::string_view bytes);
  std::string CentralHeader(const Entry& e) const;

  ByteSink sink_;
  ZipWriterOptions options_;
  std::vector<Entry> entries_;
  std::set<std::string, std::less<>> names_;
  uint64_t offset_ = 0;
  bool failed_ = false;
  bool finished_ = false;
};

}  // namespace zshard::checkpoint
