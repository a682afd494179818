// A reader of Python pickles (protocol 2, as torch.save writes data.pkl;
// the binary opcodes of protocols 3 to 5 too) that builds the values
// without running anything: globals, calls and persistent ids are left for
// the caller to interpret (torch_file_reader.cc).
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/checkpoint/pickle_value.h"

namespace zshard::checkpoint {

// Unpickles `bytes`; `what` names the pickle in messages. InvalidArgument
// for an opcode this reader does not take ("unknown pickle opcode 0x.. at
// byte N"); DataLoss for a damaged pickle (truncated, a stack or memo
// reference that is not there, no STOP).
absl::StatusOr<PickleDocument> ReadPickle(absl::string_view bytes,
                                          absl::string_view what);

}  // namespace zshard::checkpoint
