// The records of a zip archive that zip_reader.cc and zip_writer.cc share
// (PKWARE APPNOTE 6.3: local and central headers, the end of central
// directory, its zip64 forms). Every field is little-endian.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

#include "common/checkpoint/little_endian.h"

namespace zshard::checkpoint::zip {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "zip fields are read and written in host order, which must be "
              "little-endian");

inline constexpr uint32_t kLocalHeaderSignature = 0x04034b50;
inline constexpr uint32_t kCentralHeaderSignature = 0x02014b50;
inline constexpr uint32_t kEndSignature = 0x06054b50;
inline constexpr uint32_t kZip64EndSignature = 0x06064b50;
inline constexpr uint32_t kZip64LocatorSignature = 0x07064b50;

inline constexpr int64_t kLocalHeaderBytes = 30;
inline constexpr int64_t kCentralHeaderBytes = 46;
inline constexpr int64_t kEndBytes = 22;
inline constexpr int64_t kZip64EndBytes = 56;
inline constexpr int64_t kZip64LocatorBytes = 20;

// Extra-field tags: zip64 sizes and offset; torch's padding ("FB"), which
// aligns each entry's data to kAlignment bytes as torch.save does.
inline constexpr uint16_t kZip64ExtraTag = 0x0001;
inline constexpr uint16_t kPaddingExtraTag = 0x4246;
inline constexpr int64_t kAlignment = 64;

// A 32-bit (16-bit) field holding this value defers to the zip64 record.
inline constexpr uint32_t kZip64Marker32 = 0xffffffffu;
inline constexpr uint16_t kZip64Marker16 = 0xffffu;

// General purpose flag bits.
inline constexpr uint16_t kFlagEncrypted = 0x0001;
inline constexpr uint16_t kFlagUtf8 = 0x0800;

inline constexpr uint16_t kMethodStored = 0;
// "version needed to extract": 2.0 plain, 4.5 with zip64 fields.
inline constexpr uint16_t kVersionPlain = 20;
inline constexpr uint16_t kVersionZip64 = 45;
// 1980-01-01 00:00, the earliest DOS date: every entry gets it, so that an
// archive's bytes depend on its contents only.
inline constexpr uint16_t kDosTime = 0;
inline constexpr uint16_t kDosDate = (1 << 5) | 1;

using le::Put;

// The T at `at`. Requires sizeof(T) readable bytes there.
template <typename T>
T Get(const char* at) {
  return le::Read<T>(at);
}

}  // namespace zshard::checkpoint::zip
