// The one check of a caller's thread count (ConvertOptions, VerifyOptions, MergeOptions):
// 0 (all cores) up to kMaxThreads, as the loader's own check and the CLI take it.
#ifndef SHARDPACK_UTIL_THREAD_COUNT_H_
#define SHARDPACK_UTIL_THREAD_COUNT_H_

#include <string>
#include <string_view>

#include "shardpack/limits.h"
#include "shardpack/status.h"

namespace shardpack {

// InvalidArgument "<name> must be in 0..4096, not N" outside 0..kMaxThreads.
inline Status CheckThreadCount(int threads, std::string_view name) {
  if (threads >= 0 && threads <= kMaxThreads) return Status::Ok();
  return InvalidArgumentError(std::string(name) + " must be in 0.." + std::to_string(kMaxThreads) +
                              ", not " + std::to_string(threads));
}

}  // namespace shardpack

#endif  // SHARDPACK_UTIL_THREAD_COUNT_H_
