// Test utilities for communicators: ranks as threads, typed element access,
// and the memory of each backend (host or CUDA device) behind one
// interface, so that one suite runs against every backend.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "client/worker/comm/communicator.h"

namespace zshard::comm::testing {

// Runs fn(rank) on `ranks` threads and joins them.
void RunRanks(int ranks, const std::function<void(int rank)>& fn);

// Writes / reads element `i` of a typed host array as a double (rounded to
// the type when writing).
void StoreElement(DataType dtype, void* base, size_t i, double value);
double LoadElement(DataType dtype, const void* base, size_t i);

// Where a backend's buffers live.
class BufferSpace {
 public:
  virtual ~BufferSpace() = default;
  // Allocates `bytes` zeroed bytes usable by `rank`'s communicator.
  virtual void* Alloc(int rank, size_t bytes) = 0;
  virtual void Free(void* ptr) = 0;
  virtual void Upload(void* dst, const void* host, size_t bytes) = 0;
  virtual void Download(void* host, const void* src, size_t bytes) = 0;
};

// A backend under test.
struct Backend {
  std::string name;
  CommDevice device;
  // Whether a group of `ranks` ranks can run here (e.g. enough GPUs).
  std::function<bool(int ranks)> can_run;
  std::function<std::unique_ptr<BufferSpace>()> make_space;
  // CommOptions::host_transport of its communicators (kCpu only).
  HostTransport host_transport = HostTransport::kAuto;
  // What their transport() reports.
  std::string transport;
};

// Gloo over host memory on TCP pairs; always runnable.
Backend GlooBackend();
// Gloo over host memory on shared memory; always runnable.
Backend ShmBackend();

// A host or device buffer of one rank, with a host mirror.
class TestBuffer {
 public:
  TestBuffer(BufferSpace* space, int rank, DataType dtype, size_t count);
  ~TestBuffer();
  TestBuffer(const TestBuffer&) = delete;
  TestBuffer& operator=(const TestBuffer&) = delete;

  void* data() { return ptr_; }
  void Set(size_t i, double v) { StoreElement(dtype_, host_.data(), i, v); }
  double Get(size_t i) const { return LoadElement(dtype_, host_.data(), i); }
  void Upload();    // host mirror -> buffer
  void Download();  // buffer -> host mirror

 private:
  BufferSpace* space_;
  DataType dtype_;
  std::vector<char> host_;
  void* ptr_;
};

}  // namespace zshard::comm::testing
