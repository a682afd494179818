// ZipWriter: a local header (with torch's "FB" padding extra field up to the
// 64-byte boundary) and the data per entry, then the central directory and
// the end records; zip64 fields only where a value does not fit.
#include "common/checkpoint/zip_writer.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/checkpoint/crc32.h"
#include "common/checkpoint/zip_format.h"
#include "common/status.h"

namespace zshard::checkpoint {
namespace {

bool Overflows32(uint64_t value) { return value >= zip::kZip64Marker32; }

}  // namespace

ZipWriter::ZipWriter(ByteSink sink, ZipWriterOptions options)
    : sink_(std::move(sink)), options_(options) {}

absl::Status ZipWriter::Emit(absl::string_view bytes) {
  absl::Status s = sink_(bytes);
  if (!s.ok()) {
    failed_ = true;
    return s;
  }
  offset_ += bytes.size();
  return absl::OkStatus();
}

absl::Status ZipWriter::Add(absl::string_view name, absl::string_view data) {
  if (failed_ || finished_) {
    return absl::FailedPreconditionError(
        "zip writer: an earlier write failed or the archive is finished");
  }
  if (name.empty() || name.size() > zip::kZip64Marker16) {
    return absl::InvalidArgumentError(
        absl::StrCat("zip entry name of ", name.size(), " bytes"));
  }
  if (names_.count(name) > 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("zip entry '", name, "' is added twice"));
  }
  Entry entry;
  entry.name = std::string(name);
  entry.crc = Crc32(0, data.data(), data.size());
  entry.size = data.size();
  entry.offset = offset_;
  const bool zip64 = options_.force_zip64 || Overflows32(entry.size);

  std::string extra;
  if (zip64) {
    zip::Put(extra, zip::kZip64ExtraTag);
    zip::Put(extra, uint16_t{16});
    zip::Put(extra, entry.size);  // uncompressed
    zip::Put(extra, entry.size);  // compressed: the same, stored
  }
  // The padding field itself takes 4 bytes; pad what is left to the
  // boundary.
  const uint64_t unpadded =
      offset_ + zip::kLocalHeaderBytes + name.size() + extra.size() + 4;
  const uint64_t pad =
      (zip::kAlignment - unpadded % zip::kAlignment) % zip::kAlignment;
  zip::Put(extra, zip::kPaddingExtraTag);
  zip::Put(extra, static_cast<uint16_t>(pad));
  extra.append(pad, 'Z');

  std::string head;
  zip::Put(head, zip::kLocalHeaderSignature);
  zip::Put(head, zip64 ? zip::kVersionZip64 : zip::kVersionPlain);
  zip::Put(head, zip::kFlagUtf8);
  zip::Put(head, zip::kMethodStored);
  zip::Put(head, zip::kDosTime);
  zip::Put(head, zip::kDosDate);
  zip::Put(head, entry.crc);
  const uint32_t size32 =
      zip64 ? zip::kZip64Marker32 : static_cast<uint32_t>(entry.size);
  zip::Put(head, size32);
  zip::Put(head, size32);
  zip::Put(head, static_cast<uint16_t>(name.size()));
  zip::Put(head, static_cast<uint16_t>(extra.size()));
  head.append(name.data(), name.size());
  head += extra;
  ZSHARD_RETURN_IF_ERROR(Emit(head));
  ZSHARD_RETURN_IF_ERROR(Emit(data));
  names_.insert(entry.name);
  entries_.push_back(std::move(entry));
  return absl::OkStatus();
}

