// One container of a Kubernetes manifest's pod template, read from the
// YAML the cluster gets (deploy/k8s), and resolved for one pod the way the
// kubelet resolves it: downward-API environment variables and $(VAR)
// references in args. Lets integration tests start processes exactly as the
// StatefulSet starts its pods.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace zshard::testing {

// An env entry of a container: a literal `value`, or the downward API's
// `valueFrom.fieldRef.fieldPath` (exactly one of them is non-empty, or both
// are empty for an empty literal).
struct EnvVar {
  std::string name;
  std::string value;
  std::string field_path;
};

// What a container runs: `command` (empty: the image's ENTRYPOINT), its
// args and its env, in manifest order.
struct ContainerTemplate {
  std::vector<std::string> command;
  std::vector<std::string> args;
  std::vector<EnvVar> env;
};

// Reads the container named `container` from `yaml` (a single manifest in
// the block style deploy/k8s uses: "- name: X" list items, plain or quoted
// scalars, flow lists of scalars for command). InvalidArgument naming what
// is missing or not understood.
absl::StatusOr<ContainerTemplate> ReadContainerTemplate(
    absl::string_view yaml, absl::string_view container);

// The facts about one pod the downward API exposes.
struct PodFacts {
  std::string name;
  std::string namespace_name;
  std::string node_name;
  std::string pod_ip;
  std::map<std::string, std::string> labels;
};

// The container's environment for `pod` ("NAME" -> value), with
// downward-API field paths (metadata.name, metadata.namespace,
// spec.nodeName, status.podIP, metadata.labels['KEY'] (empty when the
// label is absent))
// and $(VAR) references to earlier entries resolved. InvalidArgument for a
// field path it does not know.
absl::StatusOr<std::map<std::string, std::string>> ResolveEnv(
    const ContainerTemplate& container, const PodFacts& pod);

// `text` with every $(VAR) of a defined VAR replaced by its value, as the
// kubelet expands command and args: $$ is a literal $, an undefined
// reference stays as written.
std::string ExpandReferences(absl::string_view text,
                             const std::map<std::string, std::string>& env);

}  // namespace zshard::testing
