// A reader of the zip archives torch.save writes: the central directory
// (zip64 forms included) of an archive held in memory, each entry's data
// stored (uncompressed) and checked against its CRC-32 when read.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace zshard::checkpoint {

// One entry of the central directory, its data located.
struct ZipEntry {
  std::string name;
  uint32_t crc = 0;
  uint64_t data_offset = 0;  // of the first data byte in the archive
  uint64_t size = 0;
};

// The entries of one archive. Copyable; refers to the bytes given to Open,
// which must outlive it. Read is const and thread-safe.
class ZipReader {
 public:
  // Parses the archive in `bytes`; `what` names it in messages (the file's
  // path). DataLoss for a truncated or damaged archive ("no end of central
  // directory", an entry past the end); InvalidArgument for what this
  // reader does not take: a compressed or encrypted entry, a split archive,
  // a name given twice.
  static absl::StatusOr<ZipReader> Open(absl::string_view bytes,
                                        std::string what);

  // Every entry, in central directory order.
  const std::vector<ZipEntry>& entries() const { return entries_; }

  // Whether the archive has an entry `name`.
  bool Has(absl::string_view name) const;

  // The data of entry `name`, a view into the archive's bytes. NotFound
  // when there is none; DataLoss when its CRC-32 does not match.
  absl::StatusOr<absl::string_view> Read(absl::string_view name) const;

 private:
  ZipReader() = default;

  absl::string_view bytes_;
  std::string what_;
  std::vector<ZipEntry> entries_;
  std::map<std::string, size_t, std::less<>> index_;  // name -> entries_
};

}  // namespace zshard::checkpoint
