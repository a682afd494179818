// NcclCommunicator: NCCL collectives on a private stream, polled with a
// deadline; ncclCommAbort on Abort(), timeout or asynchronous error. bf16
// and fp16 sums are widened to fp32, reduced in fp32 and narrowed once, as
// the host collectives do (NCCL alone would round at every ring step).
#include "client/worker/comm/nccl_communicator.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <atomic>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/worker/comm/nccl_convert.h"
#include "client/worker/comm/nccl_types.h"

namespace zshard::comm {
namespace {

ncclRedOp_t NcclOp(ReduceOp op) {
  return op == ReduceOp::kMax ? ncclMax : ncclSum;
}

absl::Status CudaError(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat("cuda ", what, ": ", cudaGetErrorString(err)));
}

// Waits until a non-blocking NCCL call that returned ncclInProgress has
// been enqueued (later work on the stream is ordered after it) or the
// deadline passes (then returns ncclInProgress).
ncclResult_t Enqueued(ncclComm_t comm, ncclResult_t r, absl::Time deadline) {
  while (r == ncclInProgress && absl::Now() < deadline) {
    std::this_thread::yield();
    ncclCommGetAsyncError(comm, &r);
  }
  return r;
}

bool Is16BitFloat(DataType dtype) {
  return dtype == DataType::kBf16 || dtype == DataType::kFp16;
}

// Thread safety as Communicator's. Abort() may race with an operation: the
// operation's poll loop sees the flag and aborts the NCCL communicator;
// without an operation in flight Abort() aborts it directly.
class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(const CommOptions& options, ncclComm_t comm,
                   cudaStream_t stream, int* scratch)
      : Communicator(options.rank, options.size),
        device_(options.cuda_device),
        timeout_(absl::Milliseconds(options.timeout_ms)),
        comm_(comm),
        stream_(stream),
        scratch_(scratch) {}

