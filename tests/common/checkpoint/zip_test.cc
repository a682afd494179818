// The stored zip archives of torch files: round trips (plain and zip64,
// data aligned to 64 bytes, the same bytes every time) and the refusal of
// damaged or unsupported archives in one line.
#include <string>

#include "common/checkpoint/crc32.h"
#include "common/checkpoint/zip_reader.h"
#include "common/checkpoint/zip_writer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace zshard::checkpoint {
namespace {

using ::testing::HasSubstr;

std::string Archive(ZipWriterOptions options = {}) {
  std::string out;
  ZipWriter zip(
      [&out](absl::string_view b) {
        out.append(b.data(), b.size());
        return absl::OkStatus();
      },
      options);
  EXPECT_TRUE(zip.Add("archive/data.pkl", "pickle bytes").ok());
  EXPECT_TRUE(zip.Add("archive/data/0", std::string(1000, '\x7f')).ok());
  EXPECT_TRUE(zip.Add("archive/empty", "").ok());
  EXPECT_TRUE(zip.Add("archive/version", "3\n").ok());
  EXPECT_TRUE(zip.Finish().ok());
  EXPECT_EQ(zip.bytes(), out.size());
  return out;
}

void ExpectEntries(const std::string& bytes) {
  absl::StatusOr<ZipReader> zip = ZipReader::Open(bytes, "t.pt");
  ASSERT_TRUE(zip.ok()) << zip.status();
  ASSERT_EQ(zip->entries().size(), 4u);
  EXPECT_EQ(zip->entries()[0].name, "archive/data.pkl");
  for (const ZipEntry& e : zip->entries()) {
    EXPECT_EQ(e.data_offset % 64, 0u) << e.name;  // as torch aligns them
  }
  EXPECT_EQ(*zip->Read("archive/data.pkl"), "pickle bytes");
  EXPECT_EQ(*zip->Read("archive/data/0"), std::string(1000, '\x7f'));
  EXPECT_EQ(*zip->Read("archive/empty"), "");
  EXPECT_EQ(*zip->Read("archive/version"), "3\n");
  EXPECT_TRUE(zip->Has("archive/version"));
  EXPECT_FALSE(zip->Has("archive/nothing"));
  absl::StatusOr<absl::string_view> missing = zip->Read("archive/nothing");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(),
              HasSubstr("'t.pt' has no entry 'archive/nothing'"));
}

TEST(Crc32Test, KnownValues) {
  EXPECT_EQ(Crc32(0, "", 0), 0u);
  EXPECT_EQ(Crc32(0, "123456789", 9), 0xcbf43926u);
  // In pieces: the same as at once.
  const std::string text = "The quick brown fox jumps over the lazy dog";
  EXPECT_EQ(Crc32(0, text.data(), text.size()), 0x414fa339u);
  EXPECT_EQ(
      Crc32(Crc32(0, text.data(), 11), text.data() + 11, text.size() - 11),
      0x414fa339u);
}

TEST(ZipTest, RoundTrip) { ExpectEntries(Archive()); }

TEST(ZipTest, Zip64RoundTrip) {
  const std::string bytes = Archive(ZipWriterOptions{true});
  EXPECT_NE(bytes, Archive());
  ExpectEntries(bytes);
}

TEST(ZipTest, TheSameEntriesGiveTheSameBytes) {
  EXPECT_EQ(Archive(), Archive());
}

TEST(ZipTest, RefusesARepeatedName) {
  ZipWriter zip([](absl::string_view) { return absl::OkStatus(); });
  ASSERT_TRUE(zip.Add("a", "x").ok());
  absl::Status s = zip.Add("a", "y");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "zip entry 'a' is added twice");
}

TEST(ZipTest, PassesOnTheSinksError) {
  ZipWriter zip(
      [](absl::string_view) { return absl::InternalError("disk full"); });
  EXPECT_EQ(zip.Add("a", "x").message(), "disk full");
  EXPECT_EQ(zip.Finish().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(ZipTest, RefusesATruncatedArchive) {
  const std::string bytes = Archive();
  for (size_t keep : {bytes.size() - 1, bytes.size() / 2, size_t{10}}) {
    absl::StatusOr<ZipReader> zip =
        ZipReader::Open(absl::string_view(bytes).substr(0, keep), "t.pt");
    ASSERT_FALSE(zip.ok()) << keep;
    EXPECT_EQ(zip.status().code(), absl::StatusCode::kDataLoss);
    EXPECT_EQ(zip.status().message(),
              "'t.pt' is not a whole zip archive: no end of central directory "
              "(truncated?)");
  }
}

TEST(ZipTest, RefusesWhatIsNotAZip) {
  absl::StatusOr<ZipReader> zip =
      ZipReader::Open("\x80\x02}q\x00.", "old.pt");  // a legacy torch.save
  EXPECT_EQ(zip.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(zip.status().message(),
              HasSubstr("'old.pt' is not a whole zip archive: no zip "
                        "signature (a torch.save file of torch < 1.6"));
}

TEST(ZipTest, RefusesAWrongCrc) {
  std::string bytes = Archive();
  absl::StatusOr<ZipReader> zip = ZipReader::Open(bytes, "t.pt");
  ASSERT_TRUE(zip.ok());
  const uint64_t at = zip->entries()[1].data_offset + 500;
  bytes[at] = '\x00';  // one byte of archive/data/0
  zip = ZipReader::Open(bytes, "t.pt");
  ASSERT_TRUE(zip.ok());
  EXPECT_TRUE(zip->Read("archive/data.pkl").ok());
  absl::StatusOr<absl::string_view> data = zip->Read("archive/data/0");
  EXPECT_EQ(data.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(data.status().message(),
              HasSubstr("'t.pt': zip entry 'archive/data/0' fails its crc-32 "
                        "check (recorded "));
}

TEST(ZipTest, RefusesACompressedEntry) {
  std::string bytes = Archive();
  // The first central header's method field: 8 (deflate).
  const size_t central = bytes.find("PK\x01\x02");
  ASSERT_NE(central, std::string::npos);
  bytes[central + 10] = 8;
  absl::StatusOr<ZipReader> zip = ZipReader::Open(bytes, "t.pt");
  EXPECT_EQ(zip.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(zip.status().message(),
            "'t.pt': zip entry 'archive/data.pkl' is compressed (method 8); "
            "torch files store their entries uncompressed");
}

TEST(ZipTest, RefusesAnEntryPastTheEnd) {
  std::string bytes = Archive();
  const size_t central = bytes.find("PK\x01\x02");
  // The first entry's sizes (compressed and not) made huge.
  for (int i = 20; i < 28; ++i) bytes[central + i] = '\x7f';
  absl::StatusOr<ZipReader> zip = ZipReader::Open(bytes, "t.pt");
  EXPECT_EQ(zip.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(zip.status().message(),
              HasSubstr("entry 'archive/data.pkl' runs past the end"));
}

}  // namespace
}  // namespace zshard::checkpoint
