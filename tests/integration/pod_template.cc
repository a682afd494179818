// ReadContainerTemplate: an indentation reader for the block-style subset of
// YAML the manifests use; ResolveEnv and ExpandReferences: the kubelet's
// downward API and $(VAR) expansion.

#include "tests/integration/pod_template.h"

#include <cstddef>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace zshard::testing {
namespace {

// A meaningful line: its indentation and its text without the indentation
// and without a trailing comment.
struct Line {
  int indent = 0;
  std::string text;
};

// `raw` without a " #" comment that is outside quotes.
std::string StripComment(const std::string& raw) {
  char quote = 0;
  for (size_t i = 0; i < raw.size(); ++i) {
    const char c = raw[i];
    if (quote != 0) {
      if (c == quote) quote = 0;
    } else if (c == '"' || c == '\'') {
      quote = c;
    } else if (c == '#' && (i == 0 || raw[i - 1] == ' ')) {
      return raw.substr(0, i);
    }
  }
  return raw;
}

std::vector<Line> Lines(absl::string_view yaml) {
  std::vector<Line> lines;
  for (absl::string_view raw : absl::StrSplit(yaml, '\n')) {
    std::string text = StripComment(std::string(raw));
    while (!text.empty() && (text.back() == ' ' || text.back() == '\r')) {
      text.pop_back();
    }
    const size_t first = text.find_first_not_of(' ');
    if (first == std::string::npos) continue;
    lines.push_back({static_cast<int>(first), text.substr(first)});
  }
  return lines;
}

// A scalar without its quotes.
std::string Unquote(absl::string_view s) {
  if (s.size() >= 2 && s.front() == '"' && s.back() == '"') {
    std::string out;
    for (size_t i = 1; i + 1 < s.size(); ++i) {
      if (s[i] == '\\' && i + 2 < s.size()) ++i;
      out.push_back(s[i]);
    }
    return out;
  }
  if (s.size() >= 2 && s.front() == '\'' && s.back() == '\'') {
    std::string out;
    for (size_t i = 1; i + 1 < s.size(); ++i) {
      out.push_back(s[i]);
      if (s[i] == '\'' && i + 2 < s.size() && s[i + 1] == '\'') ++i;
    }
    return out;
  }
  return std::string(s);
}

// "key: value" -> (key, value); nullopt when the text is not a mapping
// entry.
std::optional<std::pair<std::string, std::string>> KeyValue(
    absl::string_view text) {
  const size_t colon = text.find(": ");
  if (absl::EndsWith(text, ":") && text.find(": ") == absl::string_view::npos) {
    return std::make_pair(std::string(text.substr(0, text.size() - 1)),
                          std::string());
  }
  if (colon == absl::string_view::npos) return std::nullopt;
  return std::make_pair(
      std::string(text.substr(0, colon)),
      std::string(absl::StripAsciiWhitespace(text.substr(colon + 2))));
}

// The items of a flow list of scalars ("[a, "b c"]").
absl::StatusOr<std::vector<std::string>> FlowList(absl::string_view text) {
  if (text.size() < 2 || text.front() != '[' || text.back() != ']') {
    return absl::InvalidArgumentError(
        absl::StrCat("'", text, "' is not a flow list"));
  }
  std::vector<std::string> items;
  absl::string_view inner = text.substr(1, text.size() - 2);
  if (absl::StripAsciiWhitespace(inner).empty()) return items;
  for (absl::string_view item : absl::StrSplit(inner, ", ")) {
    items.push_back(Unquote(absl::StripAsciiWhitespace(item)));
  }
  return items;
}

// The lines of the sequence under the key at lines[key] (indent k): from
// key + 1 while a line is deeper than k, or at k and a "- " item.
size_t SequenceEnd(const std::vector<Line>& lines, size_t key) {
  const int k = lines[key].indent;
  size_t i = key + 1;
  while (i < lines.size() &&
         (lines[i].indent > k ||
          (lines[i].indent == k && absl::StartsWith(lines[i].text, "- ")))) {
    ++i;
  }
  return i;
}

// A sequence of scalars (block or flow) under the key at lines[key].
absl::StatusOr<std::vector<std::string>> Scalars(
    const std::vector<Line>& lines, size_t key,
    const std::string& inline_value) {
  if (!inline_value.empty()) return FlowList(inline_value);
  std::vector<std::string> items;
  const size_t end = SequenceEnd(lines, key);
  for (size_t i = key + 1; i < end; ++i) {
    if (!absl::StartsWith(lines[i].text, "- ")) {
      return absl::InvalidArgumentError(absl::StrCat(
          "'", lines[i].text, "' in '", lines[key].text, "' is not a scalar"));
    }
    items.push_back(Unquote(lines[i].text.substr(2)));
  }
  return items;
}

// The env entries under the key at lines[key].
absl::StatusOr<std::vector<EnvVar>> EnvEntries(const std::vector<Line>& lines,
                                               size_t key) {
  std::vector<EnvVar> env;
  const size_t end = SequenceEnd(lines, key);
  for (size_t i = key + 1; i < end; ++i) {
    const Line& line = lines[i];
    if (absl::StartsWith(line.text, "- name: ")) {
      env.push_back({Unquote(line.text.substr(8)), "", ""});
      continue;
    }
    auto kv = KeyValue(line.text);
    if (env.empty() || !kv.has_value()) {
      return absl::InvalidArgumentError(
          absl::StrCat("env entry line '", line.text, "' is not understood"));
    }
    if (kv->first == "value") {
      env.back().value = Unquote(kv->second);
    } else if (kv->first == "fieldPath") {
      env.back().field_path = Unquote(kv->second);
    } else if (kv->first != "valueFrom" && kv->first != "fieldRef") {
      return absl::InvalidArgumentError(absl::StrCat(
          "env '", env.back().name, "' uses '", kv->first,
          "', which only the downward API's fieldRef is read for"));
    }
  }
  return env;
}

}  // namespace

