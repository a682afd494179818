// FailedPeer payloads: "<rank>|<closed 0/1>|<group>".
#include "client/worker/comm/failed_peer.h"

#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace zshard::comm {

absl::Status WithFailedPeer(absl::Status status, const FailedPeer& peer,
                            const char* key) {
  if (status.ok() || peer.rank < 0) return status;
  status.SetPayload(
      key, absl::Cord(absl::StrCat(peer.rank, "|", peer.closed ? 1 : 0, "|",
                                   peer.group)));
  return status;
}

std::optional<FailedPeer> FailedPeerOf(const absl::Status& status,
                                       const char* key) {
  auto payload = status.GetPayload(key);
  if (!payload.has_value()) return std::nullopt;
  const std::string text(*payload);
  std::vector<std::string> parts =
      absl::StrSplit(text, absl::MaxSplits('|', 2));
  FailedPeer peer;
  if (parts.size() != 3 || !absl::SimpleAtoi(parts[0], &peer.rank) ||
      peer.rank < 0 || (parts[1] != "0" && parts[1] != "1")) {
    return std::nullopt;
  }
  peer.closed = parts[1] == "1";
  peer.group = parts[2];
  return peer;
}

absl::Status WithMessage(const absl::Status& status, std::string message) {
  absl::Status out(status.code(), message);
  status.ForEachPayload([&](absl::string_view key, const absl::Cord& value) {
    out.SetPayload(key, value);
  });
  return out;
}

bool SaysPeerClosed(const std::string& message) {
  for (const char* text :
       {"closed by peer", "reset by peer", "Socket closed",
        "unexpectedly closed", "Connection refused", "Broken pipe", " exited",
        " closed its connections", " aborted", "has exited"}) {
    if (absl::StrContains(message, text)) return true;
  }
  return false;
}

}  // namespace zshard::comm
