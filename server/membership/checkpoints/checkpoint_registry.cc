// Checkpoint reports, completeness and committed manifests.
#include "server/membership/checkpoints/checkpoint_registry.h"

#include <algorithm>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace zshard::server {
namespace {

constexpr int kMaxPending = 64;
constexpr size_t kMaxGivenUp = 32;

bool SafeRelativePath(const std::string& path) {
  if (path.empty() || path.size() > 1024 || path[0] == '/') return false;
  size_t start = 0;
  while (start <= path.size()) {
    size_t slash = path.find('/', start);
    if (slash == std::string::npos) slash = path.size();
    if (path.compare(start, slash - start, "..") == 0 && slash - start == 2) {
      return false;
    }
    start = slash + 1;
  }
  return true;
}

// The shard ranks of instance 0 in every slot of `epoch` (D).
int ShardRanks(const CheckpointEpoch& epoch) {
  const int dp = epoch.parallel.model_parallel()
                     ? epoch.world / epoch.parallel.slots()
                     : epoch.world;
  return epoch.instances > 0 ? dp / epoch.instances : 0;
}

// Where global rank `rank` of `epoch` writes: its slot and data-parallel
// rank (slot 0 and the rank itself without model parallelism). Requires
// 0 <= rank < epoch.world.
std::pair<int, int> WriterOf(const CheckpointEpoch& epoch, int rank) {
  if (!epoch.parallel.model_parallel()) return {0, rank};
  const plan::Position at = plan::PositionOf(epoch.parallel, epoch.world, rank);
  return {plan::SlotIndex(epoch.parallel, at.tp, at.pp),
          plan::DataParallelRank(epoch.parallel, at)};
}

plan::ParallelSizes SizesOf(const CheckpointRecord& c) {
  return plan::ParallelSizes{c.tensor, c.pipeline, c.context};
}

}  // namespace

std::vector<CheckpointFileInfo> SlotFiles(const CheckpointRecord& record,
                                          int slot) {
  std::vector<CheckpointFileInfo> out;
  for (const CheckpointFileInfo& f : record.files) {
    if (f.slot == slot) out.push_back(f);
  }
  return out;
}

