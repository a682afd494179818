// The tables of one single-slot plan that zshardctl plan prints: its
// buffers, its buckets and one rank's pieces (also one worker's slot in a
// model-parallel plan).
#pragma once

#include <string>

#include "common/plan/model_spec.h"
#include "common/plan/plan.h"

namespace zshard::ctl {

// The buffers table and the buckets table of `p`, each followed by an
// empty line.
std::string BufferTables(const plan::Plan& p);

// Rank `r`'s shards and the param elements in each (padding shown as
// such). `r` was made from `model`.
std::string PiecesTable(const plan::ModelSpec& model, const plan::RankPlan& r);

// Elements of owned param pieces (padding excluded) and the piece count.
struct Owned {
  int64_t elements = 0;
  size_t pieces = 0;
};
Owned OwnedBy(const plan::RankPlan& r);

}  // namespace zshard::ctl
