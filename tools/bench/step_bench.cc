// zshard-bench step: the ZeRO-1 step (reduce-scatter, commit, Adam on 1/N,
// all-gather) of N ranks running as threads over Gloo on loopback, bf16
// params and grads, next to a DDP step (all-reduce + full Adam) through
// torch.distributed's Gloo backend measured in the same run (--baseline),
// and the elements each rank moves per step against the seed's 2P(N-1)/N.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "client/worker/comm/memory_kv_store.h"
#include "client/worker/engine/step_engine.h"
#include "common/status.h"
#include "nlohmann/json.hpp"
#include "tools/bench/baseline.h"
#include "tools/bench/bench_commands.h"
#include "tools/bench/bench_flags.h"

ABSL_FLAG(int64_t, bucket_size, 0,
          "elements per bucket (0: params / 4, several buckets to overlap)");
ABSL_FLAG(int64_t, adam_threads, 0,
          "Adam threads per rank (0: hardware threads / ranks)");

namespace zshard::bench {
namespace {

using engine::StepEngine;
using engine::StepResult;

struct Flags {
  int ranks = 4;
  int64_t params = int64_t{1} << 24;
  int steps = 5;
  int64_t bucket_size = 0;  // 0: params / 4 (several buckets to overlap)
  int adam_threads = 0;     // 0: hardware threads / ranks
  bool baseline = false;
  bool json = false;
};

const char kUsage[] =
    "usage: zshard-bench step [--ranks N] [--params P] [--steps S] "
    "[--bucket-size E]\n"
    "         [--adam-threads T] [--baseline] [--output table|json]\n"
    "  --baseline runs ../shared/baselines/torch_ddp_step.py "
    "(/usr/bin/python3)\n"
    "  with the same ranks and params in the same run.\n";

FlagList StepFlags() {
  return {FlagOf(FLAGS_ranks),        FlagOf(FLAGS_params),
          FlagOf(FLAGS_steps),        FlagOf(FLAGS_bucket_size),
          FlagOf(FLAGS_adam_threads), FlagOf(FLAGS_baseline),
          FlagOf(FLAGS_output)};
}

// Reads the flags into `f`; InvalidArgument naming a bad one.
absl::Status ReadFlags(const ParsedCommandLine& parsed, Flags* f) {
  ZSHARD_RETURN_IF_ERROR(CheckRange(FLAGS_ranks, 1, 64));
  f->ranks = static_cast<int>(absl::GetFlag(FLAGS_ranks));
  if (parsed.Given(FLAGS_params)) {
    ZSHARD_RETURN_IF_ERROR(CheckRange(FLAGS_params, 1, int64_t{1} << 40));
  }
  f->params = GivenOr(parsed, FLAGS_params, f->params);
  if (parsed.Given(FLAGS_steps)) {
    ZSHARD_RETURN_IF_ERROR(CheckRange(FLAGS_steps, 1, 1 << 30));
  }
  f->steps = static_cast<int>(GivenOr(parsed, FLAGS_steps, f->steps));
  ZSHARD_RETURN_IF_ERROR(CheckRange(FLAGS_bucket_size, 0, int64_t{1} << 40));
  f->bucket_size = absl::GetFlag(FLAGS_bucket_size);
  ZSHARD_RETURN_IF_ERROR(CheckRange(FLAGS_adam_threads, 0, 1 << 16));
  f->adam_threads = static_cast<int>(absl::GetFlag(FLAGS_adam_threads));
  f->baseline = absl::GetFlag(FLAGS_baseline);
  ZSHARD_RETURN_IF_ERROR(CheckOutput());
  f->json = absl::GetFlag(FLAGS_output) == "json";
  return absl::OkStatus();
}

// Cheap, finite, non-constant initial params (the step's cost does not
// depend on the values).
class BenchWorkload final : public engine::Workload {
 public:
  void InitialParam(int, absl::Span<float> out) const override {
    for (size_t j = 0; j < out.size(); ++j) {
      out[j] = 0.02f * static_cast<float>((j * 2654435761u) % 1000) / 1000.0f;
    }
  }
  // Leaves the gradients the bench restored into the buffers before the
  // step. Stateless: every rank's thread shares one.
  absl::StatusOr<double> Gradients(int64_t, engine::ModelState&) override {
    return 0.0;
  }
  bool has_loss() const override { return false; }
  int64_t global_batch() const override { return 1; }
};

// Threads meet here before each timed step, so that every rank enters the
// reduce-scatter together (as the baseline's dist.barrier() does).
class ThreadBarrier {
 public:
  explicit ThreadBarrier(int n) : n_(n) {}
  void Wait() {
    absl::MutexLock lock(&mu_);
    const int64_t generation = generation_;
    if (++waiting_ == n_) {
      waiting_ = 0;
      ++generation_;
      cv_.SignalAll();
      return;
    }
    while (generation_ == generation) cv_.Wait(&mu_);
  }