absl::StatusOr<ContainerTemplate> ReadContainerTemplate(
    absl::string_view yaml, absl::string_view container) {
  const std::vector<Line> lines = Lines(yaml);
  const std::string item = absl::StrCat("- name: ", container);
  size_t start = lines.size();
  bool in_containers = false;
  int containers_indent = -1;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].text == "containers:") {
      in_containers = true;
      containers_indent = lines[i].indent;
    } else if (in_containers && lines[i].indent <= containers_indent &&
               !absl::StartsWith(lines[i].text, "- ")) {
      in_containers = false;
    } else if (in_containers && Unquote(lines[i].text) == item) {
      start = i;
      break;
    }
  }
  if (start == lines.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("no container '", container, "' in the manifest"));
  }
  // The container's keys sit where its "name:" does, two past the dash.
  const int keys = lines[start].indent + 2;
  ContainerTemplate out;
  for (size_t i = start + 1; i < lines.size() && lines[i].indent >= keys; ++i) {
    if (lines[i].indent != keys) continue;
    auto kv = KeyValue(lines[i].text);
    if (!kv.has_value()) continue;
    if (kv->first == "command" || kv->first == "args") {
      auto items = Scalars(lines, i, kv->second);
      if (!items.ok()) return items.status();
      (kv->first == "command" ? out.command : out.args) = *std::move(items);
    } else if (kv->first == "env") {
      auto env = EnvEntries(lines, i);
      if (!env.ok()) return env.status();
      out.env = *std::move(env);
    }
  }
  if (out.args.empty() && out.command.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("container '", container, "' has no command or args"));
  }
  return out;
}

absl::StatusOr<std::map<std::string, std::string>> ResolveEnv(
    const ContainerTemplate& container, const PodFacts& pod) {
  std::map<std::string, std::string> env;
  for (const EnvVar& var : container.env) {
    if (var.field_path.empty()) {
      env[var.name] = ExpandReferences(var.value, env);
      continue;
    }
    const std::string& path = var.field_path;
    constexpr absl::string_view kLabel = "metadata.labels['";
    if (path == "metadata.name") {
      env[var.name] = pod.name;
    } else if (path == "metadata.namespace") {
      env[var.name] = pod.namespace_name;
    } else if (path == "spec.nodeName") {
      env[var.name] = pod.node_name;
    } else if (path == "status.podIP") {
      env[var.name] = pod.pod_ip;
    } else if (absl::StartsWith(path, kLabel) && absl::EndsWith(path, "']")) {
      const std::string key =
          path.substr(kLabel.size(), path.size() - kLabel.size() - 2);
      auto it = pod.labels.find(key);
      env[var.name] = it == pod.labels.end() ? "" : it->second;
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "env '", var.name, "': field path '", path, "' is not emulated"));
    }
  }
  return env;
}

std::string ExpandReferences(absl::string_view text,
                             const std::map<std::string, std::string>& env) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '$' || i + 1 >= text.size()) {
      out.push_back(text[i]);
      continue;
    }
    if (text[i + 1] == '$') {
      out.push_back('$');
      ++i;
      continue;
    }
    const size_t close = text.find(')', i);
    if (text[i + 1] == '(' && close != absl::string_view::npos) {
      auto it = env.find(std::string(text.substr(i + 2, close - i - 2)));
      if (it != env.end()) {
        out += it->second;
        i = close;
        continue;
      }
    }
    out.push_back(text[i]);
  }
  return out;
}

}  // namespace zshard::testing
