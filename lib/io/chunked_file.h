// A WritableFile that hands its bytes on in whole, aligned chunks: every write to the file
// underneath covers [k * chunk, (k + 1) * chunk) of the file in one call, except the last,
// partial chunk at Sync or Close. A page cache that builds its folios from the writes it
// is given (ext4, xfs with large folios) then holds the file in folios of the chunk's size:
// with 2 MiB chunks, a reader that maps the file takes one page-table entry per 2 MiB
// instead of 512 (docs/LOADER.md, "The first epoch from the page cache"). The bytes of
// the file are the same; only the writes' sizes and times change.
//
// Positional writes (WriteAt) may come from several threads at once, for ranges that do
// not overlap, as the converter's workers write their records; each is copied into its
// chunks, and the write that completes a chunk hands it on, on that thread. Appends are
// writes at the end of what was appended. By Sync or Close every byte from 0 to the end
// of the file must have been written: a gap is reported, not filled.
#ifndef SHARDPACK_IO_CHUNKED_FILE_H_
#define SHARDPACK_IO_CHUNKED_FILE_H_

#include <cstddef>
#include <memory>
#include <string>

#include "io/env.h"

namespace shardpack::io {

// The largest chunk, 1 GiB.
inline constexpr size_t kMaxWriteChunk = size_t{1} << 30;

// OK for 0 (no chunks) and a positive multiple of 4096 up to kMaxWriteChunk; else an
// InvalidArgumentError naming the value (the CLI's --write-chunk, the library's
// write_chunk_bytes and Python's write_chunk alike).
Status CheckWriteChunk(uint64_t bytes);

// `file` (named `path` in errors) written in chunks of `chunk_bytes`, a positive multiple
// of 4096 up to kMaxWriteChunk (CheckWriteChunk, by the caller).
std::unique_ptr<WritableFile> NewChunkedWritableFile(std::unique_ptr<WritableFile> file,
                                                     std::string path, size_t chunk_bytes);

}  // namespace shardpack::io

#endif  // SHARDPACK_IO_CHUNKED_FILE_H_
