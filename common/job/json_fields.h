// Typed, path-naming access to the fields of a JSON object, for spec
// parsers: every wrong type, range or unknown key becomes one
// InvalidArgument line that names the field ("world.max must be ...").
#pragma once

#include <cstdint>
#include <set>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace zshard::job {

// Reads fields of one JSON object named `path` (e.g. "world"). Not
// thread-safe; borrows `object`, which must outlive the reader.
class JsonFields {
 public:
  // InvalidArgument unless `object` is a JSON object.
  static absl::StatusOr<JsonFields> Open(const nlohmann::json& object,
                                         std::string path);

  bool Has(const std::string& key) const;
  // The dotted name of `key` ("world.max").
  std::string Name(const std::string& key) const;
  // The object's own dotted name ("" for the job spec itself).
  const std::string& path() const { return path_; }
  // Whether a getter has asked for `key` (present or not).
  bool Asked(const std::string& key) const { return seen_.count(key) != 0; }

  // Each getter returns `fallback` when the key is absent and
  // InvalidArgument when it is present with the wrong type or range.
  absl::StatusOr<int64_t> Int(const std::string& key, int64_t fallback,
                              int64_t min, int64_t max);
  absl::StatusOr<double> Double(const std::string& key, double fallback,
                                double min, double max);
  absl::StatusOr<bool> Bool(const std::string& key, bool fallback);
  absl::StatusOr<std::string> String(const std::string& key,
                                     std::string fallback, size_t max_len);
  // The sub-object at `key`; `empty` when absent (so defaults apply).
  absl::StatusOr<const nlohmann::json*> Object(const std::string& key);

  // InvalidArgument naming the first key that no getter asked for.
  absl::Status CheckNoUnknown() const;

 private:
  JsonFields(const nlohmann::json& object, std::string path)
      : object_(&object), path_(std::move(path)) {}

  const nlohmann::json* object_;
  std::string path_;
  std::set<std::string> seen_;
};

}  // namespace zshard::job
