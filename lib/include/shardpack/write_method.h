// WriteMethod: how a shard file's bytes reach it, shared by the writer's options
// (shardpack/shard_writer.h, ConvertOptions) and the format's file writers.
#ifndef SHARDPACK_WRITE_METHOD_H_
#define SHARDPACK_WRITE_METHOD_H_

#include <string_view>

namespace shardpack {

// How a TFRecord shard file's bytes reach it (docs/DESIGN.md, "Scaling model"). The bytes
// are the same every way.
enum class WriteMethod {
  // kMap where io::MappedWritesPreferred says so of the shard's directory (ext4 and xfs,
  // where the host does not take free memory back), kWrite elsewhere.
  kAuto,
  // pwrite, in write_chunk_bytes chunks where that is not 0. File systems take one such
  // write into a file at a time: threads writing one shard queue there.
  kWrite,
  // Copies into a shared mapping of the file, which threads do side by side, with the
  // space set aside (fallocate) window by window, so that a full disk is an error, not a
  // signal (io/mapped_write.h). A file system that cannot set space aside is refused.
  kMap,
};
std::string_view WriteMethodName(WriteMethod m);  // "auto" / "write" / "map"

}  // namespace shardpack

#endif  // SHARDPACK_WRITE_METHOD_H_
