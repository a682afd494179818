// Master dumps: writing one rank's pieces and assembling a whole model.
#include "client/worker/engine/master_dump.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "client/worker/engine/engine_groups.h"
#include "common/file_io.h"
#include "common/status.h"
#include "nlohmann/json.hpp"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "master dumps are written as little-endian float32");

namespace zshard::engine {

absl::Status DumpMasters(const EngineBuffers& buffers, absl::string_view dir) {
  std::error_code ec;
  std::filesystem::create_directories(std::string(dir), ec);
  if (ec) {
    return absl::InternalError(
        absl::StrCat("master dump: cannot create '", dir, "': ", ec.message()));
  }
  const int rank = buffers.rank_plan().rank;
  nlohmann::json index = nlohmann::json::array();
  std::vector<float> values;
  int n = 0;
  for (size_t w = 0; w < buffers.windows().size(); ++w) {
    const WindowState& win = buffers.windows()[w];
    for (const plan::Piece& piece : win.pieces) {
      const std::string file = absl::StrCat("master-", rank, "-", n++, ".f32");
      // Out of the device through its staging copy.
      values.resize(static_cast<size_t>(piece.end - piece.start));
      ZSHARD_RETURN_IF_ERROR(buffers.ReadState(
          StateArray::kMaster, static_cast<int>(w), piece.start - win.start,
          piece.end - piece.start, values.data()));
      const absl::string_view bytes(
          reinterpret_cast<const char*>(values.data()),
          values.size() * sizeof(float));
      ZSHARD_RETURN_IF_ERROR(
          WriteFileAtomic(absl::StrCat(dir, "/", file), bytes));
      nlohmann::json entry = {
          {"param", buffers.model().params[piece.param_index].name},
          {"param_start", piece.param_start},
          {"param_end", piece.param_end},
          {"file", file}};
      if (buffers.model().params[piece.param_index].expert) {
        entry["expert_rank"] = StateExpertRank(buffers.model(), buffers.plan(),
                                               rank, piece.param_index);
      }
      index.push_back(std::move(entry));
    }
  }
  return WriteFileAtomic(absl::StrCat(dir, "/index-", rank, ".json"),
                         index.dump(1));
}

absl::StatusOr<std::map<std::string, std::vector<float>>> LoadMasters(
    absl::string_view dir, const plan::ModelSpec& model, int expert_parallel) {
  std::map<std::string, std::vector<float>> values;
  std::map<std::string, std::vector<bool>> covered;
  std::map<std::string, int> copies;  // E for expert params, else 1
  for (const plan::ParamSpec& p : model.params) {
    copies[p.name] = p.expert ? std::max(1, expert_parallel) : 1;
    values[p.name].assign(p.numel() * copies[p.name], 0.0f);
    covered[p.name].assign(p.numel() * copies[p.name], false);
  }
  std::error_code ec;
  std::filesystem::directory_iterator it(std::string(dir), ec);
  if (ec) {
    return absl::InvalidArgumentError(
        absl::StrCat("master dump: cannot list '", dir, "': ", ec.message()));
  }
  for (const auto& entry : it) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("index-", 0) != 0) continue;
    ZSHARD_ASSIGN_OR_RETURN(const std::string text,
                            ReadFile(entry.path().string()));
    const nlohmann::json index = nlohmann::json::parse(text, nullptr, false);
    if (!index.is_array()) {
      return absl::InvalidArgumentError(
          absl::StrCat("master dump: index '", name, "' is not a json list"));
    }
    for (const nlohmann::json& e : index) {
      if (!e.is_object() || !e.contains("param") || !e["param"].is_string() ||
          !e.contains("param_start") || !e["param_start"].is_number_integer() ||
          !e.contains("param_end") || !e["param_end"].is_number_integer() ||
          !e.contains("file") || !e["file"].is_string() ||
          (e.contains("expert_rank") &&
           !e["expert_rank"].is_number_integer())) {
        return absl::InvalidArgumentError(
            absl::StrCat("master dump: malformed entry in '", name, "'"));
      }
      const std::string param = e["param"].get<std::string>();
      const int64_t a = e["param_start"].get<int64_t>();
      const int64_t b = e["param_end"].get<int64_t>();
      const int64_t expert =
          e.contains("expert_rank") ? e["expert_rank"].get<int64_t>() : 0;
      auto v = values.find(param);
      if (v == values.end()) {
        return absl::InvalidArgumentError(
            absl::StrCat("master dump: unknown param '", param, "'"));
      }
      const int64_t numel =
          static_cast<int64_t>(v->second.size()) / copies[param];
      if (expert < 0 || expert >= copies[param]) {
        return absl::InvalidArgumentError(
            absl::StrCat("master dump: param '", param, "' has no expert rank ",
                         expert, " in '", name, "'"));
      }
      if (a < 0 || b <= a || b > numel) {
        return absl::InvalidArgumentError(absl::StrCat(
            "master dump: param '", param, "' range is out of bounds"));
      }
      ZSHARD_ASSIGN_OR_RETURN(
          const std::string data,
          ReadFile(absl::StrCat(dir, "/", e["file"].get<std::string>())));
      if (data.size() != static_cast<size_t>(b - a) * sizeof(float)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "master dump: file of param '", param, "' has the wrong size"));
      }
      std::vector<bool>& cov = covered[param];
      for (int64_t j = a + expert * numel; j < b + expert * numel; ++j) {
        float x;
        std::memcpy(&x, data.data() + (j - a - expert * numel) * sizeof(float),
                    sizeof(x));
        if (cov[j] && std::memcmp(&x, &v->second[j], sizeof(x)) != 0) {
          return absl::InvalidArgumentError(
              absl::StrCat("master dump: replicas of param '", param,
                           "' element ", j, " disagree"));
        }
        v->second[j] = x;
        cov[j] = true;
      }
    }
  }
  for (const auto& [param, cov] : covered) {
    const size_t numel = cov.size() / copies[param];
    for (size_t j = 0; j < cov.size(); ++j) {
      if (!cov[j]) {
        return absl::InvalidArgumentError(absl::StrCat(
            "master dump: param '", param, "' element ", j % numel,
            copies[param] > 1 ? absl::StrCat(" of expert rank ", j / numel)
                              : std::string(),
            " is missing"));
      }
    }
  }
  return values;
}

}  // namespace zshard::engine
