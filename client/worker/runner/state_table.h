// A life cycle's allowed transitions as one table: the worker's stateful
// objects keep their state in one enum and change it only through
// StateTable::Advance, so that a new or fixed race is a changed row of the
// table rather than one more flag.
#pragma once

#include <cstdlib>
#include <initializer_list>
#include <vector>

#include "common/logging.h"

namespace zshard::worker {

// The allowed (from, to) pairs of enum `State`; staying in a state is
// always allowed. `name` names a state for logs. Immutable, thread-safe.
template <typename State>
class StateTable {
 public:
  struct Edge {
    State from;
    State to;
  };
  using NameFn = const char* (*)(State);

  StateTable(const char* what, NameFn name, std::initializer_list<Edge> edges)
      : what_(what), name_(name), edges_(edges) {}

  bool Allows(State from, State to) const {
    if (from == to) return true;
    for (const Edge& e : edges_) {
      if (e.from == from && e.to == to) return true;
    }
    return false;
  }

  // Sets `state` to `to`. A transition the table refuses is a programmer
  // error: it is logged and the process aborts.
  void Advance(State& state, State to) const {
    if (!Allows(state, to)) {
      ZSHARD_LOG_ERROR(
          "refused state transition",
          {{"object", what_}, {"from", name_(state)}, {"to", name_(to)}});
      std::abort();
    }
    state = to;
  }

  const char* Name(State state) const { return name_(state); }

 private:
  const char* what_;
  NameFn name_;
  std::vector<Edge> edges_;
};

}  // namespace zshard::worker
