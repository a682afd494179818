// TimeRawNccl: one thread per rank calling NCCL directly. Built only with
// CUDA.
#include "tools/bench/raw_nccl.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "client/worker/comm/nccl_types.h"

namespace zshard::bench {
namespace {

using comm::DataType;

// A reusable barrier of `n` threads that any thread can break (then every
// wait, present and future, returns false).
class Barrier {
 public:
  explicit Barrier(int n) : n_(n) {}
  bool Wait() {
    absl::MutexLock lock(&mu_);
    if (broken_) return false;
    const int generation = generation_;
    if (++arrived_ == n_) {
      arrived_ = 0;
      ++generation_;
      cv_.SignalAll();
      return true;
    }
    while (!broken_ && generation_ == generation) cv_.Wait(&mu_);
    return !broken_;
  }
  void Break() {
    absl::MutexLock lock(&mu_);
    broken_ = true;
    cv_.SignalAll();
  }

 private:
  const int n_;
  absl::Mutex mu_;
  absl::CondVar cv_;
  int arrived_ ABSL_GUARDED_BY(mu_) = 0;
  int generation_ ABSL_GUARDED_BY(mu_) = 0;
  bool broken_ ABSL_GUARDED_BY(mu_) = false;
};

absl::Status Cuda(cudaError_t err, int rank, const char* what) {
  if (err == cudaSuccess) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat(
      "raw nccl rank ", rank, ": cuda ", what, ": ", cudaGetErrorString(err)));
}

absl::Status Nccl(ncclResult_t r, int rank, const char* what) {
  if (r == ncclSuccess) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat("raw nccl rank ", rank, ": ", what,
                                             ": ", ncclGetErrorString(r)));
}

// One rank's part; returns its times.
absl::StatusOr<std::vector<double>> RunRank(int rank, int ranks,
                                            const ncclUniqueId& id,
                                            size_t count, DataType dtype,
                                            int iters, Barrier* barrier) {
  const size_t total = count * ranks * comm::DataTypeSize(dtype);
  const ncclDataType_t type = NcclType(dtype);
  ncclComm_t nccl = nullptr;
  cudaStream_t stream = nullptr;
  void* full = nullptr;
  void* part = nullptr;
  std::vector<double> times(3 * iters);
  absl::Status s = Cuda(cudaSetDevice(rank), rank, "set device");
  if (s.ok()) s = Nccl(ncclCommInitRank(&nccl, ranks, id, rank), rank, "init");
  if (s.ok()) s = Cuda(cudaStreamCreate(&stream), rank, "stream");
  if (s.ok()) s = Cuda(cudaMalloc(&full, total), rank, "malloc");
  if (s.ok()) s = Cuda(cudaMalloc(&part, total / ranks), rank, "malloc");
  if (s.ok()) s = Cuda(cudaMemset(full, 0, total), rank, "memset");
  if (s.ok()) s = Cuda(cudaMemset(part, 0, total / ranks), rank, "memset");
  for (int op = 0; op < 3 && s.ok(); ++op) {
    for (int it = -1; it < iters && s.ok(); ++it) {  // one warm-up
      if (!barrier->Wait()) {
        s = absl::UnavailableError("raw nccl: another rank failed");
        break;
      }
      const auto start = std::chrono::steady_clock::now();
      ncclResult_t r =
          op == 0   ? ncclReduceScatter(full, part, count, type, ncclSum, nccl,
                                        stream)
          : op == 1 ? ncclAllGather(part, full, count, type, nccl, stream)
                    : ncclAllReduce(full, full, count * ranks, type, ncclSum,
                                    nccl, stream);
      s = Nccl(r, rank, "collective");
      if (s.ok()) s = Cuda(cudaStreamSynchronize(stream), rank, "sync");
      if (s.ok() && it >= 0) {
        times[op * iters + it] = std::chrono::duration<double>(
                                     std::chrono::steady_clock::now() - start)
                                     .count();
      }
    }
  }
  if (!s.ok()) barrier->Break();
  if (nccl != nullptr) {
    if (s.ok()) {
      ncclCommDestroy(nccl);
    } else {
      ncclCommAbort(nccl);
    }
  }
  if (full != nullptr) cudaFree(full);
  if (part != nullptr) cudaFree(part);
  if (stream != nullptr) cudaStreamDestroy(stream);
  if (!s.ok()) return s;
  return times;
}

}  // namespace

absl::StatusOr<std::vector<std::vector<double>>> TimeRawNccl(int ranks,
                                                             size_t count,
                                                             DataType dtype,
                                                             int iters) {
  ncclUniqueId id;
  if (absl::Status s = Nccl(ncclGetUniqueId(&id), 0, "unique id"); !s.ok()) {
    return s;
  }
  Barrier barrier(ranks);
  std::vector<absl::StatusOr<std::vector<double>>> results(ranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      results[r] = RunRank(r, ranks, id, count, dtype, iters, &barrier);
    });
  }
  for (std::thread& t : threads) t.join();
  std::vector<std::vector<double>> times;
  for (auto& result : results) {
    if (!result.ok()) return result.status();
    times.push_back(*std::move(result));
  }
  return times;
}

}  // namespace zshard::bench
