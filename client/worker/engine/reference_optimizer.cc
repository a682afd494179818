// ReferenceOptimizer: the gradient reduction's rounding and the scalar Adam.
#include "client/worker/engine/reference_optimizer.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "client/worker/engine/elements.h"
#include "client/worker/engine/model_state.h"
#include "client/worker/optim/adam.h"
#include "common/status.h"

namespace zshard::engine {
namespace {

// One rank's view: the shared params, its own rounded grads.
class FlatState final : public ModelState {
 public:
  FlatState(const std::vector<std::vector<float>>& params,
            const std::vector<plan::DType>& grad_dtypes)
      : params_(params), grad_dtypes_(grad_dtypes), grads_(params.size()) {}

  absl::StatusOr<std::vector<float>> ReadParam(int p) const override {
    return params_[p];
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
  std::vector<std::vector<float>> grads_;
};

}  // namespace

ReferenceOptimizer::ReferenceOptimizer(const plan::ModelSpec& model,
                                       const Options& options,
                                       const Workload& init)
    : model_(model), options_(options) {
  for (size_t p = 0; p < model.params.size(); ++p) {
    std::vector<float> values(model.params[p].numel());
    init.InitialParam(static_cast<int>(p), absl::MakeSpan(values));
    for (float& x : values) x = RoundTo(model.params[p].dtype, x);
    param_.push_back(values);
    master_.push_back(values);
    m_.emplace_back(values.size(), 0.0f);
    v_.emplace_back(values.size(), 0.0f);
  }
}

absl::StatusOr<bool> ReferenceOptimizer::Step(
    const std::vector<Workload*>& rank_workloads) {
  const int world = options_.world, instances = options_.instances;
  if (static_cast<int>(rank_workloads.size()) != world || instances < 1 ||
      world % instances != 0) {
    return absl::InvalidArgumentError(
        "reference optimizer: need one workload per rank and I dividing W");
  }
  const int d = world / instances;
  ++step_;
  std::vector<plan::DType> grad_dtypes;
  for (const plan::ParamSpec& p : model_.params) {
    grad_dtypes.push_back(options_.grad_reduce_in_fp32 ? plan::DType::kFp32
                                                       : p.dtype);
  }
  std::vector<FlatState> states;
  states.reserve(world);
  for (int r = 0; r < world; ++r) {
    states.emplace_back(param_, grad_dtypes);
    ZSHARD_RETURN_IF_ERROR(
        rank_workloads[r]->Gradients(step_, states[r]).status());
  }
  // The global gradient, rounded as the collectives round it.
  std::vector<std::vector<float>> grads(model_.params.size());
  double sq = 0;
  bool finite = true;
  for (size_t p = 0; p < model_.params.size(); ++p) {
    const plan::DType gd = grad_dtypes[p];
    grads[p].resize(param_[p].size());
    for (size_t j = 0; j < grads[p].size(); ++j) {
      float total = 0;
      for (int i = 0; i < instances; ++i) {
        float part = states[i * d].grad(p)[j];
        for (int k = 1; k < d; ++k) part += states[i * d + k].grad(p)[j];
        if (d > 1) part = RoundTo(gd, part);
        total = i == 0 ? part : total + part;
      }
      if (instances > 1) total = RoundTo(gd, total);
      grads[p][j] = total;
      if (!std::isfinite(total)) finite = false;
      sq += static_cast<double>(total) * total;
    }
  }
  const double batch = static_cast<double>(rank_workloads[0]->global_batch());
  last_grad_norm_ = std::sqrt(sq) / batch;
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
