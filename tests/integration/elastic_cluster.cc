// ElasticJob and ElasticRun: job spec, processes and deadline-bound waits.

#include "tests/integration/elastic_cluster.h"

#include <algorithm>
#include <filesystem>
#include <regex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/file_io.h"
#include "common/status.h"
#include "tests/testing/log_scan.h"
#include "tests/testing/wait_for.h"

namespace zshard::testing {
namespace {

// The last `n` characters of a log.
std::string Tail(const std::string& text, size_t n = 4000) {
  return text.size() <= n ? text : "..." + text.substr(text.size() - n);
}

}  // namespace

nlohmann::json ElasticJob::ToJson() const {
  const bool parallel = tensor * pipeline * context > 1;
  nlohmann::json slots = nlohmann::json::array();
  for (int s = 0; s < tensor * pipeline; ++s) {
    nlohmann::json params = ParamsJson(parallel ? 8 * s : 0);
    if (parallel) params[0]["tp_replicated"] = true;
    slots.push_back(
        {{"tp", s % tensor}, {"pp", s / tensor}, {"params", params}});
  }
  nlohmann::json model = {{"params", slots[0]["params"]}};
  if (parallel) model = {{"slots", slots}};
  nlohmann::json spec = BaseJson(model);
  if (parallel) {
    spec["parallel"] = {
        {"tensor", tensor}, {"pipeline", pipeline}, {"context", context}};
  }
  if (clip_grad_norm > 0) {
    spec["optimizer"]["clip_grad_norm"] = clip_grad_norm;
  }
  return spec;
}

nlohmann::json ElasticJob::ParamsJson(int64_t extra) const {
  nlohmann::json params = nlohmann::json::array();
  for (size_t i = 0; i < param_sizes.size(); ++i) {
    nlohmann::json p = {{"name", absl::StrCat("p", i)},
                        {"shape", {param_sizes[i] + extra}},
                        {"dtype", dtype}};
    // One param without weight decay, as in the training test's model.
    if (i == 3) p["no_weight_decay"] = true;
    if (std::find(expert_params.begin(), expert_params.end(),
                  static_cast<int>(i)) != expert_params.end()) {
      p["expert"] = true;
    }
    params.push_back(p);
  }
  return params;
}

nlohmann::json ElasticJob::BaseJson(const nlohmann::json& model) const {
  nlohmann::json layout = {{"bucket_size", bucket_size},
                           {"grad_reduce_in_fp32", grad_reduce_in_fp32}};
  if (expert_parallel != 1) layout["expert_parallel"] = expert_parallel;
  nlohmann::json spec = {
      {"name", name},
      {"model", model},
      {"layout", layout},
      {"optimizer", {{"lr", lr}, {"weight_decay", weight_decay}}},
      {"world",
       {{"instances", instances}, {"min", min_world}, {"max", max_world}}},
      {"lease_timeout_ms", lease_timeout_ms},
      {"heartbeat_interval_ms", heartbeat_interval_ms},
      {"transition_settle_ms", transition_settle_ms},
      {"workload",
       {{"kind", "synthetic"},
        {"steps", steps},
        {"global_batch", global_batch},
        {"step_delay_ms", step_delay_ms}}}};
  if (!resize.empty()) spec["world"]["resize"] = resize;
  if (!checkpoint_dir.empty()) {
    spec["checkpoint"] = {{"dir", checkpoint_dir},
                          {"every_steps", checkpoint_every}};
  }
  return spec;
}

absl::StatusOr<job::JobSpec> ElasticJob::Spec() const {
  return job::ParseJobSpec(ToJson().dump());
}

ElasticRun::ElasticRun(ElasticJob job) : job_(std::move(job)) {
  probes_.push_back(std::make_unique<DashboardProbe>(cluster_.address()));
  if (!job_.checkpoint_dir.empty() && job_.checkpoint_dir[0] != '/') {
    job_.checkpoint_dir = File(job_.checkpoint_dir);
  }
}

void ElasticRun::PlaceCoordinator(Placement placement) {
  cluster_.PlaceCoordinator(std::move(placement));
  probes_.clear();
  current_ = 0;
  probes_.push_back(std::make_unique<DashboardProbe>(cluster_.address()));
}

absl::Status ElasticRun::Start(const std::vector<std::string>& extra_flags) {
  TestJob test_job;
  test_job.spec = job_.ToJson();
  return cluster_.StartCoordinator(test_job, extra_flags);
}

void ElasticRun::FollowCoordinators(std::vector<std::string> addresses) {
  probes_.clear();
  current_ = 0;
  for (const std::string& address : addresses) {
    probes_.push_back(std::make_unique<DashboardProbe>(address));
  }
  coordinator_flags_ = {"--coordinator", absl::StrJoin(addresses, ",")};
}

absl::StatusOr<std::string> ElasticRun::WriteJobFile() const {
  const std::string path = File("job.json");
  ZSHARD_RETURN_IF_ERROR(WriteFileAtomic(path, job_.ToJson().dump(2)));
  return path;
}

template <typename T>
absl::StatusOr<T> ElasticRun::Ask(absl::StatusOr<T> (DashboardProbe::*call)()) {
  absl::StatusOr<T> last = absl::UnavailableError("no coordinator");
  for (size_t k = 0; k < probes_.size(); ++k) {
    const size_t i = (current_ + k) % probes_.size();
    last = (probes_[i].get()->*call)();
    if (last.ok()) {
      current_ = i;
      return last;
    }
  }
  return last;
}

absl::Status ElasticRun::StartWorker(const std::string& name,
                                     const std::vector<std::string>& extra) {
  std::vector<std::string> flags = {"--dump-master", dump_dir()};
  flags.insert(flags.end(), coordinator_flags_.begin(),
               coordinator_flags_.end());
  flags.insert(flags.end(), extra.begin(), extra.end());
  auto worker = cluster_.StartWorker(name, flags);
  if (!worker.ok()) return worker.status();
  if (std::find(started_.begin(), started_.end(), name) == started_.end()) {
    started_.push_back(name);
  }
  return absl::OkStatus();
}

absl::Status ElasticRun::StartWorkers(const std::vector<std::string>& names) {
  for (const std::string& name : names) {
    absl::Status s = StartWorker(name);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::GetClusterStatusResponse> ElasticRun::WaitForRanksAtStep(
    int world, int64_t step, int64_t timeout_ms) {
  absl::StatusOr<v1::GetClusterStatusResponse> last =
      absl::DeadlineExceededError("no status yet");
  const bool ok = WaitFor(
      [&] {
        last = Ask(&DashboardProbe::Status);
        return last.ok() && last->state() == v1::CLUSTER_STATE_STABLE &&
               last->world() == world &&
               static_cast<int>(RankedMembers(*last).size()) == world &&
               MinRankedStep(*last) >= step;
      },
      timeout_ms, 20);
  if (ok) return last;
  return absl::DeadlineExceededError(absl::StrCat(
      "world ", world, " with every rank at step >= ", step,
      " not seen; last status: ",
      last.ok() ? last->ShortDebugString() : last.status().ToString()));
}

absl::StatusOr<v1::Event> ElasticRun::WaitForEvent(const std::string& kind,
                                                   int64_t after_seq,
                                                   int64_t timeout_ms) {
  std::vector<v1::Event> events;
  const bool ok = WaitFor(
      [&] {
        auto all = Ask(&DashboardProbe::Events);
        if (!all.ok()) return false;
        events = *std::move(all);
        return !EventsOfKind(events, kind, after_seq).empty();
      },
      timeout_ms, 50);
  if (ok) return EventsOfKind(events, kind, after_seq).front();
  return absl::DeadlineExceededError(
      absl::StrCat("no '", kind, "' event after seq ", after_seq, "; events:\n",
                   DescribeEvents(events)));
}

std::map<std::string, int> ElasticRun::WaitForExits(
    const std::vector<std::string>& names, int64_t timeout_ms) {
  std::map<std::string, int> codes;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (const std::string& name : names) {
    Subprocess* worker = cluster_.worker(name);
    if (worker == nullptr) {
      codes[name] = -1;
      continue;
    }
    const int64_t left = std::max<int64_t>(
        0, std::chrono::duration_cast<std::chrono::milliseconds>(
               deadline - std::chrono::steady_clock::now())
               .count());
    std::optional<int> code = worker->Wait(left);
    if (!code.has_value()) worker->Kill();
    codes[name] = code.value_or(-1);
  }
  return codes;
}

absl::StatusOr<v1::GetClusterStatusResponse> ElasticRun::Status() {
  return Ask(&DashboardProbe::Status);
}

std::vector<v1::Event> ElasticRun::Events() {
  auto events = Ask(&DashboardProbe::Events);
  return events.ok() ? *std::move(events) : std::vector<v1::Event>();
}

std::string ElasticRun::WorkerLog(const std::string& name) const {
  return ReadLog(cluster_.WorkerLog(name));
}

std::string ElasticRun::CoordinatorLog() const {
  std::vector<std::string> logs;
  std::error_code ec;
  for (const auto& entry :
       std::filesystem::directory_iterator(cluster_.dir().path(), ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("coordinator-", 0) == 0 && name.size() > 4 &&
        name.substr(name.size() - 4) == ".log") {
      logs.push_back(entry.path().string());
    }
  }
  std::sort(logs.begin(), logs.end());
  std::string out;
  for (const std::string& log : logs) {
    absl::StrAppend(&out, "== ", log, "\n", Tail(ReadLog(log)), "\n");
  }
  return out;
}

std::string ElasticRun::Diagnostics() {
  std::string out = "== events\n" + DescribeEvents(Events());
  for (const std::string& name : started_) {
    absl::StrAppend(&out, "== worker ", name, "\n", Tail(WorkerLog(name)),
                    "\n");
  }
  absl::StrAppend(&out, CoordinatorLog());
  return out;
}

std::vector<Topology> ElasticRun::Schedule(
    const std::vector<Topology>& before) {
  static const std::regex kCommit(R"(world ([0-9]+) resume step ([0-9]+))");
  const size_t steps = static_cast<size_t>(job_.steps);
  // The instance count of a world under the job's resize policy.
  absl::StatusOr<job::JobSpec> spec = job_.Spec();
  auto topology = [&](int world) {
    return Topology{world, spec.ok() ? job::InstancesOf(spec->world, world)
                                     : job_.instances};
  };
  std::vector<Topology> by_step(steps, Topology{0, job_.instances});
  for (size_t t = 0; t < before.size() && t < steps; ++t)
    by_step[t] = before[t];
  for (const v1::Event& e : EventsOfKind(Events(), "commit")) {
    std::smatch match;
    if (!std::regex_search(e.reason(), match, kCommit)) continue;
    const int world = std::stoi(match[1].str());
    const size_t resume = std::stoul(match[2].str());
    for (size_t t = resume; t < steps; ++t) {
      by_step[t] = topology(world);
    }
  }
  // Steps before the first commit's resume step without `before`: the
  // first world seen.
  Topology first = topology(job_.max_world);
  for (const Topology& t : by_step) {
    if (t.world > 0) {
      first = t;
      break;
    }
  }
  for (Topology& t : by_step) {
    if (t.world == 0) t = first;
  }
  return by_step;
}

absl::StatusOr<DumpCheck> ElasticRun::CheckMasters(
    const std::vector<Topology>& before) {
  auto spec = job_.Spec();
  if (!spec.ok()) return spec.status();
  return CheckDump(dump_dir(), *spec, Schedule(before));
}

std::vector<std::string> WorkerNames(int n, int first) {
  std::vector<std::string> names;
  for (int i = first; i < first + n; ++i) names.push_back(absl::StrCat("w", i));
  return names;
}

}  // namespace zshard::testing
