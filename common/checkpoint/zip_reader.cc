// ZipReader: finds the end of central directory (and its zip64 record),
// walks the central headers, and locates each entry's data past its local
// header. Every offset and length is checked against the archive's size
// before it is used.
#include "common/checkpoint/zip_reader.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/checkpoint/crc32.h"
#include "common/checkpoint/zip_format.h"

namespace zshard::checkpoint {
namespace {

// The end record is the last thing in the archive, followed only by its
// comment (at most 65535 bytes).
constexpr int64_t kMaxEndSearch = zip::kEndBytes + 0xffff;

// The directory as the end records give it.
struct Directory {
  uint64_t count = 0;
  uint64_t size = 0;
  uint64_t offset = 0;
};

class Parser {
 public:
  Parser(absl::string_view bytes, const std::string& what)
      : bytes_(bytes), what_(what) {}

  absl::Status Corrupt(absl::string_view why) const {
    return absl::DataLossError(
        absl::StrCat("'", what_, "' is not a whole zip archive: ", why));
  }

  absl::Status Unsupported(absl::string_view why) const {
    return absl::InvalidArgumentError(absl::StrCat("'", what_, "': ", why));
  }

  // Whether [offset, offset + size) lies inside the archive.
  bool Inside(uint64_t offset, uint64_t size) const {
    return offset <= bytes_.size() && size <= bytes_.size() - offset;
  }

  const char* At(uint64_t offset) const { return bytes_.data() + offset; }

  absl::StatusOr<Directory> FindDirectory() const {
    const int64_t n = static_cast<int64_t>(bytes_.size());
    int64_t end = -1;
    for (int64_t at = n - zip::kEndBytes; at >= 0 && at >= n - kMaxEndSearch;
         --at) {
      if (zip::Get<uint32_t>(At(at)) == zip::kEndSignature) {
        end = at;
        break;
      }
    }
    if (end < 0) {
      return Corrupt(n < 4 || zip::Get<uint32_t>(At(0)) !=
                                  zip::kLocalHeaderSignature
                         ? "no zip signature (a torch.save file of torch "
                           "< 1.6, or not a torch file at all?)"
                         : "no end of central directory (truncated?)");
    }
    const char* e = At(end);
    if (zip::Get<uint16_t>(e + 4) != 0 || zip::Get<uint16_t>(e + 6) != 0) {
      return Unsupported("a split (multi-disk) zip archive");
    }
    Directory d;
    d.count = zip::Get<uint16_t>(e + 10);
    d.size = zip::Get<uint32_t>(e + 12);
    d.offset = zip::Get<uint32_t>(e + 16);
    const int64_t locator = end - zip::kZip64LocatorBytes;
    if (locator >= 0 &&
        zip::Get<uint32_t>(At(locator)) == zip::kZip64LocatorSignature) {
      const uint64_t record = zip::Get<uint64_t>(At(locator) + 8);
      if (!Inside(record, zip::kZip64EndBytes) ||
          zip::Get<uint32_t>(At(record)) != zip::kZip64EndSignature) {
        return Corrupt("the zip64 end of central directory is missing");
      }
      const char* r = At(record);
      d.count = zip::Get<uint64_t>(r + 32);
      d.size = zip::Get<uint64_t>(r + 40);
      d.offset = zip::Get<uint64_t>(r + 48);
    }
    if (!Inside(d.offset, d.size)) {
      return Corrupt("the central directory lies past the end (truncated?)");
    }
    return d;
  }

