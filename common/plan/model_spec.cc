// Model spec parsing and validation: JSON in, a validated ModelSpec out, and
// one lower-case line naming the param and field for every kind of bad input.
#include "common/plan/model_spec.h"

#include <exception>
#include <limits>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "nlohmann/json.hpp"

namespace zshard::plan {
namespace {

constexpr int64_t kMaxInt64 = std::numeric_limits<int64_t>::max();

// A name quoted for an error message: escaped so the message stays on one
// line, and shortened so it stays readable.
std::string Quote(absl::string_view name) {
  constexpr size_t kMaxShown = 80;
  std::string escaped = absl::CEscape(name.substr(0, kMaxShown));
  if (name.size() > kMaxShown) absl::StrAppend(&escaped, "...");
  return absl::StrCat("'", escaped, "'");
}

absl::Status SpecError(absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat("model spec: ", message));
}

absl::StatusOr<bool> ReadFlag(const nlohmann::json& p, const char* field,
                              absl::string_view who) {
  auto it = p.find(field);
  if (it == p.end()) return false;
  if (!it->is_boolean()) {
    return SpecError(
        absl::StrCat(who, " field '", field, "' is not a boolean"));
  }
  return it->get<bool>();
}

// Parses "shape": a non-empty array of integer dimensions >= 1 whose
// product fits in int64.
absl::StatusOr<std::vector<int64_t>> ReadShape(const nlohmann::json& p,
                                               absl::string_view who) {
  auto it = p.find("shape");
  if (it == p.end()) return SpecError(absl::StrCat(who, " has no 'shape'"));
  if (!it->is_array()) {
    return SpecError(absl::StrCat(who, " field 'shape' is not an array"));
  }
  if (it->empty()) {
    return SpecError(absl::StrCat(who, " field 'shape' is empty"));
  }
  std::vector<int64_t> shape;
  int64_t numel = 1;
  for (size_t d = 0; d < it->size(); ++d) {
    const nlohmann::json& dim = (*it)[d];
    std::string where = absl::StrCat(who, " field 'shape' dimension ", d);
    int64_t value = 0;
    if (dim.is_number_unsigned()) {
      uint64_t u = dim.get<uint64_t>();
      if (u > static_cast<uint64_t>(kMaxInt64)) {
        return SpecError(absl::StrCat(where, " is too large"));
      }
      value = static_cast<int64_t>(u);
    } else if (dim.is_number_integer()) {
      value = dim.get<int64_t>();
    } else {
      return SpecError(absl::StrCat(where, " is not an integer"));
    }
    if (value == 0) return SpecError(absl::StrCat(where, " is zero"));
    if (value < 0) {
      return SpecError(absl::StrCat(where, " is negative (", value, ")"));
    }
    if (numel > kMaxInt64 / value) {
      return SpecError(
          absl::StrCat(who, " field 'shape' has more than 2^63-1 elements"));
    }
    numel *= value;
    shape.push_back(value);
  }
  return shape;
}

absl::StatusOr<ParamSpec> ReadParam(const nlohmann::json& p, size_t index) {
  std::string who = absl::StrCat("param ", index);
  if (!p.is_object()) return SpecError(absl::StrCat(who, " is not an object"));
  auto name = p.find("name");
  if (name == p.end()) return SpecError(absl::StrCat(who, " has no 'name'"));
  if (!name->is_string()) {
    return SpecError(absl::StrCat(who, " field 'name' is not a string"));
  }
  ParamSpec param;
  param.name = name->get<std::string>();
  if (param.name.empty()) {
    return SpecError(absl::StrCat(who, " field 'name' is empty"));
  }
  who = absl::StrCat("param ", Quote(param.name));
  for (const auto& item : p.items()) {
    const std::string& key = item.key();
    if (key != "name" && key != "shape" && key != "dtype" && key != "expert" &&
        key != "shared_embedding" && key != "no_weight_decay" &&
        key != "tp_replicated") {
      return SpecError(absl::StrCat(who, " has unknown field ", Quote(key)));
    }
  }
  ZSHARD_ASSIGN_OR_RETURN(param.shape, ReadShape(p, who));
  auto dtype = p.find("dtype");
  if (dtype != p.end()) {
    if (!dtype->is_string()) {
      return SpecError(absl::StrCat(who, " field 'dtype' is not a string"));
    }
    const std::string& text = dtype->get_ref<const std::string&>();
    absl::StatusOr<DType> parsed = ParseDType(text);
    if (!parsed.ok()) {
      return SpecError(absl::StrCat(who, " field 'dtype' is unknown: ",
                                    Quote(text), " (want bf16, fp16 or fp32)"));
    }
    param.dtype = *parsed;
  }
  ZSHARD_ASSIGN_OR_RETURN(param.expert, ReadFlag(p, "expert", who));
  ZSHARD_ASSIGN_OR_RETURN(param.shared_embedding,
                          ReadFlag(p, "shared_embedding", who));
  ZSHARD_ASSIGN_OR_RETURN(param.no_weight_decay,
                          ReadFlag(p, "no_weight_decay", who));
  ZSHARD_ASSIGN_OR_RETURN(param.tp_replicated,
                          ReadFlag(p, "tp_replicated", who));
  return param;
}

}  // namespace

