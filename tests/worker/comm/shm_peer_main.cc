// A rank of the multi-process shm test (shm_process_test.cc): joins a group
// over shared memory through a FileKvStore and runs fp32 all-reduces,
// checking each result. Usage: comm_shm_peer DIR RANK SIZE ITERATIONS
// TIMEOUT_MS (ITERATIONS 0: until an operation fails). It sets
// "loop/<rank>" once three iterations are done and, at the end,
// "result/<rank>" to "<status code> <ms the last operation took>".
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/worker/comm/communicator.h"
#include "client/worker/comm/file_kv_store.h"

namespace zshard::comm {
namespace {

constexpr size_t kCount = size_t{1} << 20;  // 4 MiB of fp32

int Run(const std::string& dir, int rank, int size, int64_t iterations,
        int64_t timeout_ms) {
  FileKvStore store(dir);
  CommOptions options;
  options.rank = rank;
  options.size = size;
  options.group = "processes";
  options.store = &store;
  options.timeout_ms = timeout_ms;
  options.host_transport = HostTransport::kShm;
  auto comm = CreateCommunicator(options);
  if (!comm.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", rank,
                 comm.status().ToString().c_str());
    return 2;
  }
  if ((*comm)->transport() != "shm") return 3;
  std::vector<float> buf(kCount);
  absl::Status status;
  absl::Duration last;
  for (int64_t it = 0; iterations == 0 || it < iterations; ++it) {
    for (size_t i = 0; i < kCount; ++i) {
      buf[i] = static_cast<float>((i + static_cast<size_t>(rank)) % 7);
    }
    const absl::Time start = absl::Now();
    status =
        (*comm)->AllReduce(buf.data(), kCount, DataType::kFp32, ReduceOp::kSum);
    last = absl::Now() - start;
    if (!status.ok()) break;
    for (size_t i = 0; i < kCount; i += 4099) {
      float want = 0;
      for (int r = 0; r < size; ++r) {
        want += static_cast<float>((i + static_cast<size_t>(r)) % 7);
      }
      if (buf[i] != want) {
        std::fprintf(stderr, "rank %d: element %zu is %f, want %f\n", rank, i,
                     buf[i], want);
        return 4;
      }
    }
    if (it == 2 && !store.Set(absl::StrCat("loop/", rank), "1").ok()) return 5;
  }
  std::fprintf(stderr, "rank %d: %s\n", rank, status.ToString().c_str());
  const std::string result = absl::StrCat(static_cast<int>(status.code()), " ",
                                          absl::ToInt64Milliseconds(last));
  return store.Set(absl::StrCat("result/", rank), result).ok() ? 0 : 5;
}

}  // namespace
}  // namespace zshard::comm

int main(int argc, char** argv) {
  int rank = 0;
  int size = 0;
  int64_t iterations = 0;
  int64_t timeout_ms = 0;
  if (argc != 6 || !absl::SimpleAtoi(argv[2], &rank) ||
      !absl::SimpleAtoi(argv[3], &size) ||
      !absl::SimpleAtoi(argv[4], &iterations) ||
      !absl::SimpleAtoi(argv[5], &timeout_ms)) {
    std::fprintf(stderr,
                 "usage: comm_shm_peer DIR RANK SIZE ITERATIONS TIMEOUT_MS\n");
    return 1;
  }
  return zshard::comm::Run(argv[1], rank, size, iterations, timeout_ms);
}
