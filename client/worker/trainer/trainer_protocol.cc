// Frames of the trainer protocol over device::SendFds / ReceiveFds.
#include "client/worker/trainer/trainer_protocol.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace zshard::trainer {

std::string Message::type() const {
  auto it = body.find("type");
  return it != body.end() && it->is_string() ? it->get<std::string>() : "";
}

absl::Status SendMessage(int socket, const nlohmann::json& body,
                         absl::Span<const int> fds, int64_t timeout_ms) {
  const std::string text = body.dump();
  if (text.size() > kMaxFrameBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("trainer message of ", text.size(),
                     " bytes is larger than ", kMaxFrameBytes));
  }
  const uint32_t n = static_cast<uint32_t>(text.size());
  std::string frame(4, '\0');
  for (int i = 0; i < 4; ++i)
    frame[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  frame += text;
  return device::SendFds(socket, fds, frame, timeout_ms);
}

absl::Status CheckProtocolVersion(const nlohmann::json& first) {
  auto version = first.find("version");
  if (version != first.end() && version->is_number_integer() &&
      version->get<int>() == kProtocolVersion) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("the trainer speaks protocol version ",
                   version == first.end() ? "none" : version->dump(),
                   ", this daemon ", kProtocolVersion));
}

absl::StatusOr<Message> ReceiveMessage(int socket, int64_t timeout_ms) {
  absl::StatusOr<device::ReceivedFds> header =
      device::ReceiveFds(socket, 4, device::kMaxPassedFds, timeout_ms);
  if (!header.ok()) return header.status();
  uint32_t n = 0;
  for (int i = 0; i < 4; ++i) {
    n |= uint32_t{static_cast<uint8_t>(header->payload[i])} << (8 * i);
  }
  if (n == 0 || n > kMaxFrameBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "trainer message of ", n, " bytes: want 1 to ", kMaxFrameBytes));
  }
  absl::StatusOr<device::ReceivedFds> text =
      device::ReceiveFds(socket, n, 0, timeout_ms);
  if (!text.ok()) return text.status();
  Message m;
  m.fds = std::move(header->fds);
  m.body = nlohmann::json::parse(text->payload, nullptr, false);
  if (m.body.is_discarded() || !m.body.is_object() || m.type().empty()) {
    return absl::InvalidArgumentError(
        "trainer message is not a json object with a string \"type\"");
  }
  return m;
}

}  // namespace zshard::trainer
