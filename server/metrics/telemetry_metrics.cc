// RenderTelemetryMetrics: one sample per rank (and phase or category).
#include "server/metrics/telemetry_metrics.h"

#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace zshard::server {
namespace {

struct Family {
  const char* name;
  const char* help;
  std::string samples;
};

std::string Number(double v) { return absl::StrFormat("%.9g", v); }

}  // namespace

std::string EscapeLabelValue(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string RenderTelemetryMetrics(const ClusterView& view,
                                   TelemetryStore* telemetry) {
  Family step{"zshard_rank_step", "The latest step a rank reported.", ""};
  Family step_s{"zshard_rank_step_seconds",
                "The latest step's time (the sum of its phases).", ""};
  Family phase_s{"zshard_rank_phase_seconds",
                 "The latest step's time by phase.", ""};
  Family bytes{"zshard_rank_bytes_per_second",
               "Bytes sent plus received per second over the kept reports.",
               ""};
  Family memory{"zshard_rank_memory_bytes",
                "Memory a rank holds by category (param, grad, master, "
                "exp_avg, exp_avg_sq, comm).",
                ""};
  Family loss{"zshard_rank_loss", "The latest loss a rank reported.", ""};
  Family norm{"zshard_rank_grad_norm", "The latest global gradient norm.", ""};
  for (const MemberView& mv : view.members) {
    const Member& m = mv.member;
    if (!IsLive(m.state)) continue;
    std::optional<TelemetrySnapshot> s = telemetry->Get(m.worker_id, 0);
    if (!s.has_value()) continue;
    std::string labels =
        absl::StrCat("rank=\"", m.rank, "\",instance=\"", mv.instance,
                     "\",worker=\"", EscapeLabelValue(m.name), "\"");
    const TelemetryPoint& l = s->latest;
    absl::StrAppend(&step.samples, step.name, "{", labels, "} ", l.step, "\n");
    absl::StrAppend(&step_s.samples, step_s.name, "{", labels, "} ",
                    Number(l.step_ms / 1000.0), "\n");
    for (const auto& [phase, ms] : l.phases) {
      absl::StrAppend(&phase_s.samples, phase_s.name, "{", labels, ",phase=\"",
                      EscapeLabelValue(phase), "\"} ", Number(ms / 1000.0),
                      "\n");
    }
    absl::StrAppend(&bytes.samples, bytes.name, "{", labels, "} ",
                    Number(s->bytes_per_s), "\n");
    for (const auto& [category, n] : l.memory_bytes) {
      absl::StrAppend(&memory.samples, memory.name, "{", labels, ",category=\"",
                      EscapeLabelValue(category), "\"} ", n, "\n");
    }
    absl::StrAppend(&loss.samples, loss.name, "{", labels, "} ", Number(l.loss),
                    "\n");
    absl::StrAppend(&norm.samples, norm.name, "{", labels, "} ",
                    Number(l.grad_norm), "\n");
  }
  std::string out;
  for (const Family* f :
       {&step, &step_s, &phase_s, &bytes, &memory, &loss, &norm}) {
    absl::StrAppend(&out, "# HELP ", f->name, " ", f->help, "\n# TYPE ",
                    f->name, " gauge\n", f->samples);
  }
  return out;
}

}  // namespace zshard::server
