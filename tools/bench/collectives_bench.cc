// zshard-bench collectives: reduce-scatter, all-gather and all-reduce
// bandwidth of a communicator whose ranks run as threads of this process
// (or, with --processes, as forked processes meeting through a directory
// store) over loopback, with NCCL-tests' algbw/busbw definitions, next to the
// bound of one TCP loopback stream and, with --baseline, torch.distributed's
// Gloo backend measured in the same run. With --device cuda the same
// collectives are also timed as raw NCCL calls in the same run, and the
// Communicator's bandwidth is reported as a fraction of theirs.
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "client/worker/comm/comm_buffer.h"
#include "client/worker/comm/communicator.h"
#include "client/worker/comm/file_kv_store.h"
#include "client/worker/comm/memory_kv_store.h"
#include "common/status.h"
#include "nlohmann/json.hpp"
#include "tools/bench/baseline.h"
#include "tools/bench/bench_commands.h"
#include "tools/bench/bench_flags.h"
#include "tools/bench/forked_ranks.h"
#include "tools/bench/raw_nccl.h"
#include "tools/bench/tcp_bound.h"

ABSL_FLAG(int64_t, bytes, int64_t{64} << 20,
          "bytes of the whole buffer (reduce-scatter input)");
ABSL_FLAG(std::string, dtype, "fp32", "fp32, bf16, fp16, int64 or uint8");
ABSL_FLAG(int64_t, iters, 5, "timed iterations");
ABSL_FLAG(int64_t, chunk_bytes, 0, "transport chunk (0: its default)");
ABSL_FLAG(int, depth, 0, "transport pipeline depth (0: its default)");
ABSL_FLAG(int64_t, timeout_ms, 120000, "each collective's timeout");
ABSL_FLAG(std::string, baseline_script, "",
          "torch_gloo_collectives.py (default: found from the source tree)");
ABSL_FLAG(bool, processes, false, "one forked process per rank");
ABSL_FLAG(std::string, algo, "pairwise", "ring or pairwise");
ABSL_FLAG(std::string, transport, "auto", "auto, tcp or shm");

