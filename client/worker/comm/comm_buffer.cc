// Host CommBuffer.
#include "client/worker/comm/comm_buffer.h"

#include <cstring>
#include <vector>

namespace zshard::comm {
namespace {

class HostCommBuffer final : public CommBuffer {
 public:
  explicit HostCommBuffer(size_t bytes) : bytes_(bytes, 0) {}
  void* data() override { return bytes_.data(); }
  size_t size() const override { return bytes_.size(); }
  absl::Status CopyFromHost(const void* host, size_t bytes) override {
    if (bytes > 0) std::memcpy(bytes_.data(), host, bytes);
    return absl::OkStatus();
  }
  absl::Status CopyToHost(void* host, size_t bytes) const override {
    if (bytes > 0) std::memcpy(host, bytes_.data(), bytes);
    return absl::OkStatus();
  }

 private:
  std::vector<char> bytes_;
};

}  // namespace

std::unique_ptr<CommBuffer> AllocateHostCommBuffer(size_t bytes) {
  return std::make_unique<HostCommBuffer>(bytes);
}

}  // namespace zshard::comm
