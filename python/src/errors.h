// Status -> Python exception. A non-OK Status becomes the exception class that
// shardpack/_errors.py maps its code to (CorruptionError, InvalidArgumentError (a
// ValueError), NotFoundError (a FileNotFoundError), ...), carrying the C++ message
// unchanged: file, record, offset, expected versus actual.
//
// Every function here must be called with the GIL held.
#ifndef SHARDPACK_PYTHON_ERRORS_H_
#define SHARDPACK_PYTHON_ERRORS_H_

#include <utility>

#include "shardpack/status.h"

namespace shardpack::python {

// Sets the Python error for `status` (which must not be OK) and throws
// nanobind::python_error, which nanobind hands back to the interpreter.
[[noreturn]] void RaiseStatus(const Status& status);

inline void RaiseIfError(const Status& status) {
  if (!status.ok()) RaiseStatus(status);
}

template <typename T>
T ValueOrRaise(StatusOr<T>&& result) {
  if (!result.ok()) RaiseStatus(result.status());
  return std::move(result).value();
}

}  // namespace shardpack::python

#endif  // SHARDPACK_PYTHON_ERRORS_H_
