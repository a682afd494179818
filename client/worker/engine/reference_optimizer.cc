// ReferenceOptimizer: the gradient reduction's rounding and the scalar Adam.
#include "client/worker/engine/reference_optimizer.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "client/worker/engine/elements.h"
#include "client/worker/engine/model_state.h"
#include "client/worker/optim/adam.h"
#include "common/status.h"

namespace zshard::engine {
namespace {

// One rank's view: the shared params (its expert-parallel rank's copy of
// expert params), its own rounded grads.
class FlatState final : public ModelState {
 public:
  FlatState(const std::vector<std::vector<float>>& params,
            const std::vector<plan::DType>& grad_dtypes,
            const std::vector<int>& copies, int expert_rank)
      : params_(params),
        grad_dtypes_(grad_dtypes),
        copies_(copies),
        expert_rank_(expert_rank),
        grads_(params.size()) {}

  absl::StatusOr<std::vector<float>> ReadParam(int p) const override {
    const std::vector<float>& all = params_[p];
    const size_t n = all.size() / copies_[p];
    const size_t first = copies_[p] > 1 ? expert_rank_ * n : 0;
    return std::vector<float>(all.begin() + first, all.begin() + first + n);
  }
  absl::Status WriteGrad(int p, absl::Span<const float> values) override {
    grads_[p].resize(values.size());
    for (size_t j = 0; j < values.size(); ++j) {
      grads_[p][j] = RoundTo(grad_dtypes_[p], values[j]);
    }
    return absl::OkStatus();
  }
  const std::vector<float>& grad(int p) const { return grads_[p]; }