const char* DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kBf16:
      return "bf16";
    case DType::kFp16:
      return "fp16";
    case DType::kFp32:
      return "fp32";
  }
  return "unknown";
}

absl::StatusOr<DType> ParseDType(absl::string_view name) {
  if (name == "bf16") return DType::kBf16;
  if (name == "fp16") return DType::kFp16;
  if (name == "fp32") return DType::kFp32;
  return absl::InvalidArgumentError(absl::StrCat("unknown dtype ", Quote(name),
                                                 " (want bf16, fp16 or fp32)"));
}

int DTypeBytes(DType dtype) { return dtype == DType::kFp32 ? 4 : 2; }

int64_t ParamSpec::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int64_t ModelSpec::numel() const {
  int64_t n = 0;
  for (const ParamSpec& p : params) n += p.numel();
  return n;
}

absl::StatusOr<ModelSpec> ModelSpecFromJson(const nlohmann::json& j) {
  if (!j.is_object()) return SpecError("top level is not a json object");
  ModelSpec spec;
  auto name = j.find("name");
  if (name != j.end()) {
    if (!name->is_string()) return SpecError("field 'name' is not a string");
    spec.name = name->get<std::string>();
  }
  auto params = j.find("params");
  if (params == j.end()) return SpecError("'params' is missing");
  if (!params->is_array()) return SpecError("'params' is not an array");
  if (params->empty()) return SpecError("'params' is empty");
  absl::flat_hash_map<std::string, size_t> seen;
  int64_t total = 0;
  for (size_t i = 0; i < params->size(); ++i) {
    ZSHARD_ASSIGN_OR_RETURN(ParamSpec param, ReadParam((*params)[i], i));
    auto [it, inserted] = seen.emplace(param.name, i);
    if (!inserted) {
      return SpecError(absl::StrCat("duplicate param name ", Quote(param.name),
                                    " (params ", it->second, " and ", i, ")"));
    }
    int64_t n = param.numel();
    if (total > kMaxInt64 - n) {
      return SpecError(
          absl::StrCat("total element count overflows int64 at "
                       "param ",
                       Quote(param.name)));
    }
    total += n;
    spec.params.push_back(std::move(param));
  }
  return spec;
}

absl::Status ValidateModelSpec(const ModelSpec& spec) {
  if (spec.params.empty()) return SpecError("'params' is empty");
  absl::flat_hash_map<absl::string_view, size_t> seen;
  int64_t total = 0;
  for (size_t i = 0; i < spec.params.size(); ++i) {
    const ParamSpec& p = spec.params[i];
    if (p.name.empty()) {
      return SpecError(absl::StrCat("param ", i, " field 'name' is empty"));
    }
    auto [it, inserted] = seen.emplace(p.name, i);
    if (!inserted) {
      return SpecError(absl::StrCat("duplicate param name ", Quote(p.name),
                                    " (params ", it->second, " and ", i, ")"));
    }
    std::string who = absl::StrCat("param ", Quote(p.name));
    if (p.shape.empty()) {
      return SpecError(absl::StrCat(who, " field 'shape' is empty"));
    }
    int64_t numel = 1;
    for (size_t d = 0; d < p.shape.size(); ++d) {
      if (p.shape[d] < 1) {
        return SpecError(absl::StrCat(who, " field 'shape' dimension ", d,
                                      " is not >= 1 (", p.shape[d], ")"));
      }
      if (numel > kMaxInt64 / p.shape[d]) {
        return SpecError(
            absl::StrCat(who, " field 'shape' has more than 2^63-1 elements"));
      }
      numel *= p.shape[d];
    }
    if (total > kMaxInt64 - numel) {
      return SpecError(absl::StrCat(
          "total element count overflows int64 at param ", Quote(p.name)));
    }
    total += numel;
  }
  return absl::OkStatus();
}

absl::StatusOr<ModelSpec> ParseModelSpec(absl::string_view json_text) {
  // nlohmann reports syntax errors by exception; this is the boundary where
  // they become a status.
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(json_text.begin(), json_text.end());
  } catch (const std::exception& e) {
    std::string what = e.what();
    for (char& c : what) {
      if (c == '\n' || c == '\r') c = ' ';
    }
    return SpecError(absl::StrCat("invalid json: ", what));
  }
  return ModelSpecFromJson(j);
}

std::string ModelSpecToJson(const ModelSpec& spec) {
  nlohmann::ordered_json params = nlohmann::ordered_json::array();
  for (const ParamSpec& p : spec.params) {
    nlohmann::ordered_json jp;
    jp["name"] = p.name;
    jp["shape"] = p.shape;
    jp["dtype"] = DTypeName(p.dtype);
    if (p.expert) jp["expert"] = true;
    if (p.shared_embedding) jp["shared_embedding"] = true;
    if (p.no_weight_decay) jp["no_weight_decay"] = true;
    if (p.tp_replicated) jp["tp_replicated"] = true;
    params.push_back(std::move(jp));
  }
  nlohmann::ordered_json j;
  j["name"] = spec.name;
  j["params"] = std::move(params);
  return j.dump(-1, ' ', false,
                nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace zshard::plan
