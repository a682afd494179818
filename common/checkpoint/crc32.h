// CRC-32 (IEEE 802.3, reflected polynomial 0xedb88320), the checksum every
// zip entry carries.
#pragma once

#include <cstddef>
#include <cstdint>

namespace zshard::checkpoint {

// Continues the CRC-32 `crc` (0 for a fresh one) over `size` bytes at
// `data` and returns it, so that Crc32(Crc32(0, a), b) == Crc32 of a then b.
uint32_t Crc32(uint32_t crc, const void* data, size_t size);

}  // namespace zshard::checkpoint