namespace zshard::bench {
namespace {

using comm::CommBuffer;
using comm::CommDevice;
using comm::Communicator;
using comm::DataType;

struct Flags {
  int ranks = 4;
  size_t bytes = size_t{64} << 20;
  CommDevice device = CommDevice::kCpu;
  DataType dtype = DataType::kFp32;
  int iters = 5;
  bool json = false;
  bool baseline = false;
  bool processes = false;
  bool ring = false;
  comm::HostTransport transport = comm::HostTransport::kAuto;
  std::string baseline_script;
  size_t chunk_bytes = 0;  // 0: the transport's default
  int depth = 0;
  int64_t timeout_ms = 120000;
};

const char kUsage[] =
    "usage: zshard-bench collectives [--ranks N] [--bytes B] "
    "[--device cpu|cuda]\n"
    "         [--dtype fp32|bf16|fp16] [--iters K] [--output table|json]\n"
    "         [--chunk-bytes C] [--depth D] [--timeout-ms T] [--baseline] "
    "[--baseline-script "
    "PATH]\n"
    "         [--processes] [--algo ring|pairwise] [--transport "
    "auto|tcp|shm]\n"
    "  B is the whole buffer (reduce-scatter input, all-gather output).\n"
    "  --baseline runs torch_gloo_collectives.py (/usr/bin/python3) in the\n"
    "  same run and prints ratios.\n"
    "  --processes runs one forked process per rank (as torch does) instead\n"
    "  of one thread per rank. --algo picks the gloo reduce-scatter of fp32\n"
    "  and integers (default pairwise; bf16 and fp16 always use it).\n"
    "  --transport picks how cpu ranks exchange bytes (default auto: shared\n"
    "  memory when every rank runs on this host, else tcp). --chunk-bytes\n"
    "  and --depth default to the transport's own.\n"
    "  --device cuda puts rank r on CUDA device r (--ranks at most the\n"
    "  devices present) and also times the same calls as raw NCCL (one\n"
    "  thread per rank, blocking communicator, stream synchronize) in the\n"
    "  same run: ratios.<op>_vs_raw_nccl is raw time / our time (1.0: as\n"
    "  fast as raw NCCL). The Communicator sums bf16 and fp16 in fp32, raw\n"
    "  NCCL in the type itself: compare fp32 for the same calls.\n";

FlagList CollectivesFlags() {
  return {FlagOf(FLAGS_ranks),
          FlagOf(FLAGS_bytes),
          FlagOf(FLAGS_device),
          FlagOf(FLAGS_dtype),
          FlagOf(FLAGS_iters),
          FlagOf(FLAGS_output),
          FlagOf(FLAGS_chunk_bytes),
          FlagOf(FLAGS_depth),
          FlagOf(FLAGS_timeout_ms),
          FlagOf(FLAGS_baseline),
          FlagOf(FLAGS_baseline_script),
          FlagOf(FLAGS_processes),
          FlagOf(FLAGS_algo),
          FlagOf(FLAGS_transport)};
}

// Reads the flags into `f`; InvalidArgument naming a bad one.
absl::Status ReadFlags(Flags* f) {
  constexpr int64_t kMaxBytes = int64_t{1} << 40;
  ZSHARD_RETURN_IF_ERROR(CheckRange(FLAGS_ranks, 1, 64));
  ZSHARD_RETURN_IF_ERROR(CheckRange(FLAGS_bytes, 0, kMaxBytes));
  ZSHARD_RETURN_IF_ERROR(CheckRange(FLAGS_iters, 1, 1 << 30));
  ZSHARD_RETURN_IF_ERROR(CheckRange(FLAGS_chunk_bytes, 0, kMaxBytes));
  f->ranks = static_cast<int>(absl::GetFlag(FLAGS_ranks));
  f->bytes = static_cast<size_t>(absl::GetFlag(FLAGS_bytes));
  f->iters = static_cast<int>(absl::GetFlag(FLAGS_iters));
  f->chunk_bytes = static_cast<size_t>(absl::GetFlag(FLAGS_chunk_bytes));
  f->depth = absl::GetFlag(FLAGS_depth);
  f->timeout_ms = absl::GetFlag(FLAGS_timeout_ms);
  const std::string device = absl::GetFlag(FLAGS_device);
  if (device != "cpu" && device != "cuda") {
    return absl::InvalidArgumentError("--device must be cpu or cuda");
  }
  f->device = device == "cpu" ? CommDevice::kCpu : CommDevice::kCuda;
  ZSHARD_RETURN_IF_ERROR(CheckOutput());
  f->json = absl::GetFlag(FLAGS_output) == "json";
  absl::StatusOr<DataType> dtype =
      comm::ParseDataType(absl::GetFlag(FLAGS_dtype));
  if (!dtype.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--dtype: ", dtype.status().message()));
  }
  f->dtype = *dtype;
  const std::string algo = absl::GetFlag(FLAGS_algo);
  if (algo != "ring" && algo != "pairwise") {
    return absl::InvalidArgumentError("--algo must be ring or pairwise");
  }
  f->ring = algo == "ring";
  absl::StatusOr<comm::HostTransport> transport =
      comm::ParseHostTransport(absl::GetFlag(FLAGS_transport));
  if (!transport.ok()) {
    return absl::InvalidArgumentError("--transport must be auto, tcp or shm");
  }
  f->transport = *transport;
  f->baseline = absl::GetFlag(FLAGS_baseline);
  f->baseline_script = absl::GetFlag(FLAGS_baseline_script);
  f->processes = absl::GetFlag(FLAGS_processes);
  return absl::OkStatus();
}

double Seconds(std::chrono::steady_clock::time_point a,
               std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

struct OpResult {
  std::string op;
  double seconds = 0;  // median over iterations of the slowest rank
  double algbw = 0;
  double busbw = 0;
};

constexpr int kOps = 3;
const char* const kOpNames[kOps] = {"reduce-scatter", "all-gather",
                                    "all-reduce"};

// Elements per rank's block and bytes of the whole buffer.
size_t BlockCount(const Flags& f) {
  return f.bytes / comm::DataTypeSize(f.dtype) / f.ranks;
}
size_t TotalBytes(const Flags& f) {
  return BlockCount(f) * f.ranks * comm::DataTypeSize(f.dtype);
}

// One rank's part: joins the group through `store` and times every
// collective `iters` times after one warm-up. Returns seconds, op-major
// (times[op * iters + iter]), and sets `transport` to how the bytes moved.
absl::StatusOr<std::vector<double>> RunRank(const Flags& f, int rank,
                                            comm::KvStore* store,
                                            std::string* transport) {
  const int n = f.ranks;
  const size_t count = BlockCount(f);
  const size_t total = TotalBytes(f);
  comm::CommOptions o;
  o.rank = rank;
  o.size = n;
  o.group = "bench";
  o.store = store;
  o.device = f.device;
  o.cuda_device = rank;
  o.timeout_ms = f.timeout_ms;
  o.chunk_bytes = f.chunk_bytes;
  o.pipeline_depth = f.depth;
  o.gloo_ring = f.ring;
  o.host_transport = f.transport;
  auto c = comm::CreateCommunicator(o);
  if (!c.ok()) return c.status();
  *transport = std::string((*c)->transport());
  auto full = comm::AllocateCommBuffer(f.device, rank, total);
  if (!full.ok()) return full.status();
  auto part = comm::AllocateCommBuffer(f.device, rank, total / n);
  if (!part.ok()) return part.status();
  Communicator& comm = **c;
  std::function<absl::Status()> ops[kOps] = {
      [&] {
        return comm.ReduceScatter((*full)->data(), (*part)->data(), count,
                                  f.dtype, comm::ReduceOp::kSum);
      },
      [&] {
        return comm.AllGather((*part)->data(), (*full)->data(), count, f.dtype);
      },
      [&] {
        return comm.AllReduce((*full)->data(), count * n, f.dtype,
                              comm::ReduceOp::kSum);
      }};
  std::vector<double> times(kOps * f.iters);
  for (int op = 0; op < kOps; ++op) {
    for (int it = -1; it < f.iters; ++it) {  // one warm-up
      absl::Status s = comm.Barrier();
      const auto start = std::chrono::steady_clock::now();
      if (s.ok()) s = ops[op]();
      if (!s.ok()) {
        return absl::Status(s.code(),
                            absl::StrCat(kOpNames[op], " on rank ", rank,
                                         " iteration ", it, ": ", s.message()));
      }
      if (it >= 0) {
        times[op * f.iters + it] =
            Seconds(start, std::chrono::steady_clock::now());
      }
    }
  }
  return times;
}

// Runs every rank as a thread of this process.
absl::Status RunThreads(const Flags& f,
                        std::vector<std::vector<double>>* rank_times,
                        std::string* transport) {
  std::vector<absl::Status> status(f.ranks);
  std::vector<std::string> transports(f.ranks);
  comm::MemoryKvStore store;
  std::vector<std::thread> threads;
  for (int r = 0; r < f.ranks; ++r) {
    threads.emplace_back([&, r] {
      auto times = RunRank(f, r, &store, &transports[r]);
      status[r] = times.status();
      if (times.ok()) (*rank_times)[r] = *std::move(times);
    });
  }
  for (std::thread& t : threads) t.join();
  for (const absl::Status& s : status) {
    if (!s.ok()) return s;
  }
  *transport = transports[0];
  return absl::OkStatus();
}

// Runs every rank as a forked process (forked before this process starts
// any thread); the ranks meet through a FileKvStore in a fresh temporary
// directory.
absl::Status RunProcesses(const Flags& f,
                          std::vector<std::vector<double>>* rank_times,
                          std::string* transport) {
  char tmpl[] = "/tmp/zshard_bench_XXXXXX";
  if (mkdtemp(tmpl) == nullptr) {
    return absl::InternalError("cannot create a rendezvous directory");
  }
  const std::string dir = tmpl;
  absl::StatusOr<std::vector<RankReport>> reports =
      RunForkedRanks(f.ranks, [&](int r) -> absl::StatusOr<RankReport> {
        comm::FileKvStore store(dir);
        RankReport report;
        ZSHARD_ASSIGN_OR_RETURN(report.times,
                                RunRank(f, r, &store, &report.label));
        return report;
      });
  // Ranks wrote one small file per key; the directory goes with them.
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
  if (!reports.ok()) return reports.status();
  for (int r = 0; r < f.ranks; ++r) {
    (*rank_times)[r] = std::move((*reports)[r].times);
    if ((*rank_times)[r].size() != static_cast<size_t>(kOps * f.iters)) {
      return absl::UnavailableError(
          absl::StrCat("rank ", r, " process reported too few times"));
    }
  }
  *transport = (*reports)[0].label;
  return absl::OkStatus();
}

// Op `op`'s result from every rank's times (times[rank][op * iters + i]).
OpResult Summarize(const Flags& f, int op,
                   const std::vector<std::vector<double>>& times) {
  OpResult r;
  r.op = kOpNames[op];
  r.seconds = MedianOfSlowest(times, op * f.iters, f.iters);
  r.algbw = static_cast<double>(TotalBytes(f)) / r.seconds;
  const double factor = (op == 2 ? 2.0 : 1.0) * (f.ranks - 1) / f.ranks;
  r.busbw = r.algbw * factor;
  return r;
}

// Runs every collective `iters` times on every rank; fills `results`.
absl::Status RunCollectives(const Flags& f, std::vector<OpResult>* results,
                            std::string* transport) {
  std::vector<std::vector<double>> rank_times(f.ranks);
  ZSHARD_RETURN_IF_ERROR(f.processes ? RunProcesses(f, &rank_times, transport)
                                     : RunThreads(f, &rank_times, transport));
  for (int op = 0; op < kOps; ++op) {
    results->push_back(Summarize(f, op, rank_times));
  }
  return absl::OkStatus();
}

// Finds the torch baseline script: the flag, then ../shared/baselines
// relative to the working directory, the source tree and the binary.
std::string BaselineScript(const Flags& f) {
  if (!f.baseline_script.empty()) return f.baseline_script;
  std::vector<std::string> candidates = {
      "../shared/baselines/torch_gloo_collectives.py"};
  if (const char* src = std::getenv("ZSHARD_SOURCE_DIR")) {
    candidates.push_back(
        absl::StrCat(src, "/../shared/baselines/torch_gloo_collectives.py"));
  }
  // build/bin/zshard-bench -> <repo>/../shared/baselines
  char exe[4096];
  const ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (len > 0) {
    std::string dir(exe, static_cast<size_t>(len));
    dir = dir.substr(0, dir.rfind('/'));
    candidates.push_back(
        dir + "/../../../shared/baselines/torch_gloo_collectives.py");
  }
  for (const std::string& c : candidates) {
    if (access(c.c_str(), R_OK) == 0) return c;
  }
  return candidates.front();
}

// Runs the torch baseline; returns its JSON or a discarded value.
nlohmann::json RunBaseline(const Flags& f) {
  absl::StatusOr<nlohmann::json> j = RunJsonCommand(absl::StrCat(
      "/usr/bin/python3 ", BaselineScript(f), " --ranks ", f.ranks, " --mib ",
      std::max<size_t>(1, f.bytes >> 20), " 2>/dev/null"));
  if (!j.ok()) {
    std::fprintf(stderr, "zshard-bench collectives: %s\n",
                 std::string(j.status().message()).c_str());
    return nlohmann::json::value_t::discarded;
  }
  return *std::move(j);
}

// Times the same collectives as raw NCCL calls; fills `results` like
// RunCollectives.
absl::Status RunRawNccl(const Flags& f, std::vector<OpResult>* results) {
  ZSHARD_ASSIGN_OR_RETURN(
      std::vector<std::vector<double>> times,
      TimeRawNccl(f.ranks, BlockCount(f), f.dtype, f.iters));
  for (int op = 0; op < kOps; ++op) results->push_back(Summarize(f, op, times));
  return absl::OkStatus();
}

// "reduce_scatter_vs_raw_nccl" for "reduce-scatter".
std::string RawRatioKey(std::string op) {
  std::replace(op.begin(), op.end(), '-', '_');
  return op + "_vs_raw_nccl";
}

}  // namespace

int RunCollectivesBench(int argc, char** argv) {
  Flags f;
  if (const int rc = ParseBenchFlags(
          "collectives", argc, argv, CollectivesFlags(), kUsage,
          [&f](const ParsedCommandLine&) { return ReadFlags(&f); });
      rc >= 0) {
    return rc;
  }
  std::vector<OpResult> results;
  std::string transport;
  absl::Status s = RunCollectives(f, &results, &transport);
  if (!s.ok()) {
    std::fprintf(stderr, "zshard-bench collectives: %s\n",
                 s.ToString().c_str());
    return 1;
  }
  const double tcp = MeasureTcpStream(size_t{256} << 20);
  // The most bus bandwidth a TCP reduce-scatter of this size can reach here.
  double mesh = 0;
  if (f.device == CommDevice::kCpu && f.ranks >= 2) {
    auto bound = MeasureTcpMeshBound(f.ranks, TotalBytes(f) / f.ranks,
                                     std::max(3, f.iters));
    if (bound.ok()) {
      mesh = *bound;
    } else {
      std::fprintf(stderr, "zshard-bench collectives: %s\n",
                   std::string(bound.status().message()).c_str());
    }
  }
  nlohmann::json baseline = nlohmann::json::value_t::discarded;
  if (f.baseline) baseline = RunBaseline(f);
  const bool have_baseline = f.baseline && !baseline.is_discarded() &&
                             baseline.contains("allreduce_busbw") &&
                             baseline.contains("allgather_busbw");
  const std::string backend = f.device == CommDevice::kCpu ? "gloo" : "nccl";
  std::vector<OpResult> raw;
  std::string raw_error;
  if (f.device == CommDevice::kCuda) {
    s = RunRawNccl(f, &raw);
    if (!s.ok()) {
      raw_error = std::string(s.message());
      std::fprintf(stderr, "zshard-bench collectives: %s\n", raw_error.c_str());
    }
  }

  nlohmann::json out;
  out["backend"] = backend;
  out["transport"] = transport;
  out["ranks"] = f.ranks;
  out["bytes"] = f.bytes;
  out["dtype"] = std::string(comm::DataTypeName(f.dtype));
  out["iters"] = f.iters;
  out["ranks_as"] = f.processes ? "processes" : "threads";
  out["reduce_scatter_algorithm"] = f.ring && f.dtype != DataType::kBf16 &&
                                            f.dtype != DataType::kFp16 &&
                                            f.ranks >= 3
                                        ? "ring"
                                        : "pairwise";
  out["chunk_bytes"] = f.chunk_bytes;
  out["pipeline_depth"] = f.depth;
  out["tcp_stream_bps"] = tcp;
  if (mesh > 0) out["tcp_mesh_bound_busbw_bps"] = mesh;
  for (const OpResult& r : results) {
    out["results"].push_back(
        {{"op", r.op},
         {"time_s", r.seconds},
         {"algbw_bps", r.algbw},
         {"busbw_bps", r.busbw},
         {"tcp_fraction", tcp > 0 ? r.busbw / tcp : 0},
         {"aggregate_tcp_fraction", tcp > 0 ? f.ranks * r.busbw / tcp : 0},
         {"tcp_mesh_fraction", mesh > 0 ? r.busbw / mesh : 0}});
  }
  if (have_baseline) {
    const double ar = baseline["allreduce_busbw"].get<double>();
    const double ag = baseline["allgather_busbw"].get<double>();
    out["baseline"] = baseline;
    out["ratios"] = {
        {"reduce_scatter_vs_torch_allreduce", results[0].busbw / ar},
        {"allgather_vs_torch_allgather", results[1].busbw / ag},
        {"allreduce_vs_torch_allreduce", results[2].busbw / ar}};
    if (mesh > 0)
      out["ratios"]["tcp_mesh_bound_vs_torch_allreduce"] = mesh / ar;
  }
  if (!raw.empty()) {
    for (size_t op = 0; op < raw.size(); ++op) {
      out["raw_nccl"].push_back({{"op", raw[op].op},
                                 {"time_s", raw[op].seconds},
                                 {"algbw_bps", raw[op].algbw},
                                 {"busbw_bps", raw[op].busbw}});
      out["ratios"][RawRatioKey(raw[op].op)] =
          raw[op].seconds / results[op].seconds;
    }
  } else if (!raw_error.empty()) {
    out["raw_nccl_error"] = raw_error;
  }
  if (f.json) {
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  std::printf(
      "collectives: %s over %s, %d ranks (%s), %.1f MiB %s, median of %d\n",
      backend.c_str(), transport.c_str(), f.ranks,
      f.processes ? "processes" : "threads", f.bytes / 1048576.0,
      std::string(comm::DataTypeName(f.dtype)).c_str(), f.iters);
  // of_tcp: one rank's link rate (busbw) against one loopback stream;
  // n*busbw/tcp: all ranks' traffic, which shares the same cores, against it;
  // of_mesh: against the tcp mesh bound below.
  std::printf("%-16s %10s %12s %12s %8s %12s %8s\n", "op", "time_ms",
              "algbw_GB/s", "busbw_GB/s", "of_tcp", "n*busbw/tcp", "of_mesh");
  for (const OpResult& r : results) {
    std::printf("%-16s %10.2f %12.3f %12.3f %7.0f%% %11.0f%% %7.0f%%\n",
                r.op.c_str(), r.seconds * 1e3, r.algbw / 1e9, r.busbw / 1e9,
                tcp > 0 ? 100 * r.busbw / tcp : 0,
                tcp > 0 ? 100 * f.ranks * r.busbw / tcp : 0,
                mesh > 0 ? 100 * r.busbw / mesh : 0);
  }
  std::printf("tcp loopback, one stream: %.3f GB/s\n", tcp / 1e9);
  if (mesh > 0) {
    std::printf(
        "tcp mesh bound: %.3f GB/s busbw (%d processes exchanging the "
        "reduce-scatter's bytes over loopback tcp, nothing else)\n",
        mesh / 1e9, f.ranks);
  }
  if (have_baseline) {
    std::printf(
        "torch gloo (fp32): all-reduce busbw %.3f GB/s, all-gather busbw "
        "%.3f GB/s, its tcp stream %.3f GB/s\n",
        baseline["allreduce_busbw"].get<double>() / 1e9,
        baseline["allgather_busbw"].get<double>() / 1e9,
        baseline.value("tcp_stream_bps", 0.0) / 1e9);
    std::printf(
        "ratios: reduce-scatter/torch all-reduce %.2fx, all-gather/torch "
        "all-gather %.2fx, all-reduce/torch all-reduce %.2fx\n",
        out["ratios"]["reduce_scatter_vs_torch_allreduce"].get<double>(),
        out["ratios"]["allgather_vs_torch_allgather"].get<double>(),
        out["ratios"]["allreduce_vs_torch_allreduce"].get<double>());
    if (mesh > 0) {
      std::printf(
          "tcp mesh bound/torch all-reduce %.2fx\n",
          out["ratios"]["tcp_mesh_bound_vs_torch_allreduce"].get<double>());
    }
  } else if (f.baseline) {
    std::printf("torch baseline: not available\n");
  }
  if (!raw.empty()) {
    std::printf("raw nccl, same calls in the same run (ours/raw busbw):");
    for (size_t op = 0; op < raw.size(); ++op) {
      std::printf(" %s %.3f GB/s (%.3fx)", raw[op].op.c_str(),
                  raw[op].busbw / 1e9, raw[op].seconds / results[op].seconds);
    }
    std::printf("\n");
  }
  return 0;
}

}  // namespace zshard::bench
