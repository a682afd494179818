// A member's place in an epoch as the coordinator assigns it (docs/design.md
// section 5): its id, where it is reached for collectives, its rank and
// instance. Plain data, no proto: the worker converts the wire form into
// this at its session edge.
#pragma once

#include <map>
#include <string>

namespace zshard::plan {

struct Assignment {
  std::string worker_id;
  std::string name;
  // host:port where the worker can be reached for collectives.
  std::string address;
  // Rank in the epoch; -1 for a listed spare.
  int rank = -1;
  // Instance and rank inside it (-1 with rank -1).
  int instance = -1;
  int shard_rank = -1;
  std::map<std::string, std::string> labels;
};

}  // namespace zshard::plan
