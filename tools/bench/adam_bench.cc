// zshard-bench adam: throughput of the AdamW shard step (bf16 params and
// grads, fp32 master/m/v: 28 bytes per parameter loaded and stored) against
// the fastest the same loads and stores go on the same threads (the bound,
// bandwidth.h) and, with --baseline, against torch.optim.Adam run in the
// same invocation. --device cuda measures the CUDA kernel against
// device-to-device copy bandwidth.
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "client/worker/optim/adam.h"
#include "client/worker/optim/cpu_adam.h"
#include "client/worker/optim/float_bits.h"
#include "common/status.h"
#include "nlohmann/json.hpp"
#include "tools/bench/bandwidth.h"
#include "tools/bench/baseline.h"
#include "tools/bench/bench_commands.h"
#include "tools/bench/bench_flags.h"
#if defined(ZSHARD_HAVE_CUDA_ADAM)
#include "client/worker/cuda/cuda_util.h"
#include "client/worker/optim/adam_cuda.h"
#endif

ABSL_FLAG(int64_t, threads, 0, "cpu threads (0: hardware concurrency)");
ABSL_FLAG(std::string, path, "auto",
          "the cpu kernel: auto, scalar, vec128, avx2 or avx512");
ABSL_FLAG(std::string, baselines_dir, "",
          "where torch_adam.py lives (default <source>/../shared/baselines)");