absl::Status CheckSlotsCoverage(const CheckpointRecord& record,
                                absl::Span<const plan::ModelSpec> slots,
                                int expert_parallel) {
  const plan::ParallelSizes sizes = SizesOf(record);
  if (static_cast<int>(slots.size()) != sizes.slots()) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint step ", record.step, " has ", sizes.slots(),
                     " slots but the model has ", slots.size()));
  }
  if (!sizes.model_parallel()) {
    return CheckCoverage(record.files, slots[0], expert_parallel);
  }
  for (int s = 0; s < sizes.slots(); ++s) {
    absl::Status covered =
        CheckCoverage(SlotFiles(record, s), slots[s], expert_parallel);
    if (!covered.ok()) {
      return absl::Status(
          covered.code(),
          absl::StrCat("slot (tp ", plan::SlotTp(sizes, s), ", pp ",
                       plan::SlotPp(sizes, s), "): ", covered.message()));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckCoverage(const std::vector<CheckpointFileInfo>& files,
                           const plan::ModelSpec& model, int expert_parallel) {
  std::vector<ParamRangeInfo> ranges;
  for (const CheckpointFileInfo& f : files) {
    ranges.insert(ranges.end(), f.ranges.begin(), f.ranges.end());
  }
  std::sort(ranges.begin(), ranges.end(),
            [](const ParamRangeInfo& a, const ParamRangeInfo& b) {
              return std::tie(a.param_index, a.expert_rank, a.begin) <
                     std::tie(b.param_index, b.expert_rank, b.begin);
            });
  size_t i = 0;
  for (int p = 0; p < static_cast<int>(model.params.size()); ++p) {
    const plan::ParamSpec& param = model.params[p];
    int experts = param.expert ? expert_parallel : 1;
    for (int e = 0; e < experts; ++e) {
      while (i < ranges.size() &&
             std::tie(ranges[i].param_index, ranges[i].expert_rank) <
                 std::tie(p, e)) {
        ++i;
      }
      int64_t covered = 0;
      while (i < ranges.size() && ranges[i].param_index == p &&
             ranges[i].expert_rank == e) {
        if (ranges[i].begin > covered) break;
        covered = std::max(covered, ranges[i].end);
        ++i;
      }
      if (covered < param.numel()) {
        return absl::FailedPreconditionError(
            absl::StrCat("param '", param.name, "' (expert rank ", e,
                         ") element ", covered, " is in no checkpoint file"));
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<CheckpointRecord>> CheckpointRegistry::Add(
    const CheckpointReport& report, const CheckpointEpoch& epoch,
    absl::Span<const plan::ModelSpec> slots) {
  const int d = ShardRanks(epoch);
  const int world = epoch.parallel.model_parallel() ? epoch.world : d;
  if (static_cast<int>(slots.size()) != epoch.parallel.slots()) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint of a job of ", epoch.parallel.slots(),
                     " slots checked against ", slots.size(), " models"));
  }
  CheckpointFileInfo f = report.file;
  const auto [slot, rank] = f.rank >= 0 && f.rank < world
                                ? WriterOf(epoch, f.rank)
                                : std::make_pair(0, f.rank);
  if (rank < 0 || rank >= d) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint file rank ", f.rank, " is not in instance 0 ",
                     "of epoch ", epoch.epoch, " (",
                     epoch.parallel.model_parallel() ? "data-parallel " : "",
                     "ranks 0..", d - 1, ")"));
  }
  if (!SafeRelativePath(f.path)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "checkpoint file path '", f.path, "' must be relative to the dir"));
  }
  if (report.dir.empty() || report.step < 0 || report.adam_step < 0) {
    return absl::InvalidArgumentError(
        "checkpoint report needs a dir and a step >= 0");
  }
  const plan::ModelSpec& model = slots[slot];
  for (const ParamRangeInfo& r : f.ranges) {
    if (r.param_index < 0 ||
        r.param_index >= static_cast<int>(model.params.size()) ||
        r.expert_rank < 0 || r.expert_rank >= epoch.expert_parallel ||
        r.begin < 0 || r.end <= r.begin ||
        r.end > model.params[r.param_index].numel()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "checkpoint file '", f.path, "' range of param ", r.param_index, " [",
          r.begin, ", ", r.end, ") is outside the model"));
    }
  }
  const CheckpointRecord* newest = Newest();
  if (newest != nullptr && report.step <= newest->step) {
    return absl::FailedPreconditionError(
        absl::StrCat("checkpoint step ", report.step,
                     " is not newer than the committed step ", newest->step));
  }
  Pending& p = PendingFor(std::make_pair(report.step, report.dir), epoch,
                          report.adam_step);
  p.failures.erase(f.rank);
  f.slot = slot;
  f.rank = rank;
  p.files[slot * d + rank] = std::move(f);
  if (static_cast<int>(p.files.size()) < d * epoch.parallel.slots()) {
    return std::nullopt;
  }
  CheckpointRecord c;
  c.step = report.step;
  c.adam_step = p.adam_step;
  c.epoch = epoch.epoch;
  c.world = epoch.world;
  c.instances = epoch.instances;
  c.dir = report.dir;
  c.tensor = epoch.parallel.tensor;
  c.pipeline = epoch.parallel.pipeline;
  c.context = epoch.parallel.context;
  for (auto& [key, file] : p.files) {
    c.bytes += file.bytes;
    c.files.push_back(file);
  }
  absl::Status covered = CheckSlotsCoverage(c, slots, epoch.expert_parallel);
  if (!covered.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("checkpoint step ", report.step, ": ", covered.message()));
  }
  for (const plan::ModelSpec& m : slots) {
    for (const plan::ParamSpec& param : m.params) {
      c.param_names.push_back(param.name);
      c.param_numels.push_back(param.numel());
    }
    if (epoch.parallel.model_parallel()) {
      c.slot_params.push_back(static_cast<int>(m.params.size()));
    }
  }
  return std::optional<CheckpointRecord>(std::move(c));
}

