// io/status.h
//
// absl::Status helpers for coroutines. A Status is never dropped silently:
// CO_RETURN_IF_ERROR and CO_ASSIGN_OR_RETURN propagate it to the caller.
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define BROOK_CONCAT_INNER_(a, b) a##b
#define BROOK_CONCAT_(a, b) BROOK_CONCAT_INNER_(a, b)

// co_returns the status of `expr` if it is not OK.
#define CO_RETURN_IF_ERROR(expr)                          \
  do {                                                    \
    ::absl::Status brook_status_ = (expr);                \
    if (!brook_status_.ok()) co_return brook_status_;     \
  } while (0)

// Evaluates `expr` (an absl::StatusOr<T>), co_returns its status on error,
// otherwise moves its value into `lhs` (which may be a declaration).
#define CO_ASSIGN_OR_RETURN(lhs, expr) \
  CO_ASSIGN_OR_RETURN_IMPL_(BROOK_CONCAT_(brook_statusor_, __LINE__), lhs, expr)
#define CO_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) co_return tmp.status();          \
  lhs = std::move(*tmp)

// The same for ordinary functions.
#define RETURN_IF_ERROR(expr)                             \
  do {                                                    \
    ::absl::Status brook_status_ = (expr);                \
    if (!brook_status_.ok()) return brook_status_;        \
  } while (0)
#define ASSIGN_OR_RETURN(lhs, expr) \
  ASSIGN_OR_RETURN_IMPL_(BROOK_CONCAT_(brook_statusor_, __LINE__), lhs, expr)
#define ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                           \
  if (!tmp.ok()) return tmp.status();          \
  lhs = std::move(*tmp)
