// TorchParamGroups and DecaySplit: the params in model order, split by
// their no_weight_decay mark.
#include "common/checkpoint/torch_param_groups.h"

namespace zshard::checkpoint {

std::vector<std::vector<int>> DecaySplit(const plan::ModelSpec& model) {
  std::vector<std::vector<int>> groups(2);
  for (int i = 0; i < static_cast<int>(model.params.size()); ++i) {
    groups[model.params[i].no_weight_decay ? 1 : 0].push_back(i);
  }
  return groups;
}

std::vector<TorchParamGroup> TorchParamGroups(const plan::ModelSpec& model,
                                              double weight_decay) {
  std::vector<std::vector<int>> split = DecaySplit(model);
  if (weight_decay != 0 && !split[0].empty() && !split[1].empty()) {
    return {TorchParamGroup{split[0], weight_decay},
            TorchParamGroup{split[1], 0.0}};
  }
  TorchParamGroup all;
  for (int i = 0; i < static_cast<int>(model.params.size()); ++i) {
    all.params.push_back(i);
  }
  // Every param decays, or none does.
  all.weight_decay = split[0].empty() ? 0.0 : weight_decay;
  return {all};
}

}  // namespace zshard::checkpoint