  // Reads the zip64 extra field of a central header into the fields that
  // hold the marker.
  absl::Status ReadZip64Extra(absl::string_view extra, const std::string& name,
                              uint64_t& size, uint64_t& csize,
                              uint64_t& offset) const {
    while (extra.size() >= 4) {
      const uint16_t tag = zip::Get<uint16_t>(extra.data());
      const uint16_t len = zip::Get<uint16_t>(extra.data() + 2);
      if (len > extra.size() - 4) break;
      absl::string_view body = extra.substr(4, len);
      if (tag == zip::kZip64ExtraTag) {
        for (uint64_t* field : {&size, &csize, &offset}) {
          if (*field != zip::kZip64Marker32) continue;
          if (body.size() < 8) {
            return Corrupt(absl::StrCat("entry '", name,
                                        "' has a short zip64 extra field"));
          }
          *field = zip::Get<uint64_t>(body.data());
          body.remove_prefix(8);
        }
        return absl::OkStatus();
      }
      extra.remove_prefix(4 + len);
    }
    if (size == zip::kZip64Marker32 || csize == zip::kZip64Marker32 ||
        offset == zip::kZip64Marker32) {
      return Corrupt(
          absl::StrCat("entry '", name, "' lacks its zip64 extra field"));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<ZipEntry>> Entries(const Directory& d) const {
    std::vector<ZipEntry> out;
    uint64_t at = d.offset;
    const uint64_t stop = d.offset + d.size;
    for (uint64_t i = 0; i < d.count; ++i) {
      if (at > stop || stop - at < zip::kCentralHeaderBytes ||
          zip::Get<uint32_t>(At(at)) != zip::kCentralHeaderSignature) {
        return Corrupt(
            absl::StrCat("central directory entry ", i, " is damaged"));
      }
      const char* h = At(at);
      const uint16_t flags = zip::Get<uint16_t>(h + 8);
      const uint16_t method = zip::Get<uint16_t>(h + 10);
      ZipEntry entry;
      entry.crc = zip::Get<uint32_t>(h + 16);
      uint64_t csize = zip::Get<uint32_t>(h + 20);
      entry.size = zip::Get<uint32_t>(h + 24);
      const uint16_t name_len = zip::Get<uint16_t>(h + 28);
      const uint16_t extra_len = zip::Get<uint16_t>(h + 30);
      const uint16_t comment_len = zip::Get<uint16_t>(h + 32);
      uint64_t local = zip::Get<uint32_t>(h + 42);
      const uint64_t record =
          zip::kCentralHeaderBytes + name_len + extra_len + comment_len;
      if (stop - at < record) {
        return Corrupt(absl::StrCat("central directory entry ", i,
                                    " runs past the directory"));
      }
      entry.name.assign(h + zip::kCentralHeaderBytes, name_len);
      absl::Status s = ReadZip64Extra(
          absl::string_view(h + zip::kCentralHeaderBytes + name_len, extra_len),
          entry.name, entry.size, csize, local);
      if (!s.ok()) return s;
      if ((flags & zip::kFlagEncrypted) != 0) {
        return Unsupported(
            absl::StrCat("zip entry '", entry.name, "' is encrypted"));
      }
      if (method != zip::kMethodStored || csize != entry.size) {
        return Unsupported(absl::StrCat(
            "zip entry '", entry.name, "' is compressed (method ", method,
            "); torch files store their entries uncompressed"));
      }
      if (!Inside(local, zip::kLocalHeaderBytes) ||
          zip::Get<uint32_t>(At(local)) != zip::kLocalHeaderSignature) {
        return Corrupt(absl::StrCat("the local header of entry '", entry.name,
                                    "' is missing"));
      }
      entry.data_offset = local + zip::kLocalHeaderBytes +
                          zip::Get<uint16_t>(At(local) + 26) +
                          zip::Get<uint16_t>(At(local) + 28);
      if (!Inside(entry.data_offset, entry.size)) {
        return Corrupt(absl::StrCat("entry '", entry.name,
                                    "' runs past the end (truncated?)"));
      }
      out.push_back(std::move(entry));
      at += record;
    }
    return out;
  }

 private:
  absl::string_view bytes_;
  const std::string& what_;
};

}  // namespace

absl::StatusOr<ZipReader> ZipReader::Open(absl::string_view bytes,
                                          std::string what) {
  Parser parser(bytes, what);
  absl::StatusOr<Directory> directory = parser.FindDirectory();
  if (!directory.ok()) return directory.status();
  absl::StatusOr<std::vector<ZipEntry>> entries = parser.Entries(*directory);
  if (!entries.ok()) return entries.status();
  ZipReader reader;
  reader.bytes_ = bytes;
  reader.what_ = std::move(what);
  reader.entries_ = *std::move(entries);
  for (size_t i = 0; i < reader.entries_.size(); ++i) {
    if (!reader.index_.emplace(reader.entries_[i].name, i).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", reader.what_, "': zip entry '",
                       reader.entries_[i].name, "' appears twice"));
    }
  }
  return reader;
}

bool ZipReader::Has(absl::string_view name) const {
  return index_.find(name) != index_.end();
}

absl::StatusOr<absl::string_view> ZipReader::Read(
    absl::string_view name) const {
  auto it = index_.find(name);
  if (it == index_.end()) {
    return absl::NotFoundError(
        absl::StrCat("'", what_, "' has no entry '", name, "'"));
  }
  const ZipEntry& e = entries_[it->second];
  absl::string_view data = bytes_.substr(e.data_offset, e.size);
  const uint32_t crc = Crc32(0, data.data(), data.size());
  if (crc != e.crc) {
    return absl::DataLossError(absl::StrFormat(
        "'%s': zip entry '%s' fails its crc-32 check (recorded %08x, "
        "computed %08x)",
        what_, e.name, e.crc, crc));
  }
  return data;
}

}  // namespace zshard::checkpoint