 private:
  absl::Mutex mu_;
  absl::CondVar cv_;
  const int n_;
  int waiting_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

struct Measured {
  double step = 0;            // median over steps of the slowest rank
  engine::PhaseTimes phases;  // medians of rank 0's phases
  int64_t elements_sent = 0;
  int64_t elements_received = 0;
  int64_t bytes_sent = 0;
  int64_t padded = 0;
  engine::MemoryBytes memory;
};

absl::Status RunOurs(const Flags& f, Measured* m) {
  plan::ModelSpec model;
  model.name = "bench";
  // Eight equal layers, the last one taking the remainder.
  const int64_t layer = std::max<int64_t>(1, f.params / 8);
  for (int64_t done = 0, i = 0; done < f.params; ++i) {
    plan::ParamSpec p;
    p.name = absl::StrCat("layer", i);
    const int64_t n = f.params - done < 2 * layer ? f.params - done : layer;
    p.shape = {n};
    done += n;
    model.params.push_back(p);
  }
  plan::PlanOptions po;
  po.world = f.ranks;
  po.layout.bucket_size =
      f.bucket_size > 0 ? f.bucket_size : std::max<int64_t>(1, f.params / 4);
  absl::StatusOr<plan::Plan> plan = plan::MakePlan(model, po);
  if (!plan.ok()) return plan.status();
  m->padded = plan->buffers[0].numel;

  comm::MemoryKvStore store;
  BenchWorkload workload;
  ThreadBarrier barrier(f.ranks);
  const int hw = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::vector<engine::StepTelemetry>> telemetry(f.ranks);
  std::vector<absl::Status> status(f.ranks);
  auto rank_main = [&](int rank) -> absl::Status {
    engine::EngineConfig config;
    config.model = model;
    config.plan = *plan;
    config.rank = rank;
    config.store = &store;
    engine::EngineOptions options;
    options.comm_timeout_ms = 300000;
    options.adam_threads =
        f.adam_threads > 0 ? f.adam_threads : std::max(1, hw / f.ranks);
    auto engine = StepEngine::Create(config, options, workload);
    if (!engine.ok()) return engine.status();
    // Synthetic bf16 gradients: kept in a pristine copy and restored
    // (untimed) before every step, because the reduce-scatter works in
    // place.
    std::vector<std::vector<uint8_t>> grads;
    for (engine::BufferState& b : (*engine)->buffers().buffers()) {
      std::vector<uint8_t>& g = grads.emplace_back(b.grads.size());
      for (size_t j = 0; j + 1 < g.size(); j += 2) {
        const uint16_t bits = static_cast<uint16_t>(
            0x3A00 + (((j / 2) * 40503u + rank) & 0x3FF));  // ~1e-3
        std::memcpy(&g[j], &bits, 2);
      }
    }
    device::Device& dev = (*engine)->buffers().device();
    for (int s = -1; s < f.steps; ++s) {  // one warm-up
      auto& buffers = (*engine)->buffers().buffers();
      for (size_t b = 0; b < buffers.size(); ++b) {
        ZSHARD_RETURN_IF_ERROR(
            dev.CopyToDevice(buffers[b].grads.data(), grads[b].data(),
                             static_cast<int64_t>(grads[b].size())));
      }
      barrier.Wait();
      StepResult r = (*engine)->Step(workload);
      if (!r.status.ok()) return r.status;
      if (s >= 0) telemetry[rank].push_back(r.telemetry);
    }
    return absl::OkStatus();
  };
  std::vector<std::thread> threads;
  for (int r = 0; r < f.ranks; ++r) {
    threads.emplace_back([&, r] { status[r] = rank_main(r); });
  }
  for (std::thread& t : threads) t.join();
  for (const absl::Status& s : status) {
    if (!s.ok()) return s;
  }
  std::vector<double> slowest;
  for (int s = 0; s < f.steps; ++s) {
    double worst = 0;
    for (int r = 0; r < f.ranks; ++r) {
      worst = std::max(worst, telemetry[r][s].times.step);
    }
    slowest.push_back(worst);
  }
  m->step = Median(slowest);
  auto phase = [&](double engine::PhaseTimes::*field) {
    std::vector<double> v;
    for (const auto& t : telemetry[0]) v.push_back(t.times.*field);
    return Median(v);
  };
  m->phases.reduce_scatter = phase(&engine::PhaseTimes::reduce_scatter);
  m->phases.commit = phase(&engine::PhaseTimes::commit);
  m->phases.adam = phase(&engine::PhaseTimes::adam);
  m->phases.all_gather = phase(&engine::PhaseTimes::all_gather);
  m->phases.waiting = phase(&engine::PhaseTimes::waiting);
  m->phases.step = phase(&engine::PhaseTimes::step);
  const engine::StepTelemetry& t0 = telemetry[0].front();
  m->elements_sent = t0.elements_sent;
  m->elements_received = t0.elements_received;
  m->bytes_sent = t0.bytes_sent;
  m->memory = t0.memory;
  return absl::OkStatus();
}

std::string BaselineScript() {
  std::vector<std::string> candidates = {
      "../shared/baselines/torch_ddp_step.py",
      std::string(ZSHARD_SOURCE_DIR) +
          "/../shared/baselines/torch_ddp_step.py"};
  for (const std::string& c : candidates) {
    if (access(c.c_str(), R_OK) == 0) return c;
  }
  return candidates.front();
}

nlohmann::json RunBaseline(const Flags& f) {
  absl::StatusOr<nlohmann::json> j = RunJsonCommand(absl::StrCat(
      "/usr/bin/python3 ", BaselineScript(), " --ranks ", f.ranks, " --params ",
      f.params, " --steps ", f.steps, " 2>/dev/null"));
  if (!j.ok()) {
    std::fprintf(stderr, "zshard-bench step: %s\n",
                 std::string(j.status().message()).c_str());
    return nlohmann::json::value_t::discarded;
  }
  return *std::move(j);
}

}  // namespace

int RunStepBench(int argc, char** argv) {
  Flags f;
  if (const int rc = ParseBenchFlags("step", argc, argv, StepFlags(), kUsage,
                                     [&f](const ParsedCommandLine& parsed) {
                                       return ReadFlags(parsed, &f);
                                     });
      rc >= 0) {
    return rc;
  }
  Measured m;
  const absl::Status s = RunOurs(f, &m);
  if (!s.ok()) {
    std::fprintf(stderr, "zshard-bench step: %s\n", s.ToString().c_str());
    return 1;
  }
  nlohmann::json baseline = nlohmann::json::value_t::discarded;
  if (f.baseline) baseline = RunBaseline(f);
  const bool have_baseline = !baseline.is_discarded() &&
                             baseline.contains("step_s") &&
                             baseline["step_s"].is_number();
  const int64_t seed_elements = 2 * f.params * (f.ranks - 1) / f.ranks;

  nlohmann::json out;
  out["ranks"] = f.ranks;
  out["params"] = f.params;
  out["steps"] = f.steps;
  out["dtype"] = "bf16";
  out["step_s"] = m.step;
  out["phases_s"] = {{"reduce_scatter", m.phases.reduce_scatter},
                     {"commit", m.phases.commit},
                     {"adam", m.phases.adam},
                     {"all_gather", m.phases.all_gather},
                     {"waiting", m.phases.waiting}};
  out["elements_sent_per_rank"] = m.elements_sent;
  out["elements_received_per_rank"] = m.elements_received;
  out["seed_elements_per_rank"] = seed_elements;
  out["padded_params"] = m.padded;
  out["memory_bytes"] = {{"param", m.memory.param},
                         {"grad", m.memory.grad},
                         {"master", m.memory.master},
                         {"exp_avg", m.memory.exp_avg},
                         {"exp_avg_sq", m.memory.exp_avg_sq}};
  if (have_baseline) {
    out["baseline"] = baseline;
    out["ratio_ours_over_ddp"] = m.step / baseline["step_s"].get<double>();
  }
  if (f.json) {
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  std::printf(
      "step: ZeRO-1 over gloo, %d ranks (threads), %lld params bf16, "
      "median of %d steps (slowest rank)\n",
      f.ranks, static_cast<long long>(f.params), f.steps);
  std::printf("%-16s %10s\n", "phase (rank 0)", "ms");
  const std::pair<const char*, double> rows[] = {
      {"reduce_scatter", m.phases.reduce_scatter},
      {"commit", m.phases.commit},
      {"adam", m.phases.adam},
      {"all_gather", m.phases.all_gather},
      {"  waiting", m.phases.waiting},
      {"step", m.phases.step}};
  for (const auto& [name, t] : rows)
    std::printf("%-16s %10.2f\n", name, t * 1e3);
  std::printf("step (slowest rank): %.2f ms\n", m.step * 1e3);
  std::printf(
      "elements per rank per step: sent %lld, received %lld; seed 2P(N-1)/N "
      "= %lld (ours counts bucket padding: %lld padded params)\n",
      static_cast<long long>(m.elements_sent),
      static_cast<long long>(m.elements_received),
      static_cast<long long>(seed_elements), static_cast<long long>(m.padded));
  if (have_baseline) {
    std::printf(
        "torch ddp (gloo, %s grads): step %.2f ms (all-reduce %.2f, adam "
        "%.2f)\n",
        baseline.value("grad_dtype", std::string("?")).c_str(),
        baseline["step_s"].get<double>() * 1e3,
        baseline.value("allreduce_s", 0.0) * 1e3,
        baseline.value("adam_s", 0.0) * 1e3);
    std::printf("ratio ours/ddp: %.2f (goal <= 0.6)%s\n",
                out["ratio_ours_over_ddp"].get<double>(),
                baseline.value("grad_dtype", std::string()) == "float32"
                    ? "; ddp's gloo reduces fp32 grads, twice our bf16 bytes"
                    : "");
  } else if (f.baseline) {
    std::printf("torch baseline: not available\n");
  }
  return 0;
}

}  // namespace zshard::bench
