// Random identifiers from std::random_device (the OS entropy source).
#include "server/membership/members/token.h"

#include <cstdint>
#include <random>

#include "absl/strings/str_cat.h"

namespace zshard::server {
namespace {

std::string RandomHex(int words) {
  std::random_device rd;
  std::string out;
  for (int i = 0; i < words; ++i) {
    out +=
        absl::StrCat(absl::Hex(static_cast<uint32_t>(rd()), absl::kZeroPad8));
  }
  return out;
}

}  // namespace

std::string NewToken() { return RandomHex(4); }

std::string NewWorkerId() { return "w-" + RandomHex(2); }

bool TokensEqual(absl::string_view a, absl::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  }
  return diff == 0;
}

}  // namespace zshard::server
