// Status and StatusOr<T>: the one error vocabulary of shardpack.
//
// Every fallible function of the library returns one of these; exceptions never cross
// the public API. A Status carries a code and a message that names the file, the record
// and the byte offset where that applies, and the expected versus the actual value:
//
//   shard-00003-of-00016.tfrecord: record 1207 at offset 88123456: data checksum
//   0x1f2e3d4c, expected 0x9a8b7c6d
//
// Thread-safety: values, freely copyable; no shared state.
#ifndef SHARDPACK_STATUS_H_
#define SHARDPACK_STATUS_H_

#include <cassert>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace shardpack {

enum class StatusCode : int {
  kOk = 0,
  kInvalidArgument = 1,     // the caller passed something unusable (flag, option, path)
  kNotFound = 2,            // a file or key that must exist does not
  kAlreadyExists = 3,       // an output that must not exist does
  kCorruption = 4,          // data on disk is not what the format promises
  kNotSupported = 5,        // a valid input this build cannot handle (e.g. newer version)
  kIOError = 6,             // the OS refused an operation (errno attached)
  kResourceExhausted = 7,   // a configured limit was hit (size, memory)
  kFailedPrecondition = 8,  // an API was used out of order
  kOutOfRange = 9,          // an index beyond the end
  kInternal = 10,           // a bug in shardpack or a C library misbehaving
  kUnavailable = 11,        // a device or facility this machine or build does not offer
  kPermissionDenied = 12,   // a server refused the credentials or their rights (S3 403)
};

// Name of a code, e.g. "Corruption".
std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // "Corruption: <message>", or "OK".
  std::string ToString() const;

  // Returns a copy whose message is "<prefix>: <message>"; OK stays OK.
  Status WithPrefix(std::string_view prefix) const;

  // Marks a status as deliberately ignored.
  void IgnoreError() const {}

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

Status InvalidArgumentError(std::string message);
Status NotFoundError(std::string message);
Status AlreadyExistsError(std::string message);
Status CorruptionError(std::string message);
Status NotSupportedError(std::string message);
Status IOError(std::string message);
Status ResourceExhaustedError(std::string message);
Status FailedPreconditionError(std::string message);
Status OutOfRangeError(std::string message);
Status InternalError(std::string message);
Status UnavailableError(std::string message);
Status PermissionDeniedError(std::string message);

// An IOError for a failed system call: "<context>: <strerror(err)> (<ERRNAME>)".
Status ErrnoError(std::string_view context, int err);

// Either a value or a non-OK Status.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(const T& value) : v_(value) {}        // NOLINT: implicit by design
  StatusOr(T&& value) : v_(std::move(value)) {}  // NOLINT
  StatusOr(const Status& status) : v_(status) {  // NOLINT
    assert(!status.ok() && "StatusOr built from an OK status");
  }
  StatusOr(Status&& status) : v_(std::move(status)) {  // NOLINT
    assert(!std::get<Status>(v_).ok() && "StatusOr built from an OK status");
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  Status status() const { return ok() ? Status::Ok() : std::get<Status>(v_); }

  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace shardpack

// Returns from the enclosing function when `expr` is not OK.
#define SHARDPACK_RETURN_IF_ERROR(expr)                    \
  do {                                                     \
    ::shardpack::Status shardpack_status_ = (expr);        \
    if (!shardpack_status_.ok()) return shardpack_status_; \
  } while (0)

#define SHARDPACK_CONCAT_INNER_(a, b) a##b
#define SHARDPACK_CONCAT_(a, b) SHARDPACK_CONCAT_INNER_(a, b)
#define SHARDPACK_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                     \
  if (!tmp.ok()) return tmp.status();                    \
  lhs = std::move(tmp).value()

// `SHARDPACK_ASSIGN_OR_RETURN(auto x, F());` declares x from F()'s value or returns its error.
#define SHARDPACK_ASSIGN_OR_RETURN(lhs, expr) \
  SHARDPACK_ASSIGN_OR_RETURN_IMPL_(SHARDPACK_CONCAT_(shardpack_statusor_, __LINE__), lhs, expr)

#endif  // SHARDPACK_STATUS_H_