CheckpointRegistry::Pending& CheckpointRegistry::PendingFor(
    const Key& key, const CheckpointEpoch& epoch, int64_t adam_step) {
  auto it = pending_.find(key);
  if (it != pending_.end() && it->second.epoch.epoch != epoch.epoch) {
    pending_.erase(it);  // a rank of another epoch: start again
    it = pending_.end();
  }
  if (it == pending_.end()) {
    if (static_cast<int>(pending_.size()) >= kMaxPending) {
      GiveUp(AttemptOf(pending_.begin()->first, pending_.begin()->second));
      pending_.erase(pending_.begin());
    }
    it = pending_.emplace(key, Pending{epoch, adam_step, {}, {}}).first;
  }
  return it->second;
}

CheckpointAttempt CheckpointRegistry::AttemptOf(const Key& key,
                                                const Pending& p) {
  CheckpointAttempt a;
  a.step = key.first;
  a.dir = key.second;
  a.files_reported = static_cast<int>(p.files.size());
  a.files_expected = ShardRanks(p.epoch) * p.epoch.parallel.slots();
  for (const auto& [rank, why] : p.failures) {
    a.failures.push_back(absl::StrCat("rank ", rank, ": ", why));
  }
  return a;
}

void CheckpointRegistry::GiveUp(CheckpointAttempt attempt) {
  given_up_.push_back(std::move(attempt));
  if (given_up_.size() > kMaxGivenUp) given_up_.erase(given_up_.begin());
}

void CheckpointRegistry::AddFailure(int64_t step, const std::string& dir,
                                    int rank, const std::string& reason,
                                    const CheckpointEpoch& epoch) {
  PendingFor(std::make_pair(step, dir), epoch, 0).failures[rank] = reason;
}

bool CheckpointRegistry::MarkDamaged(const std::string& dir,
                                     const std::string& reason) {
  auto it =
      std::find_if(committed_.begin(), committed_.end(),
                   [&dir](const CheckpointRecord& c) { return c.dir == dir; });
  if (it == committed_.end()) return false;
  CheckpointAttempt a;
  a.step = it->step;
  a.dir = it->dir;
  a.files_reported = static_cast<int>(it->files.size());
  a.files_expected = a.files_reported;
  a.failures.push_back(absl::StrCat("damaged: ", reason));
  committed_.erase(it);
  GiveUp(std::move(a));
  return true;
}

std::vector<CheckpointAttempt> CheckpointRegistry::Incomplete() const {
  std::vector<CheckpointAttempt> out = given_up_;
  for (const auto& [key, p] : pending_) out.push_back(AttemptOf(key, p));
  return out;
}

void CheckpointRegistry::Commit(CheckpointRecord record) {
  const int64_t step = record.step;
  auto end = pending_.lower_bound(std::make_pair(step + 1, std::string()));
  for (auto it = pending_.begin(); it != end; ++it) {
    // The attempt being committed is complete; older ones never will be.
    if (it->first.first == step && it->first.second == record.dir) continue;
    GiveUp(AttemptOf(it->first, it->second));
  }
  pending_.erase(pending_.begin(), end);
  committed_.push_back(std::move(record));
  std::sort(committed_.begin(), committed_.end(),
            [](const CheckpointRecord& a, const CheckpointRecord& b) {
              return a.step < b.step;
            });
}

const CheckpointRecord* CheckpointRegistry::Newest() const {
  return committed_.empty() ? nullptr : &committed_.back();
}

}  // namespace zshard::server
