// How zshard's one AdamW over a model maps onto torch.optim.AdamW's param
// groups: one group of every param, or, when some params (not all) are
// marked no_weight_decay and weight decay is on, two groups: the decaying
// params, then the others with weight_decay 0, as a torch user builds
// them. The position of a param in the groups taken in order is its index
// in the optimizer's state_dict.
#pragma once

#include <vector>

#include "common/plan/model_spec.h"

namespace zshard::checkpoint {

struct TorchParamGroup {
  std::vector<int> params;  // indices into model.params, ascending
  double weight_decay = 0;
};

// The groups for a job whose AdamW has `weight_decay`.
std::vector<TorchParamGroup> TorchParamGroups(const plan::ModelSpec& model,
                                              double weight_decay);

// The two-group split whatever the weight decay: the params without the
// no_weight_decay mark, then those with it (either may be empty).
std::vector<std::vector<int>> DecaySplit(const plan::ModelSpec& model);

}  // namespace zshard::checkpoint
