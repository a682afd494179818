// Test utilities for communicators.
#include "tests/worker/comm/comm_test_util.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "client/worker/comm/numerics.h"

namespace zshard::comm::testing {
namespace {

class HostSpace final : public BufferSpace {
 public:
  void* Alloc(int, size_t bytes) override { return std::calloc(bytes + 1, 1); }
  void Free(void* ptr) override { std::free(ptr); }
  void Upload(void* dst, const void* host, size_t bytes) override {
    if (bytes > 0) std::memcpy(dst, host, bytes);
  }
  void Download(void* host, const void* src, size_t bytes) override {
    if (bytes > 0) std::memcpy(host, src, bytes);
  }
};

}  // namespace

void RunRanks(int ranks, const std::function<void(int rank)>& fn) {
  std::vector<std::thread> threads;
  threads.reserve(ranks);
  for (int r = 0; r < ranks; ++r) threads.emplace_back(fn, r);
  for (std::thread& t : threads) t.join();
}

void StoreElement(DataType dtype, void* base, size_t i, double value) {
  switch (dtype) {
    case DataType::kBf16:
      static_cast<uint16_t*>(base)[i] = FloatToBf16(static_cast<float>(value));
      return;
    case DataType::kFp16:
      static_cast<uint16_t*>(base)[i] = FloatToFp16(static_cast<float>(value));
      return;
    case DataType::kFp32:
      static_cast<float*>(base)[i] = static_cast<float>(value);
      return;
    case DataType::kInt64:
      static_cast<int64_t*>(base)[i] = static_cast<int64_t>(value);
      return;
    case DataType::kUint8:
      static_cast<uint8_t*>(base)[i] = static_cast<uint8_t>(value);
      return;
  }
}

double LoadElement(DataType dtype, const void* base, size_t i) {
  switch (dtype) {
    case DataType::kBf16:
      return Bf16ToFloat(static_cast<const uint16_t*>(base)[i]);
    case DataType::kFp16:
      return Fp16ToFloat(static_cast<const uint16_t*>(base)[i]);
    case DataType::kFp32:
      return static_cast<const float*>(base)[i];
    case DataType::kInt64:
      return static_cast<double>(static_cast<const int64_t*>(base)[i]);
    case DataType::kUint8:
      return static_cast<const uint8_t*>(base)[i];
  }
  return 0;
}

Backend GlooBackend() {
  return Backend{"gloo",
                 CommDevice::kCpu,
                 [](int) { return true; },
                 [] { return std::make_unique<HostSpace>(); },
                 HostTransport::kTcp,
                 "tcp"};
}

Backend ShmBackend() {
  return Backend{"shm",
                 CommDevice::kCpu,
                 [](int) { return true; },
                 [] { return std::make_unique<HostSpace>(); },
                 HostTransport::kShm,
                 "shm"};
}

TestBuffer::TestBuffer(BufferSpace* space, int rank, DataType dtype,
                       size_t count)
    : space_(space),
      dtype_(dtype),
      host_(count * DataTypeSize(dtype) + 1, 0),
      ptr_(space->Alloc(rank, count * DataTypeSize(dtype))) {}

TestBuffer::~TestBuffer() { space_->Free(ptr_); }

void TestBuffer::Upload() {
  space_->Upload(ptr_, host_.data(), host_.size() - 1);
}

void TestBuffer::Download() {
  space_->Download(host_.data(), ptr_, host_.size() - 1);
}

}  // namespace zshard::comm::testing
