// Typed JSON field access with field-naming errors.
#include "common/job/json_fields.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"

namespace zshard::job {
namespace {

const nlohmann::json& EmptyObject() {
  static const nlohmann::json* const kEmpty =
      new nlohmann::json(nlohmann::json::object());
  return *kEmpty;
}

}  // namespace

absl::StatusOr<JsonFields> JsonFields::Open(const nlohmann::json& object,
                                            std::string path) {
  if (!object.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path.empty() ? "job spec" : path, " must be an object"));
  }
  return JsonFields(object, std::move(path));
}

bool JsonFields::Has(const std::string& key) const {
  return object_->contains(key);
}

std::string JsonFields::Name(const std::string& key) const {
  return path_.empty() ? key : absl::StrCat(path_, ".", key);
}

absl::StatusOr<int64_t> JsonFields::Int(const std::string& key,
                                        int64_t fallback, int64_t min,
                                        int64_t max) {
  seen_.insert(key);
  if (!Has(key)) return fallback;
  const nlohmann::json& v = (*object_)[key];
  if (!v.is_number_integer()) {
    return absl::InvalidArgumentError(
        absl::StrCat(Name(key), " must be an integer"));
  }
  bool in_range;
  int64_t value = 0;
  if (v.is_number_unsigned()) {
    uint64_t u = v.get<uint64_t>();
    in_range = u <= static_cast<uint64_t>(max);
    value = in_range ? static_cast<int64_t>(u) : max;
    in_range = in_range && value >= min;
  } else {
    value = v.get<int64_t>();
    in_range = value >= min && value <= max;
  }
  if (!in_range) {
    return absl::InvalidArgumentError(absl::StrCat(
        Name(key), " must be in [", min, ", ", max, "], got ", v.dump()));
  }
  return value;
}

absl::StatusOr<double> JsonFields::Double(const std::string& key,
                                          double fallback, double min,
                                          double max) {
  seen_.insert(key);
  if (!Has(key)) return fallback;
  const nlohmann::json& v = (*object_)[key];
  if (!v.is_number()) {
    return absl::InvalidArgumentError(
        absl::StrCat(Name(key), " must be a number"));
  }
  double value = v.get<double>();
  if (!std::isfinite(value) || value < min || value > max) {
    return absl::InvalidArgumentError(absl::StrCat(
        Name(key), " must be in [", min, ", ", max, "], got ", v.dump()));
  }
  return value;
}

absl::StatusOr<bool> JsonFields::Bool(const std::string& key, bool fallback) {
  seen_.insert(key);
  if (!Has(key)) return fallback;
  const nlohmann::json& v = (*object_)[key];
  if (!v.is_boolean()) {
    return absl::InvalidArgumentError(
        absl::StrCat(Name(key), " must be true or false"));
  }
  return v.get<bool>();
}

absl::StatusOr<std::string> JsonFields::String(const std::string& key,
                                               std::string fallback,
                                               size_t max_len) {
  seen_.insert(key);
  if (!Has(key)) return fallback;
  const nlohmann::json& v = (*object_)[key];
  if (!v.is_string()) {
    return absl::InvalidArgumentError(
        absl::StrCat(Name(key), " must be a string"));
  }
  std::string value = v.get<std::string>();
  if (value.size() > max_len) {
    return absl::InvalidArgumentError(
        absl::StrCat(Name(key), " is longer than ", max_len, " characters"));
  }
  return value;
}

absl::StatusOr<const nlohmann::json*> JsonFields::Object(
    const std::string& key) {
  seen_.insert(key);
  if (!Has(key)) return &EmptyObject();
  const nlohmann::json& v = (*object_)[key];
  if (!v.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(Name(key), " must be an object"));
  }
  return &v;
}

absl::Status JsonFields::CheckNoUnknown() const {
  for (const auto& item : object_->items()) {
    if (seen_.count(item.key()) == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown field ", Name(item.key())));
    }
  }
  return absl::OkStatus();
}

}  // namespace zshard::job
