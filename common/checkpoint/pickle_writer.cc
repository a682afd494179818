// PickleWriter: opcodes and operands in the binary forms of protocol 2.
#include "common/checkpoint/pickle_writer.h"

#include <cstring>
#include <utility>

namespace zshard::checkpoint {
namespace {

template <typename T>
void PutLe(std::string& out, T value) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));  // little-endian hosts only
  out.append(bytes, sizeof(T));
}

}  // namespace

PickleWriter::PickleWriter() {
  out_.push_back('\x80');  // PROTO
  out_.push_back('\x02');
}

void PickleWriter::None() { out_.push_back('N'); }

void PickleWriter::Bool(bool value) {
  out_.push_back(value ? '\x88' : '\x89');  // NEWTRUE, NEWFALSE
}

void PickleWriter::Int(int64_t value) {
  if (value >= 0 && value <= 0xff) {
    out_.push_back('K');
    PutLe(out_, static_cast<uint8_t>(value));
  } else if (value >= 0 && value <= 0xffff) {
    out_.push_back('M');
    PutLe(out_, static_cast<uint16_t>(value));
  } else if (value >= INT32_MIN && value <= INT32_MAX) {
    out_.push_back('J');
    PutLe(out_, static_cast<int32_t>(value));
  } else {
    // LONG1: the fewest little-endian two's-complement bytes that keep the
    // sign, as Python's encode_long writes them.
    std::string bytes;
    const uint64_t u = static_cast<uint64_t>(value);
    int n = 8;
    while (n > 1) {
      const uint8_t top = static_cast<uint8_t>(u >> (8 * (n - 1)));
      const uint8_t next = static_cast<uint8_t>(u >> (8 * (n - 2)));
      const bool redundant = (top == 0x00 && (next & 0x80) == 0) ||
                             (top == 0xff && (next & 0x80) != 0);
      if (!redundant) break;
      --n;
    }
    out_.push_back('\x8a');
    out_.push_back(static_cast<char>(n));
    for (int i = 0; i < n; ++i) {
      out_.push_back(static_cast<char>(static_cast<uint8_t>(u >> (8 * i))));
    }
  }
}

void PickleWriter::Float(double value) {
  uint64_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  out_.push_back('G');
  PutLe(out_, __builtin_bswap64(bits));  // big-endian
}

void PickleWriter::String(absl::string_view utf8) {
  out_.push_back('X');
  PutLe(out_, static_cast<uint32_t>(utf8.size()));
  out_.append(utf8.data(), utf8.size());
}

void PickleWriter::Global(absl::string_view module, absl::string_view name) {
  out_.push_back('c');
  out_.append(module.data(), module.size());
  out_.push_back('\n');
  out_.append(name.data(), name.size());
  out_.push_back('\n');
}

void PickleWriter::Mark() { out_.push_back('('); }
void PickleWriter::EmptyTuple() { out_.push_back(')'); }
void PickleWriter::EmptyList() { out_.push_back(']'); }
void PickleWriter::EmptyDict() { out_.push_back('}'); }
void PickleWriter::Tuple() { out_.push_back('t'); }

void PickleWriter::SmallTuple(int n) {
  // TUPLE1, TUPLE2, TUPLE3.
  out_.push_back(static_cast<char>(0x84 + n));
}

void PickleWriter::Appends() { out_.push_back('e'); }
void PickleWriter::SetItems() { out_.push_back('u'); }
void PickleWriter::Reduce() { out_.push_back('R'); }
void PickleWriter::Build() { out_.push_back('b'); }
void PickleWriter::PersistentId() { out_.push_back('Q'); }

std::string PickleWriter::Finish() {
  out_.push_back('.');
  return std::move(out_);
}

}  // namespace zshard::checkpoint