std::string ZipWriter::CentralHeader(const Entry& e) const {
  const bool size64 = options_.force_zip64 || Overflows32(e.size);
  const bool offset64 = options_.force_zip64 || Overflows32(e.offset);
  std::string extra;
  if (size64 || offset64) {
    zip::Put(extra, zip::kZip64ExtraTag);
    zip::Put(extra,
             static_cast<uint16_t>((size64 ? 16 : 0) + (offset64 ? 8 : 0)));
    if (size64) {
      zip::Put(extra, e.size);
      zip::Put(extra, e.size);
    }
    if (offset64) zip::Put(extra, e.offset);
  }
  std::string out;
  zip::Put(out, zip::kCentralHeaderSignature);
  const uint16_t version =
      extra.empty() ? zip::kVersionPlain : zip::kVersionZip64;
  zip::Put(out, version);  // made by
  zip::Put(out, version);  // needed to extract
  zip::Put(out, zip::kFlagUtf8);
  zip::Put(out, zip::kMethodStored);
  zip::Put(out, zip::kDosTime);
  zip::Put(out, zip::kDosDate);
  zip::Put(out, e.crc);
  const uint32_t size32 =
      size64 ? zip::kZip64Marker32 : static_cast<uint32_t>(e.size);
  zip::Put(out, size32);
  zip::Put(out, size32);
  zip::Put(out, static_cast<uint16_t>(e.name.size()));
  zip::Put(out, static_cast<uint16_t>(extra.size()));
  zip::Put(out, uint16_t{0});  // comment length
  zip::Put(out, uint16_t{0});  // disk number start
  zip::Put(out, uint16_t{0});  // internal attributes
  zip::Put(out, uint32_t{0});  // external attributes
  zip::Put(out,
           offset64 ? zip::kZip64Marker32 : static_cast<uint32_t>(e.offset));
  out += e.name;
  out += extra;
  return out;
}

absl::Status ZipWriter::Finish() {
  if (failed_ || finished_) {
    return absl::FailedPreconditionError(
        "zip writer: an earlier write failed or the archive is finished");
  }
  const uint64_t directory_offset = offset_;
  std::string directory;
  for (const Entry& e : entries_) directory += CentralHeader(e);
  ZSHARD_RETURN_IF_ERROR(Emit(directory));
  const uint64_t count = entries_.size();
  const uint64_t directory_size = directory.size();
  const bool zip64 = options_.force_zip64 || count >= zip::kZip64Marker16 ||
                     Overflows32(directory_size) ||
                     Overflows32(directory_offset);
  std::string tail;
  if (zip64) {
    const uint64_t record_offset = offset_;
    zip::Put(tail, zip::kZip64EndSignature);
    zip::Put(tail, uint64_t{zip::kZip64EndBytes - 12});  // size of the rest
    zip::Put(tail, zip::kVersionZip64);
    zip::Put(tail, zip::kVersionZip64);
    zip::Put(tail, uint32_t{0});  // this disk
    zip::Put(tail, uint32_t{0});  // disk of the directory
    zip::Put(tail, count);
    zip::Put(tail, count);
    zip::Put(tail, directory_size);
    zip::Put(tail, directory_offset);
    zip::Put(tail, zip::kZip64LocatorSignature);
    zip::Put(tail, uint32_t{0});  // disk of the zip64 end record
    zip::Put(tail, record_offset);
    zip::Put(tail, uint32_t{1});  // disks in all
  }
  zip::Put(tail, zip::kEndSignature);
  zip::Put(tail, uint16_t{0});
  zip::Put(tail, uint16_t{0});
  const uint16_t count16 =
      zip64 ? zip::kZip64Marker16 : static_cast<uint16_t>(count);
  zip::Put(tail, count16);
  zip::Put(tail, count16);
  zip::Put(tail,
           zip64 ? zip::kZip64Marker32 : static_cast<uint32_t>(directory_size));
  zip::Put(tail, zip64 ? zip::kZip64Marker32
                       : static_cast<uint32_t>(directory_offset));
  zip::Put(tail, uint16_t{0});  // comment length
  ZSHARD_RETURN_IF_ERROR(Emit(tail));
  finished_ = true;
  return absl::OkStatus();
}

}  // namespace zshard::checkpoint
