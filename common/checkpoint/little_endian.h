// Little-endian values in byte strings, for the checkpoint formats (rank
// files, zip archives). The host must be little-endian (checked where the
// formats are defined).
#pragma once

#include <cstring>
#include <string>

namespace zshard::checkpoint::le {

// Appends the little-endian bytes of `value` to `out`.
template <typename T>
void Put(std::string& out, T value) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));
  out.append(bytes, sizeof(T));
}

// The T at `at`. Requires sizeof(T) readable bytes there.
template <typename T>
T Read(const char* at) {
  T value;
  std::memcpy(&value, at, sizeof(T));
  return value;
}

}  // namespace zshard::checkpoint::le
