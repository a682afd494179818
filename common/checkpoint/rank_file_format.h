// The byte layout of a rank checkpoint file, shared by the worker's writer
// and reader (client/worker/checkpoint/) and the offline conversions of
// common/checkpoint/. Every integer and float is stored little-endian.
//
//   header (40 bytes):
//     char[8] magic "ZSHRDCKP"
//     u32     version (1)
//     u32     range count N
//     i64     step
//     i64     adam_step
//     i32     rank
//     u32     reserved (0)
//   range table (N records of 32 bytes):
//     i32 param_index, i32 expert_rank, i64 begin, i64 end,
//     i64 offset (of the range's data from the start of the file)
//   data, per range in table order (n = end - begin):
//     n fp32 master, n fp32 exp_avg, n fp32 exp_avg_sq
//   trailer (8 bytes): u64 FNV-1a 64 of every byte before it
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

#include "common/checkpoint/little_endian.h"

namespace zshard::checkpoint::format {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "rank files are read and written in host order, which must be "
              "little-endian");

inline constexpr char kMagic[8] = {'Z', 'S', 'H', 'R', 'D', 'C', 'K', 'P'};
inline constexpr uint32_t kVersion = 1;
inline constexpr int64_t kHeaderBytes = 40;
inline constexpr int64_t kRangeBytes = 32;
inline constexpr int64_t kTrailerBytes = 8;
// master, exp_avg and exp_avg_sq: three fp32 values per element.
inline constexpr int64_t kBytesPerElement = 12;

struct Header {
  uint32_t version = kVersion;
  uint32_t ranges = 0;
  int64_t step = 0;
  int64_t adam_step = 0;
  int32_t rank = 0;
};

struct RangeRecord {
  int32_t param_index = 0;
  int32_t expert_rank = 0;
  int64_t begin = 0;
  int64_t end = 0;
  int64_t offset = 0;
};

using le::Put;

// Reads a T at `at` and advances it. Requires sizeof(T) bytes there.
template <typename T>
T Get(const char*& at) {
  const T value = le::Read<T>(at);
  at += sizeof(T);
  return value;
}

inline std::string EncodeHeader(const Header& h) {
  std::string out(kMagic, sizeof(kMagic));
  Put(out, h.version);
  Put(out, h.ranges);
  Put(out, h.step);
  Put(out, h.adam_step);
  Put(out, h.rank);
  Put(out, uint32_t{0});
  return out;
}

inline std::string EncodeRange(const RangeRecord& r) {
  std::string out;
  Put(out, r.param_index);
  Put(out, r.expert_rank);
  Put(out, r.begin);
  Put(out, r.end);
  Put(out, r.offset);
  return out;
}

// Decodes kHeaderBytes at `at`; false when the magic is wrong.
inline bool DecodeHeader(const char* at, Header& h) {
  if (std::memcmp(at, kMagic, sizeof(kMagic)) != 0) return false;
  at += sizeof(kMagic);
  h.version = Get<uint32_t>(at);
  h.ranges = Get<uint32_t>(at);
  h.step = Get<int64_t>(at);
  h.adam_step = Get<int64_t>(at);
  h.rank = Get<int32_t>(at);
  return true;
}

// Decodes kRangeBytes at `at`.
inline RangeRecord DecodeRange(const char* at) {
  RangeRecord r;
  r.param_index = Get<int32_t>(at);
  r.expert_rank = Get<int32_t>(at);
  r.begin = Get<int64_t>(at);
  r.end = Get<int64_t>(at);
  r.offset = Get<int64_t>(at);
  return r;
}

}  // namespace zshard::checkpoint::format