 private:
  const std::vector<std::vector<float>>& params_;
  const std::vector<plan::DType>& grad_dtypes_;
  const std::vector<int>& copies_;
  const int expert_rank_;
  std::vector<std::vector<float>> grads_;
};

}  // namespace

ReferenceOptimizer::ReferenceOptimizer(const plan::ModelSpec& model,
                                       const Options& options,
                                       const Workload& init)
    : ReferenceOptimizer(
          model, options,
          std::vector<const Workload*>(
              static_cast<size_t>(std::max(1, options.expert_parallel)),
              &init)) {}

ReferenceOptimizer::ReferenceOptimizer(const plan::ModelSpec& model,
                                       const Options& options,
                                       const std::vector<const Workload*>& init)
    : model_(model), options_(options) {
  if (options.expert_parallel < 1 ||
      static_cast<int>(init.size()) != options.expert_parallel) {
    init_status_ = absl::InvalidArgumentError(absl::StrCat(
        "reference optimizer: ", init.size(),
        " initial workloads for expert_parallel ", options.expert_parallel));
    return;
  }
  for (size_t p = 0; p < model.params.size(); ++p) {
    const int copies = Copies(static_cast<int>(p));
    const size_t n = static_cast<size_t>(model.params[p].numel());
    std::vector<float> values(n * copies);
    for (int e = 0; e < copies; ++e) {
      init[e]->InitialParam(static_cast<int>(p),
                            absl::MakeSpan(values.data() + e * n, n));
    }
    for (float& x : values) x = RoundTo(model.params[p].dtype, x);
    param_.push_back(values);
    master_.push_back(values);
    m_.emplace_back(values.size(), 0.0f);
    v_.emplace_back(values.size(), 0.0f);
  }
}

int ReferenceOptimizer::Copies(int p) const {
  return model_.params[p].expert ? options_.expert_parallel : 1;
}

absl::StatusOr<bool> ReferenceOptimizer::Step(
    const std::vector<Workload*>& rank_workloads) {
  ZSHARD_ASSIGN_OR_RETURN(const Reduced reduced, Reduce(rank_workloads));
  return Apply(reduced.sum_squares, reduced.finite);
}

absl::StatusOr<ReferenceOptimizer::Reduced> ReferenceOptimizer::Reduce(
    const std::vector<Workload*>& rank_workloads,
    const std::vector<bool>& norm_skips) {
  ZSHARD_RETURN_IF_ERROR(init_status_);
  const int world = options_.world, instances = options_.instances;
  const int experts = options_.expert_parallel;
  if (static_cast<int>(rank_workloads.size()) != world || instances < 1 ||
      world % instances != 0 || (world / instances) % experts != 0) {
    return absl::InvalidArgumentError(
        "reference optimizer: need one workload per rank, I dividing W and "
        "E dividing W / I");
  }
  const int d = world / instances;
  ++step_;
  std::vector<plan::DType> grad_dtypes;
  std::vector<int> copies;
  for (size_t p = 0; p < model_.params.size(); ++p) {
    grad_dtypes.push_back(options_.grad_reduce_in_fp32
                              ? plan::DType::kFp32
                              : model_.params[p].dtype);
    copies.push_back(Copies(static_cast<int>(p)));
  }
  std::vector<FlatState> states;
  states.reserve(world);
  for (int r = 0; r < world; ++r) {
    states.emplace_back(param_, grad_dtypes, copies, r % experts);
    ZSHARD_RETURN_IF_ERROR(
        rank_workloads[r]->Gradients(step_, states[r]).status());
  }
  // The global gradient, rounded as the collectives round it: copy c of a
  // param with C copies is reduce-scattered over the G = D / C ranks
  // i*D + k*C + c (k = 0 .. G-1) of each instance i, then all-reduced
  // across instances.
  std::vector<std::vector<float>>& grads = grads_;
  grads.assign(model_.params.size(), {});
  Reduced out;
  for (size_t p = 0; p < model_.params.size(); ++p) {
    const bool counts = p >= norm_skips.size() || !norm_skips[p];
    const plan::DType gd = grad_dtypes[p];
    const int c_count = copies[p];
    const int g = d / c_count;
    const size_t n = param_[p].size() / c_count;
    grads[p].resize(param_[p].size());
    for (int c = 0; c < c_count; ++c) {
      for (size_t j = 0; j < n; ++j) {
        float total = 0;
        for (int i = 0; i < instances; ++i) {
          const int first = i * d + c;
          float part = states[first].grad(p)[j];
          for (int k = 1; k < g; ++k) {
            part += states[first + k * c_count].grad(p)[j];
          }
          if (g > 1) part = RoundTo(gd, part);
          total = i == 0 ? part : total + part;
        }
        if (instances > 1) total = RoundTo(gd, total);
        grads[p][c * n + j] = total;
        if (!std::isfinite(total)) out.finite = false;
        if (counts) out.sum_squares += static_cast<double>(total) * total;
      }
    }
  }
  batch_ = static_cast<double>(rank_workloads[0]->global_batch());
  return out;
}

absl::StatusOr<bool> ReferenceOptimizer::Apply(double sum_squares,
                                               bool finite) {
  ZSHARD_RETURN_IF_ERROR(init_status_);
  if (grads_.size() != model_.params.size()) {
    return absl::FailedPreconditionError(
        "reference optimizer: Apply needs a Reduce first");
  }
  std::vector<std::vector<float>> grads = std::move(grads_);
  grads_.clear();
  const double batch = batch_;
  last_grad_norm_ = std::sqrt(sum_squares) / batch;
  if (!finite) return false;
  optim::AdamHyper hyper;
  hyper.lr = job::LearningRate(options_.optimizer.lr_schedule,
                               options_.optimizer.lr, step_);
  hyper.beta1 = options_.optimizer.beta1;
  hyper.beta2 = options_.optimizer.beta2;
  hyper.eps = options_.optimizer.eps;
  hyper.weight_decay = options_.optimizer.weight_decay;
  ZSHARD_ASSIGN_OR_RETURN(
      const optim::AdamStepParams s,
      optim::MakeAdamStepParams(
          hyper, adam_step_ + 1,
          optim::GradScale(batch, last_grad_norm_,
                           options_.optimizer.clip_grad_norm)));
  ++adam_step_;
  for (size_t p = 0; p < model_.params.size(); ++p) {
    const float decay = model_.params[p].no_weight_decay ? 1.0f : s.decay;
    for (size_t j = 0; j < grads[p].size(); ++j) {
      optim::AdamUpdate<float>(s, decay, grads[p][j], master_[p][j], m_[p][j],
                               v_[p][j]);
      param_[p][j] = RoundTo(model_.params[p].dtype, master_[p][j]);
    }
  }
  return true;
}

}  // namespace zshard::engine
