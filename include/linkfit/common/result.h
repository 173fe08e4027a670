#pragma once

// Result<T>: the error-as-value type used at every module boundary (STYLE.md: errors are values).
// It is tl::expected, whose API is C++23's std::expected, so the code can switch to the standard
// type once the toolchain has it. An Error carries a human-readable message that names the
// problem (which field, which value, what was expected); callers add context as it propagates.
//
// Thread-safety: plain values; no shared state.

#include <string>
#include <utility>

#include <tl/expected.hpp>

namespace linkfit {

struct Error {
  std::string message;
};

template <typename T>
using Result = tl::expected<T, Error>;

// Returns an unexpected Error with the given message, for `return MakeError("...")`.
inline tl::unexpected<Error> MakeError(std::string message) {
  return tl::unexpected<Error>(Error{std::move(message)});
}

// Returns the error with `context + ": "` prepended, for propagating with more detail.
inline tl::unexpected<Error> WithContext(const Error& error, const std::string& context) {
  return tl::unexpected<Error>(Error{context + ": " + error.message});
}

}  // namespace linkfit

// Evaluates `expr` (a Result); on error returns it from the enclosing function, otherwise moves
// the value into `lhs` (an existing variable or member). Declares a local named after `lhs`'s
// block-scoped, so it can be used any number of times in one scope.
#define LINKFIT_ASSIGN_OR_RETURN(lhs, expr)                      \
  do {                                                           \
    auto linkfit_result_ = (expr);                               \
    if (!linkfit_result_) {                                      \
      return tl::unexpected(std::move(linkfit_result_).error()); \
    }                                                            \
    lhs = std::move(*linkfit_result_);                           \
  } while (false)
