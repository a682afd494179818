// A writer of protocol-2 pickles, opcode by opcode, for the data.pkl of a
// torch file: the caller lays the values out as Python's pickler would
// (MARK, the items, SETITEMS; a callable, its argument tuple, REDUCE). No
// memo is used, so every value is written where it appears.
#pragma once

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace zshard::checkpoint {

// Builds one pickle in memory. Not thread-safe.
class PickleWriter {
 public:
  // Starts the pickle with PROTO 2.
  PickleWriter();

  void None();
  void Bool(bool value);
  // The shortest of BININT1, BININT2, BININT and LONG1, as Python picks.
  void Int(int64_t value);
  void Float(double value);             // BINFLOAT
  void String(absl::string_view utf8);  // BINUNICODE
  void Global(absl::string_view module, absl::string_view name);
  void Mark();
  void EmptyTuple();
  void EmptyList();
  void EmptyDict();
  // A tuple of the values since the last Mark().
  void Tuple();
  // A tuple of the last `n` (1 to 3) values, no mark.
  void SmallTuple(int n);
  void Appends();       // the values since the mark into the list below it
  void SetItems();      // the key/value pairs since the mark into the dict
  void Reduce();        // callable, args -> callable(*args)
  void Build();         // object, state -> object with state
  void PersistentId();  // BINPERSID of the value on top

  // Ends the pickle with STOP and returns its bytes. Call once, last.
  std::string Finish();

 private:
  std::string out_;
};

}  // namespace zshard::checkpoint