namespace zshard::bench {
namespace {

using optim::CpuAdamPath;
using plan::DType;

constexpr double kBytesPerParam = 28.0;
// On the CPU a plain store first reads the line it writes: the param's
// lines (2 bytes a param) are read too, by the step and the bound alike.
constexpr double kDramBytesPerParam = 30.0;
// The bound is the fastest of this many passes (at least one per step).
constexpr int kBoundPasses = 20;

struct Flags {
  int64_t params = int64_t{1} << 25;
  int threads = 0;
  int steps = 10;
  std::string device = "cpu";
  std::string output = "table";
  CpuAdamPath path = CpuAdamPath::kAuto;
  bool baseline = false;
  std::string baselines_dir;
};

constexpr char kUsage[] =
    "usage: zshard-bench adam [--params N] [--threads T] [--steps S]\n"
    "                         [--device cpu|cuda] [--output table|json]\n"
    "                         [--path auto|scalar|vec128|avx2|avx512]\n"
    "                         [--baseline] [--baselines-dir DIR]\n"
    "  --params N       parameters in the shard (default 33554432)\n"
    "  --threads T      cpu threads (default: hardware concurrency)\n"
    "  --steps S        timed steps after one warm-up (default 10)\n"
    "  --baseline       also run torch.optim.Adam (torch_adam.py) with the\n"
    "                   same --params/--threads/--steps and report the "
    "ratio\n"
    "  --baselines-dir  where torch_adam.py lives (default "
    "<source>/../shared/baselines)\n";

FlagList AdamFlags() {
  return {FlagOf(FLAGS_params),   FlagOf(FLAGS_threads),
          FlagOf(FLAGS_steps),    FlagOf(FLAGS_device),
          FlagOf(FLAGS_output),   FlagOf(FLAGS_path),
          FlagOf(FLAGS_baseline), FlagOf(FLAGS_baselines_dir)};
}

// The --path named `name`, or InvalidArgument.
absl::StatusOr<CpuAdamPath> ParsePath(const std::string& name) {
  for (CpuAdamPath p :
       {CpuAdamPath::kAuto, CpuAdamPath::kScalar, CpuAdamPath::kVec128,
        CpuAdamPath::kAvx2, CpuAdamPath::kAvx512}) {
    if (name == optim::CpuAdamPathName(p)) return p;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown --path '", Shown(name), "'"));
}

// Parses argv (after the command name); returns -1 to go on, else an exit
// status.
int ParseFlags(int argc, char** argv, Flags* f) {
  return ParseBenchFlags(
      "adam", argc, argv, AdamFlags(), kUsage,
      [f](const ParsedCommandLine& parsed) -> absl::Status {
        f->params = GivenOr(parsed, FLAGS_params, f->params);
        f->steps = static_cast<int>(GivenOr(parsed, FLAGS_steps, f->steps));
        if (parsed.Given(FLAGS_params)) {
          ZSHARD_RETURN_IF_ERROR(CheckRange(FLAGS_params, 1, int64_t{1} << 40));
        }
        if (parsed.Given(FLAGS_steps)) {
          ZSHARD_RETURN_IF_ERROR(CheckRange(FLAGS_steps, 1, 1 << 30));
        }
        ZSHARD_RETURN_IF_ERROR(CheckRange(FLAGS_threads, 0, 1 << 16));
        f->threads = static_cast<int>(absl::GetFlag(FLAGS_threads));
        f->device = absl::GetFlag(FLAGS_device);
        if (f->device != "cpu" && f->device != "cuda") {
          return absl::InvalidArgumentError("--device must be cpu or cuda");
        }
        ZSHARD_RETURN_IF_ERROR(CheckOutput());
        f->output = absl::GetFlag(FLAGS_output);
        ZSHARD_ASSIGN_OR_RETURN(f->path, ParsePath(absl::GetFlag(FLAGS_path)));
        f->baseline = absl::GetFlag(FLAGS_baseline);
        f->baselines_dir = absl::GetFlag(FLAGS_baselines_dir);
        if (f->threads == 0) {
          f->threads = static_cast<int>(
              std::max(1u, std::thread::hardware_concurrency()));
        }
        if (f->baselines_dir.empty()) {
          f->baselines_dir =
              std::string(ZSHARD_SOURCE_DIR) + "/../shared/baselines";
        }
        return absl::OkStatus();
      });
}

// Deterministic, cheap starting state: master in [-0.01, 0.01), bf16 grads
// in [-5e-4, 5e-4), m = v = 0.
struct HostState {
  std::vector<float> master, m, v;
  std::vector<uint16_t> grad, param;
  explicit HostState(int64_t n)
      : master(n), m(n, 0.0f), v(n, 0.0f), grad(n), param(n) {
    for (int64_t i = 0; i < n; ++i) {
      master[i] = 0.02f * (static_cast<float>(i % 1000) / 1000.0f - 0.5f);
      const float g =
          1e-3f * (static_cast<float>(i * 7 % 1009) / 1009.0f - 0.5f);
      grad[i] = static_cast<uint16_t>(optim::FloatToBf16Bits(g));
    }
  }
};

// Runs torch_adam.py and returns its params_per_s.
absl::StatusOr<double> RunTorchBaseline(const Flags& f) {
  absl::StatusOr<nlohmann::json> j = RunJsonCommand(absl::StrCat(
      "/usr/bin/python3 '", f.baselines_dir, "/torch_adam.py' --params ",
      f.params, " --threads ", f.threads, " --steps ", f.steps));
  if (!j.ok()) return j.status();
  if (!j->contains("params_per_s") || !(*j)["params_per_s"].is_number()) {
    return absl::InternalError(
        absl::StrCat("torch baseline printed no params_per_s: ", j->dump()));
  }
  return (*j)["params_per_s"].get<double>();
}

void Print(const Flags& f, const nlohmann::ordered_json& r) {
  if (f.output == "json") {
    std::printf("%s\n", r.dump().c_str());
    return;
  }
  for (auto it = r.begin(); it != r.end(); ++it) {
    if (it->is_number_float()) {
      std::printf("%-24s %.4g\n", it.key().c_str(), it->get<double>());
    } else {
      std::printf("%-24s %s\n", it.key().c_str(),
                  it->is_string() ? it->get<std::string>().c_str()
                                  : it->dump().c_str());
    }
  }
}

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "zshard-bench adam: %s\n", s.ToString().c_str());
  return 1;
}

int RunCpu(const Flags& f) {
  optim::CpuAdamOptions options;
  options.num_threads = f.threads;
  options.path = f.path;
  auto adam = optim::CpuAdam::Create(options);
  if (!adam.ok()) return Fail(adam.status());
  HostState st(f.params);
  optim::AdamHyper hyper;
  hyper.weight_decay = 0.01;
  auto bound =
      AdamBound::Create(AdamTraffic{st.master.data(), st.m.data(), st.v.data(),
                                    st.grad.data(), st.param.data(), f.params},
                        f.threads);
  if (!bound.ok()) return Fail(bound.status());
  (*bound)->Pass();  // warms its pool
  // Each timed step is followed by a pass of the bound, so that both see
  // the same machine; then more passes, the bound being the fastest.
  double bound_seconds = 0;
  auto keep_fastest = [&] {
    const double s = (*bound)->Pass();
    if (s > 0 && (bound_seconds == 0 || s < bound_seconds)) bound_seconds = s;
  };
  double step_seconds = 0;
  // Step 1 warms up; steps 2 .. steps + 1 are timed one by one.
  for (int t = 1; t <= f.steps + 1; ++t) {
    auto p = optim::MakeAdamStepParams(hyper, t, 1.0);
    if (!p.ok()) return Fail(p.status());
    const auto start = std::chrono::steady_clock::now();
    absl::Status s = (*adam)->Update(*p, {}, st.master.data(), st.m.data(),
                                     st.v.data(), st.grad.data(), DType::kBf16,
                                     st.param.data(), DType::kBf16, f.params);
    const double took =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    if (!s.ok()) return Fail(s);
    if (t == 1) continue;
    step_seconds += took;
    keep_fastest();
  }
  for (int r = f.steps; r < kBoundPasses; ++r) keep_fastest();
  if (step_seconds <= 0 || bound_seconds <= 0) {
    return Fail(absl::InternalError("no measurable time"));
  }
  const double pps = static_cast<double>(f.params) * f.steps / step_seconds;
  const double bound_pps = static_cast<double>(f.params) / bound_seconds;
  nlohmann::ordered_json r;
  r["device"] = "cpu";
  r["path"] = optim::CpuAdamPathName((*adam)->path());
  r["params"] = f.params;
  r["threads"] = f.threads;
  r["steps"] = f.steps;
  r["params_per_s"] = pps;
  r["bytes_per_s"] = kBytesPerParam * pps;
  r["dram_bytes_per_s"] = kDramBytesPerParam * pps;
  r["bound_params_per_s"] = bound_pps;
  r["bound_dram_bytes_per_s"] = kDramBytesPerParam * bound_pps;
  r["fraction_of_bound"] = pps / bound_pps;
  if (f.baseline) {
    auto torch = RunTorchBaseline(f);
    if (!torch.ok()) return Fail(torch.status());
    r["torch_params_per_s"] = *torch;
    r["speedup_vs_torch"] = pps / *torch;
  }
  Print(f, r);
  return 0;
}

#if defined(ZSHARD_HAVE_CUDA_ADAM)
int RunCuda(const Flags& f) {
  if (cuda::DeviceCount() == 0) {
    std::fprintf(stderr, "zshard-bench adam: no cuda device is present\n");
    return 1;
  }
  auto adam = optim::CudaAdam::Create(optim::CudaAdamOptions{});
  if (!adam.ok()) return Fail(adam.status());
  HostState st(f.params);
  const int64_t n = f.params;
  auto master = optim::DeviceBuffer::Allocate(4 * n);
  auto m = optim::DeviceBuffer::Allocate(4 * n);
  auto v = optim::DeviceBuffer::Allocate(4 * n);
  auto grad = optim::DeviceBuffer::Allocate(2 * n);
  auto param = optim::DeviceBuffer::Allocate(2 * n);
  for (auto* b : {&master, &m, &v, &grad, &param}) {
    if (!b->ok()) return Fail(b->status());
  }
  absl::Status s = master->CopyFromHost(st.master.data(), 4 * n);
  if (s.ok()) s = m->CopyFromHost(st.m.data(), 4 * n);
  if (s.ok()) s = v->CopyFromHost(st.v.data(), 4 * n);
  if (s.ok()) s = grad->CopyFromHost(st.grad.data(), 2 * n);
  if (!s.ok()) return Fail(s);
  optim::AdamHyper hyper;
  hyper.weight_decay = 0.01;
  auto step = [&](int t) -> absl::Status {
    auto p = optim::MakeAdamStepParams(hyper, t, 1.0);
    if (!p.ok()) return p.status();
    return (*adam)->Update(*p, {}, static_cast<float*>(master->data()),
                           static_cast<float*>(m->data()),
                           static_cast<float*>(v->data()), grad->data(),
                           DType::kBf16, param->data(), DType::kBf16, n);
  };
  if (s = step(1); s.ok()) s = (*adam)->Synchronize();
  if (!s.ok()) return Fail(s);
  const auto start = std::chrono::steady_clock::now();
  for (int t = 2; t <= f.steps + 1 && s.ok(); ++t) s = step(t);
  if (s.ok()) s = (*adam)->Synchronize();
  if (!s.ok()) return Fail(s);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  // A copy of 14 bytes per parameter moves 28: the same traffic as a step.
  auto copy_bps = optim::MeasureDeviceCopyBandwidth(14 * n, f.steps);
  if (!copy_bps.ok()) return Fail(copy_bps.status());
  const double pps = static_cast<double>(n) * f.steps / seconds;
  nlohmann::ordered_json r;
  r["device"] = "cuda";
  r["params"] = n;
  r["steps"] = f.steps;
  r["params_per_s"] = pps;
  r["bytes_per_s"] = kBytesPerParam * pps;
  r["copy_bytes_per_s"] = *copy_bps;
  r["fraction_of_copy"] = kBytesPerParam * pps / *copy_bps;
  Print(f, r);
  return 0;
}
#else
int RunCuda(const Flags&) {
  std::fprintf(stderr,
               "zshard-bench adam: this build has no cuda support (the cuda "
               "toolkit was not found at configure time)\n");
  return 1;
}
#endif

}  // namespace

int RunAdamBench(int argc, char** argv) {
  Flags flags;
  if (const int rc = ParseFlags(argc, argv, &flags); rc >= 0) return rc;
  return flags.device == "cuda" ? RunCuda(flags) : RunCpu(flags);
}

}  // namespace zshard::bench
