// A libjpeg memory manager whose pools are arenas kept from one image to the next, so that
// a decompressor reused for many images of a similar size allocates nothing per image.
//
// libjpeg's own manager (jmemmgr.c) takes every pool from the heap and gives it back when
// the pool is freed: about ten heap allocations per decode of a 256x256 JPEG. Here each
// pool is a chain of blocks, bump-allocated; freeing the pool keeps its memory as one block
// the size of what the image used (up to kJpegArenaRetainBytes), so the next image of that
// size or smaller fits in it.
//
// Same contract as jmemmgr.c with jmemnobs.c (no backing store), the pieces libjpeg relies
// on kept exactly: 32-byte alignment (libjpeg-turbo's SIMD), sample rows rounded up to 64
// samples, virtual arrays pre-zeroed lazily with the same access checks, and
// max_memory_to_use checked where jmemmgr checks it (realize_virt_arrays), failing with
// JERR_NO_BACKING_STORE as jmemnobs does. Errors are libjpeg's (ERREXIT): the methods hold
// only trivially destructible locals, so libjpeg's longjmp skips nothing.
#ifndef SHARDPACK_IMAGE_JPEG_MEMORY_H_
#define SHARDPACK_IMAGE_JPEG_MEMORY_H_

#include <cstddef>
#include <cstdint>
#include <cstdio>

// jpeglib.h needs size_t and FILE declared before it.
#include <jpeglib.h>

namespace shardpack::image {

// A pool that reached more than this is given back to the heap when freed, not kept: a
// large progressive photo's coefficients (tens of MB) are not held by an idle thread.
inline constexpr size_t kJpegArenaRetainBytes = size_t{4} << 20;

// Replaces cinfo->mem, right after jpeg_create_*, by an arena manager. libjpeg's manager
// stays behind it for what it allocated during creation, and is destroyed by the arena
// manager's self_destruct (jpeg_destroy). Returns false, leaving libjpeg's manager in
// place, when the manager itself cannot be allocated.
bool InstallJpegArenaMemory(j_common_ptr cinfo);

// Marks the end of the decompressor's set-up: what the permanent pool receives after this
// (the quantisation and Huffman tables of each image) is freed by
// ResetJpegArenaTables. No-op under another manager.
void MarkJpegArenaSetUp(j_common_ptr cinfo);

// Frees the permanent allocations made since MarkJpegArenaSetUp. The caller must first
// drop every pointer to them (the decompressor's table pointers). No-op under another
// manager.
void ResetJpegArenaTables(j_common_ptr cinfo);

}  // namespace shardpack::image

#endif  // SHARDPACK_IMAGE_JPEG_MEMORY_H_
