#include "tools/bench/baseline.h"

#include <sys/wait.h>

#include <cstdio>

#include "absl/strings/str_cat.h"

namespace zshard::bench {

absl::StatusOr<nlohmann::json> RunJsonCommand(const std::string& command) {
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) {
    return absl::UnavailableError(absl::StrCat("cannot run '", command, "'"));
  }
  std::string out;
  char buf[4096];
  size_t got;
  while ((got = fread(buf, 1, sizeof(buf), pipe)) > 0) out.append(buf, got);
  const int status = pclose(pipe);
  if (status != 0) {
    return absl::UnavailableError(
        absl::StrCat("baseline '", command, "' failed (exit status ",
                     WIFEXITED(status) ? WEXITSTATUS(status) : -1, ")"));
  }
  const size_t brace = out.rfind('{');
  nlohmann::json j =
      brace == std::string::npos
          ? nlohmann::json(nlohmann::json::value_t::discarded)
          : nlohmann::json::parse(out.substr(brace), nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InternalError(
        absl::StrCat("baseline '", command, "' printed no JSON object"));
  }
  return j;
}

}  // namespace zshard::bench