  ~NcclCommunicator() override {
    {
      absl::MutexLock lock(&mu_);
      if (comm_ != nullptr) ncclCommAbort(comm_);
      comm_ = nullptr;
    }
    cudaSetDevice(device_);
    if (scratch_ != nullptr) cudaFree(scratch_);
    if (wide_ != nullptr) cudaFree(wide_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  absl::string_view backend() const override { return "nccl"; }

 private:
  // Grows the fp32 scratch of the 16-bit sums to `count` floats.
  absl::Status EnsureWide(size_t count) {
    if (count <= wide_count_) return absl::OkStatus();
    absl::Status s = CudaError(cudaSetDevice(device_), "set device");
    if (s.ok() && wide_ != nullptr) {
      s = CudaError(cudaStreamSynchronize(stream_), "stream synchronize");
    }
    if (!s.ok()) return s;
    if (wide_ != nullptr) cudaFree(wide_);
    wide_ = nullptr;
    wide_count_ = 0;
    s = CudaError(
        cudaMalloc(reinterpret_cast<void**>(&wide_), count * sizeof(float)),
        "malloc");
    if (s.ok()) wide_count_ = count;
    return s;
  }

  // Runs `launch(comm, deadline)`, which enqueues work on stream_, and polls
  // until the stream drains, an asynchronous error shows, Abort() is called
  // or the deadline passes.
  template <typename Fn>
  absl::Status Run(const char* what, Fn launch) {
    const absl::Time deadline = absl::Now() + timeout_;
    ncclComm_t comm;
    {
      absl::MutexLock lock(&mu_);
      if (!failure_.ok()) {
        return absl::Status(
            failure_.code(),
            absl::StrCat("communicator failed earlier: ", failure_.message()));
      }
      if (comm_ == nullptr) {
        return absl::AbortedError(absl::StrCat("nccl ", what, ": aborted"));
      }
      comm = comm_;
      in_flight_ = true;
    }
    absl::Status s = CudaError(cudaSetDevice(device_), "set device");
    if (s.ok()) {
      // A non-blocking communicator may answer ncclInProgress before the
      // work is on the stream: an empty stream then reads as done.
      const ncclResult_t r = Enqueued(comm, launch(comm, deadline), deadline);
      if (r == ncclInProgress) {
        s = absl::DeadlineExceededError(
            absl::StrCat("nccl ", what, ": not enqueued within ",
                         absl::FormatDuration(timeout_)));
      } else if (r != ncclSuccess) {
        s = absl::UnavailableError(
            absl::StrCat("nccl ", what, ": ", ncclGetErrorString(r)));
      }
    }
    while (s.ok()) {
      const cudaError_t q = cudaStreamQuery(stream_);
      if (q == cudaSuccess) break;
      if (q != cudaErrorNotReady) {
        s = CudaError(q, what);
        break;
      }
      ncclResult_t async = ncclSuccess;
      ncclCommGetAsyncError(comm, &async);
      if (async != ncclSuccess && async != ncclInProgress) {
        s = absl::UnavailableError(absl::StrCat(
            "nccl ", what,
            ": peer or network failure: ", ncclGetErrorString(async)));
      } else if (abort_requested_.load()) {
        s = absl::AbortedError(absl::StrCat("nccl ", what, ": aborted"));
      } else if (absl::Now() >= deadline) {
        s = absl::DeadlineExceededError(
            absl::StrCat("nccl ", what, ": timed out after ",
                         absl::FormatDuration(timeout_)));
      } else {
        std::this_thread::yield();
      }
    }
    absl::MutexLock lock(&mu_);
    in_flight_ = false;
    if (!s.ok()) {
      if (comm_ != nullptr) ncclCommAbort(comm_);
      comm_ = nullptr;
      if (failure_.ok()) failure_ = s;
    }
    return s;
  }

  absl::Status DoReduceScatter(const void* sendbuf, void* recvbuf, size_t count,
                               DataType dtype, ReduceOp op) override {
    if (count == 0) return absl::OkStatus();
    if (op == ReduceOp::kSum && Is16BitFloat(dtype)) {
      const size_t n = static_cast<size_t>(size());
      absl::Status s = EnsureWide(count * n + count);
      if (!s.ok()) return s;
      const bool bf16 = dtype == DataType::kBf16;
      return Run("reduce-scatter", [&](ncclComm_t c, absl::Time deadline) {
        float* in = wide_;
        float* out = wide_ + count * n;
        if (LaunchWidenToFloat(bf16, sendbuf, in, count * n, stream_) !=
            cudaSuccess) {
          return ncclUnhandledCudaError;
        }
        ncclResult_t r = Enqueued(
            c,
            ncclReduceScatter(in, out, count, ncclFloat32, ncclSum, c, stream_),
            deadline);
        if (r != ncclSuccess) return r;
        return LaunchNarrowFromFloat(bf16, out, recvbuf, count, stream_) ==
                       cudaSuccess
                   ? ncclSuccess
                   : ncclUnhandledCudaError;
      });
    }
    return Run("reduce-scatter", [&](ncclComm_t c, absl::Time) {
      return ncclReduceScatter(sendbuf, recvbuf, count, NcclType(dtype),
                               NcclOp(op), c, stream_);
    });
  }
  absl::Status DoAllGather(const void* sendbuf, void* recvbuf, size_t count,
                           DataType dtype) override {
    if (count == 0) return absl::OkStatus();
    return Run("all-gather", [&](ncclComm_t c, absl::Time) {
      return ncclAllGather(sendbuf, recvbuf, count, NcclType(dtype), c,
                           stream_);
    });
  }
  absl::Status DoAllReduce(void* buf, size_t count, DataType dtype,
                           ReduceOp op) override {
    if (count == 0) return absl::OkStatus();
    if (op == ReduceOp::kSum && Is16BitFloat(dtype)) {
      absl::Status s = EnsureWide(count);
      if (!s.ok()) return s;
      const bool bf16 = dtype == DataType::kBf16;
      return Run("all-reduce", [&](ncclComm_t c, absl::Time deadline) {
        if (LaunchWidenToFloat(bf16, buf, wide_, count, stream_) !=
            cudaSuccess) {
          return ncclUnhandledCudaError;
        }
        ncclResult_t r =
            Enqueued(c,
                     ncclAllReduce(wide_, wide_, count, ncclFloat32, ncclSum, c,
                                   stream_),
                     deadline);
        if (r != ncclSuccess) return r;
        return LaunchNarrowFromFloat(bf16, wide_, buf, count, stream_) ==
                       cudaSuccess
                   ? ncclSuccess
                   : ncclUnhandledCudaError;
      });
    }
    return Run("all-reduce", [&](ncclComm_t c, absl::Time) {
      return ncclAllReduce(buf, buf, count, NcclType(dtype), NcclOp(op), c,
                           stream_);
    });
  }
  absl::Status DoSend(int peer, const void* buf, size_t bytes,
                      uint32_t) override {
    if (bytes == 0) return absl::OkStatus();
    return Run("send", [&](ncclComm_t c, absl::Time) {
      return ncclSend(buf, bytes, ncclUint8, peer, c, stream_);
    });
  }
  absl::Status DoRecv(int peer, void* buf, size_t bytes, uint32_t) override {
    if (bytes == 0) return absl::OkStatus();
    return Run("recv", [&](ncclComm_t c, absl::Time) {
      return ncclRecv(buf, bytes, ncclUint8, peer, c, stream_);
    });
  }
  absl::Status DoBarrier() override {
    return Run("barrier", [&](ncclComm_t c, absl::Time) {
      return ncclAllReduce(scratch_, scratch_, 1, ncclInt32, ncclSum, c,
                           stream_);
    });
  }
  void DoAbort() override {
    abort_requested_.store(true);
    absl::MutexLock lock(&mu_);
    if (!in_flight_ && comm_ != nullptr) {
      ncclCommAbort(comm_);
      comm_ = nullptr;
    }
  }

  const int device_;
  const absl::Duration timeout_;
  std::atomic<bool> abort_requested_{false};
  absl::Mutex mu_;
  ncclComm_t comm_ ABSL_GUARDED_BY(mu_);
  bool in_flight_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status failure_ ABSL_GUARDED_BY(mu_);
  cudaStream_t stream_;
  int* scratch_;
  // fp32 scratch of the 16-bit sums (grow-only, device memory).
  float* wide_ = nullptr;
  size_t wide_count_ = 0;
};

// Exchanges the unique id: rank 0 creates and publishes it.
absl::StatusOr<ncclUniqueId> ShareUniqueId(const CommOptions& options) {
  ncclUniqueId id;
  const std::string key = absl::StrCat("nccl/", options.group, "/id");
  if (options.rank == 0) {
    ncclResult_t r = ncclGetUniqueId(&id);
    if (r != ncclSuccess) {
      return absl::UnavailableError(absl::StrCat("nccl unique id of group '",
                                                 options.group,
                                                 "': ", ncclGetErrorString(r)));
    }
    if (options.store != nullptr) {
      absl::Status s = options.store->Set(
          key, absl::string_view(id.internal, sizeof(id.internal)));
      if (!s.ok()) return s;
    }
    return id;
  }
  auto value = options.store->Get(key, options.timeout_ms);
  if (!value.ok()) {
    return absl::Status(
        value.status().code(),
        absl::StrCat("nccl rendezvous of group '", options.group,
                     "': ", value.status().message()));
  }
  if (value->size() != sizeof(id.internal)) {
    return absl::InvalidArgumentError(
        absl::StrCat("nccl unique id of group '", options.group, "' has ",
                     value->size(), " bytes, want ", sizeof(id.internal)));
  }
  std::copy(value->begin(), value->end(), id.internal);
  return id;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Communicator>> CreateNcclCommunicator(
    const CommOptions& options) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    cudaGetLastError();
    return absl::UnavailableError("nccl communicator: no cuda device");
  }
  if (options.cuda_device < 0 || options.cuda_device >= devices) {
    return absl::InvalidArgumentError(
        absl::StrCat("nccl communicator: cuda device ", options.cuda_device,
                     " is outside [0, ", devices, ")"));
  }
  absl::Status s = CudaError(cudaSetDevice(options.cuda_device), "set device");
  if (!s.ok()) return s;
  auto id = ShareUniqueId(options);
  if (!id.ok()) return id.status();

  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  ncclResult_t r =
      ncclCommInitRankConfig(&comm, options.size, *id, options.rank, &config);
  const absl::Time deadline =
      absl::Now() + absl::Milliseconds(options.timeout_ms);
  while (r == ncclInProgress) {
    if (absl::Now() >= deadline) {
      ncclCommAbort(comm);
      return absl::DeadlineExceededError(absl::StrCat(
          "nccl rendezvous of group '", options.group, "' timed out"));
    }
    std::this_thread::yield();
    ncclCommGetAsyncError(comm, &r);
  }
  if (r != ncclSuccess) {
    if (comm != nullptr) ncclCommAbort(comm);
    return absl::UnavailableError(absl::StrCat(
        "nccl init of group '", options.group, "': ", ncclGetErrorString(r)));
  }
  cudaStream_t stream = nullptr;
  int* scratch = nullptr;
  s = CudaError(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
                "stream create");
  if (s.ok()) {
    s = CudaError(cudaMalloc(reinterpret_cast<void**>(&scratch), sizeof(int)),
                  "malloc");
  }
  if (!s.ok()) {
    ncclCommAbort(comm);
    if (stream != nullptr) cudaStreamDestroy(stream);
    return s;
  }
  return std::unique_ptr<Communicator>(
      new NcclCommunicator(options, comm, stream, scratch));
}

}  // namespace zshard::comm
