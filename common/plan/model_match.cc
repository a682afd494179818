#include "common/plan/model_match.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace zshard::plan {
namespace {

std::string ShapeText(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

}  // namespace

absl::Status MatchModel(const ModelSpec& want_model,
                        const ModelSpec& got_model) {
  const std::vector<ParamSpec>& want = want_model.params;
  const std::vector<ParamSpec>& got = got_model.params;
  for (size_t i = 0; i < want.size() && i < got.size(); ++i) {
    const ParamSpec& a = got[i];
    const ParamSpec& b = want[i];
    auto mismatch = [&](const std::string& field, const std::string& have,
                        const std::string& expected) {
      return absl::InvalidArgumentError(
          absl::StrCat("the trainer's model does not match the job's: param ",
                       i, " '", a.name, "' has ", field, " ", have,
                       ", the job's '", b.name, "' has ", expected));
    };
    if (a.name != b.name) return mismatch("name", a.name, b.name);
    if (a.shape != b.shape) {
      return mismatch("shape", ShapeText(a.shape), ShapeText(b.shape));
    }
    if (a.dtype != b.dtype) {
      return mismatch("dtype", DTypeName(a.dtype), DTypeName(b.dtype));
    }
  }
  if (got.size() != want.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the trainer's model does not match the job's: it has ", got.size(),
        " params, the job's has ", want.size(),
        got.size() < want.size()
            ? absl::StrCat(" (first missing: '", want[got.size()].name, "')")
            : absl::StrCat(" (first extra: '", got[want.size()].name, "')")));
  }
  return absl::OkStatus();
}

}  // namespace zshard::plan
