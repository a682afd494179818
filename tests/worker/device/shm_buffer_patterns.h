// The buffers and byte patterns shm_buffer_peer and its test share: each
// byte depends on its offset within the page and on the page, so a mapping
// of the wrong pages or a lost write shows.
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace zshard::device {

// 96 MiB and 32 MiB + 3 (not a whole number of pages).
inline constexpr size_t kParamBytes = size_t{96} << 20;
inline constexpr size_t kGradBytes = (size_t{32} << 20) + 3;

inline constexpr uint8_t kParamSeed = 3;
inline constexpr uint8_t kOwnerSeed = 7;
inline constexpr uint8_t kMapperSeed = 11;

inline uint8_t PatternByte(size_t i, uint8_t seed) {
  return static_cast<uint8_t>(i * 131 + (i >> 12) * 7 + seed);
}

inline void FillPattern(void* data, size_t bytes, uint8_t seed) {
  auto* p = static_cast<uint8_t*>(data);
  for (size_t i = 0; i < bytes; ++i) p[i] = PatternByte(i, seed);
}

// OK when every byte is the pattern's; else the first one that is not.
inline absl::Status CheckPattern(const void* data, size_t bytes, uint8_t seed,
                                 absl::string_view what) {
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < bytes; ++i) {
    if (p[i] != PatternByte(i, seed)) {
      return absl::InternalError(absl::StrCat(what, ": byte ", i, " is ", p[i],
                                              ", not ", PatternByte(i, seed)));
    }
  }
  return absl::OkStatus();
}

}  // namespace zshard::device
