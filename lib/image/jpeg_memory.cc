#include "image/jpeg_memory.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include <jerror.h>

namespace shardpack::image {
namespace {

// libjpeg-turbo's ALIGN_SIZE: its SIMD routines need 16- or 32-byte aligned buffers.
constexpr size_t kAlign = 32;
// The first block of a pool; later ones double, and a freed pool becomes one block.
constexpr size_t kFirstBlockBytes = size_t{16} << 10;

size_t RoundUp(size_t n, size_t to) { return (n + to - 1) / to * to; }

// A chain of heap blocks, newest first, handed out front to back. Plain C data: it lives
// in the manager, which libjpeg frees through self_destruct.
struct Block {
  Block* older;
  size_t capacity;  // bytes at Data()
  size_t used;
  uint8_t* Data() {
    return reinterpret_cast<uint8_t*>(RoundUp(reinterpret_cast<uintptr_t>(this + 1), kAlign));
  }
};

struct Arena {
  Block* newest;
  size_t handed_out;  // bytes handed out since the last Reset, alignment included

  Block* NewBlock(size_t capacity) {
    void* raw = std::malloc(sizeof(Block) + kAlign + capacity);
    if (raw == nullptr) return nullptr;
    Block* block = static_cast<Block*>(raw);
    block->older = newest;
    block->capacity = capacity;
    block->used = 0;
    newest = block;
    return block;
  }

  // `n` bytes at a kAlign boundary; nullptr when the heap refuses. n is a multiple of
  // kAlign and at most max_alloc_chunk (callers check).
  void* Allocate(size_t n) {
    Block* block = newest;
    if (block == nullptr || block->capacity - block->used < n) {
      const size_t grown = block == nullptr ? kFirstBlockBytes : 2 * block->capacity;
      block = NewBlock(n > grown ? n : grown);
      if (block == nullptr) return nullptr;
    }
    void* p = block->Data() + block->used;
    block->used += n;
    handed_out += n;
    return p;
  }

  void FreeAll() {
    while (newest != nullptr) {
      Block* older = newest->older;
      std::free(newest);
      newest = older;
    }
    handed_out = 0;
  }

  // Frees everything handed out. Memory is kept as one block of what was used, so that
  // the same allocations fit again without the heap, unless that is over the retain
  // limit.
  void Reset() {
    const size_t used = handed_out;
    if (newest != nullptr && newest->older == nullptr &&
        newest->capacity <= kJpegArenaRetainBytes) {
      newest->used = 0;
      handed_out = 0;
      return;
    }
    FreeAll();
    // On failure the next Allocate takes a new block as usual.
    if (used > 0 && used <= kJpegArenaRetainBytes) NewBlock(used);
  }
};

// A virtual array (libjpeg's jvirt_sarray_control / jvirt_barray_control, our own
// layout: libjpeg sees only the pointer). Always wholly in memory, as with jmemnobs.c.
struct VirtualArray {
  void** rows;  // JSAMPARRAY or JBLOCKARRAY; null until realized
  JDIMENSION rows_in_array;
  JDIMENSION units_per_row;  // samples or blocks, as requested (not rounded)
  JDIMENSION maxaccess;
  JDIMENSION first_undef_row;
  size_t unit_bytes;  // bytes of one sample or block
  bool pre_zero;
  bool blocks;
  VirtualArray* next;
};

struct ArenaManager {
  jpeg_memory_mgr pub;       // first: cinfo->mem points here
  jpeg_memory_mgr* libjpeg;  // the manager jpeg_create_* made, for what it holds
  Arena permanent;           // JPOOL_PERMANENT until MarkJpegArenaSetUp
  Arena tables;              // JPOOL_PERMANENT after it
  Arena image;               // JPOOL_IMAGE
  bool set_up;
  VirtualArray* virtual_arrays;  // of JPOOL_IMAGE, newest first
};

ArenaManager* ManagerOf(j_common_ptr cinfo) { return reinterpret_cast<ArenaManager*>(cinfo->mem); }

size_t SampleBytes(j_common_ptr cinfo) {
  const int precision = cinfo->is_decompressor
                            ? reinterpret_cast<j_decompress_ptr>(cinfo)->data_precision
                            : reinterpret_cast<j_compress_ptr>(cinfo)->data_precision;
  return precision > 8 ? 2 : sizeof(JSAMPLE);  // J12SAMPLE and J16SAMPLE are 16 bits
}

Arena* PoolArena(j_common_ptr cinfo, int pool_id) {
  ArenaManager* m = ManagerOf(cinfo);
  if (pool_id == JPOOL_IMAGE) return &m->image;
  if (pool_id == JPOOL_PERMANENT) return m->set_up ? &m->tables : &m->permanent;
  ERREXIT1(cinfo, JERR_BAD_POOL_ID, pool_id);
  return nullptr;  // not reached
}

void* Alloc(j_common_ptr cinfo, int pool_id, size_t sizeofobject) {
  ArenaManager* m = ManagerOf(cinfo);
  // jmemmgr.c's checks, with its codes for JERR_OUT_OF_MEMORY.
  if (sizeofobject > static_cast<size_t>(m->pub.max_alloc_chunk)) {
    ERREXIT1(cinfo, JERR_OUT_OF_MEMORY, 3);
  }
  Arena* arena = PoolArena(cinfo, pool_id);
  void* p = arena->Allocate(RoundUp(sizeofobject, kAlign));
  if (p == nullptr) ERREXIT1(cinfo, JERR_OUT_OF_MEMORY, 4);
  return p;
}

// `rows` row pointers to rows of `row_bytes`, one after another in one allocation.
void** AllocRows(j_common_ptr cinfo, int pool_id, size_t row_bytes, JDIMENSION rows) {
  const size_t limit = static_cast<size_t>(ManagerOf(cinfo)->pub.max_alloc_chunk);
  if (row_bytes == 0 || row_bytes > limit) ERREXIT(cinfo, JERR_WIDTH_OVERFLOW);
  if (rows > limit / row_bytes) ERREXIT1(cinfo, JERR_OUT_OF_MEMORY, 9);
  auto** pointers = static_cast<void**>(Alloc(cinfo, pool_id, rows * sizeof(void*)));
  auto* data = static_cast<uint8_t*>(Alloc(cinfo, pool_id, rows * row_bytes));
  for (JDIMENSION i = 0; i < rows; ++i) pointers[i] = data + i * row_bytes;
  return pointers;
}

void* AllocSmall(j_common_ptr cinfo, int pool_id, size_t sizeofobject) {
  return Alloc(cinfo, pool_id, sizeofobject);
}

void* AllocLarge(j_common_ptr cinfo, int pool_id, size_t sizeofobject) {
  return Alloc(cinfo, pool_id, sizeofobject);
}

// As jmemmgr.c: each row's length (not its start) is rounded up to 2 * ALIGN_SIZE bytes'
// worth of samples, so that the upsamplers may write past the end of a row.
size_t SampleRowBytes(j_common_ptr cinfo, JDIMENSION samplesperrow) {
  const size_t sample = SampleBytes(cinfo);
  if (samplesperrow > static_cast<size_t>(ManagerOf(cinfo)->pub.max_alloc_chunk)) {
    ERREXIT1(cinfo, JERR_OUT_OF_MEMORY, 9);
  }
  return RoundUp(samplesperrow, 2 * kAlign / sample) * sample;
}

JSAMPARRAY AllocSarray(j_common_ptr cinfo, int pool_id, JDIMENSION samplesperrow,
                       JDIMENSION numrows) {
  return reinterpret_cast<JSAMPARRAY>(
      AllocRows(cinfo, pool_id, SampleRowBytes(cinfo, samplesperrow), numrows));
}

JBLOCKARRAY AllocBarray(j_common_ptr cinfo, int pool_id, JDIMENSION blocksperrow,
                        JDIMENSION numrows) {
  if (blocksperrow > static_cast<size_t>(ManagerOf(cinfo)->pub.max_alloc_chunk) / sizeof(JBLOCK)) {
    ERREXIT(cinfo, JERR_WIDTH_OVERFLOW);
  }
  return reinterpret_cast<JBLOCKARRAY>(
      AllocRows(cinfo, pool_id, blocksperrow * sizeof(JBLOCK), numrows));
}

VirtualArray* RequestVirtual(j_common_ptr cinfo, int pool_id, boolean pre_zero,
                             JDIMENSION units_per_row, JDIMENSION numrows, JDIMENSION maxaccess,
                             bool blocks) {
  // Only image-lifetime virtual arrays are supported, as in jmemmgr.c.
  if (pool_id != JPOOL_IMAGE) ERREXIT1(cinfo, JERR_BAD_POOL_ID, pool_id);
  ArenaManager* m = ManagerOf(cinfo);
  auto* v = static_cast<VirtualArray*>(Alloc(cinfo, pool_id, sizeof(VirtualArray)));
  v->rows = nullptr;
  v->rows_in_array = numrows;
  v->units_per_row = units_per_row;
  v->maxaccess = maxaccess;
  v->first_undef_row = 0;
  v->unit_bytes = blocks ? sizeof(JBLOCK) : SampleBytes(cinfo);
  v->pre_zero = pre_zero != FALSE;
  v->blocks = blocks;
  v->next = m->virtual_arrays;
  m->virtual_arrays = v;
  return v;
}

jvirt_sarray_ptr RequestVirtSarray(j_common_ptr cinfo, int pool_id, boolean pre_zero,
                                   JDIMENSION samplesperrow, JDIMENSION numrows,
                                   JDIMENSION maxaccess) {
  return reinterpret_cast<jvirt_sarray_ptr>(
      RequestVirtual(cinfo, pool_id, pre_zero, samplesperrow, numrows, maxaccess, false));
}

jvirt_barray_ptr RequestVirtBarray(j_common_ptr cinfo, int pool_id, boolean pre_zero,
                                   JDIMENSION blocksperrow, JDIMENSION numrows,
                                   JDIMENSION maxaccess) {
  return reinterpret_cast<jvirt_barray_ptr>(
      RequestVirtual(cinfo, pool_id, pre_zero, blocksperrow, numrows, maxaccess, true));
}

// jmemmgr.c's realize_virt_arrays with jmemnobs.c's jpeg_mem_available and
// jpeg_open_backing_store: an array whose minimum heights do not fit in what
// max_memory_to_use leaves fails with JERR_NO_BACKING_STORE.
void RealizeVirtArrays(j_common_ptr cinfo) {
  ArenaManager* m = ManagerOf(cinfo);
  size_t per_minheight = 0, maximum = 0;
  for (VirtualArray* v = m->virtual_arrays; v != nullptr; v = v->next) {
    if (v->rows != nullptr) continue;
    const size_t row = static_cast<size_t>(v->units_per_row) * v->unit_bytes;
    if (row != 0 && v->rows_in_array > (SIZE_MAX - maximum) / row) {
      ERREXIT1(cinfo, JERR_OUT_OF_MEMORY, 10);
    }
    per_minheight += static_cast<size_t>(v->maxaccess) * row;
    maximum += static_cast<size_t>(v->rows_in_array) * row;
  }
  if (per_minheight == 0) return;
  const size_t allocated = m->permanent.handed_out + m->tables.handed_out + m->image.handed_out;
  size_t available = maximum;
  if (m->pub.max_memory_to_use > 0) {
    const auto limit = static_cast<size_t>(m->pub.max_memory_to_use);
    available = limit > allocated ? limit - allocated : 0;
  }
  size_t max_minheights = 1000000000;
  if (available < maximum) {
    max_minheights = available / per_minheight;
    if (max_minheights == 0) max_minheights = 1;
  }
  for (VirtualArray* v = m->virtual_arrays; v != nullptr; v = v->next) {
    if (v->rows != nullptr) continue;
    const size_t maxaccess = v->maxaccess > 0 ? v->maxaccess : 1;
    const size_t minheights =
        v->rows_in_array == 0 ? 0 : (static_cast<size_t>(v->rows_in_array) - 1) / maxaccess + 1;
    if (minheights > max_minheights) ERREXIT(cinfo, JERR_NO_BACKING_STORE);
    v->rows = v->blocks ? reinterpret_cast<void**>(
                              AllocBarray(cinfo, JPOOL_IMAGE, v->units_per_row, v->rows_in_array))
                        : reinterpret_cast<void**>(
                              AllocSarray(cinfo, JPOOL_IMAGE, v->units_per_row, v->rows_in_array));
    v->first_undef_row = 0;
  }
}

// jmemmgr.c's access_virt_sarray / access_virt_barray for an array wholly in memory: the
// same checks, and rows pre-zeroed when first reached.
void** AccessVirtual(j_common_ptr cinfo, VirtualArray* v, JDIMENSION start_row, JDIMENSION num_rows,
                     boolean writable) {
  const JDIMENSION end_row = start_row + num_rows;
  if (end_row > v->rows_in_array || num_rows > v->maxaccess || v->rows == nullptr) {
    ERREXIT(cinfo, JERR_BAD_VIRTUAL_ACCESS);
  }
  if (v->first_undef_row < end_row) {
    JDIMENSION undef_row = v->first_undef_row;
    if (undef_row < start_row) {
      if (writable) ERREXIT(cinfo, JERR_BAD_VIRTUAL_ACCESS);  // a writer skipped rows
      undef_row = start_row;                                  // a reader may read ahead
    }
    if (writable) v->first_undef_row = end_row;
    if (v->pre_zero) {
      const size_t row_bytes = static_cast<size_t>(v->units_per_row) * v->unit_bytes;
      for (JDIMENSION r = undef_row; r < end_row; ++r) std::memset(v->rows[r], 0, row_bytes);
    } else if (!writable) {
      ERREXIT(cinfo, JERR_BAD_VIRTUAL_ACCESS);  // a reader of undefined rows
    }
  }
  return v->rows + start_row;
}

JSAMPARRAY AccessVirtSarray(j_common_ptr cinfo, jvirt_sarray_ptr ptr, JDIMENSION start_row,
                            JDIMENSION num_rows, boolean writable) {
  return reinterpret_cast<JSAMPARRAY>(
      AccessVirtual(cinfo, reinterpret_cast<VirtualArray*>(ptr), start_row, num_rows, writable));
}

JBLOCKARRAY AccessVirtBarray(j_common_ptr cinfo, jvirt_barray_ptr ptr, JDIMENSION start_row,
                             JDIMENSION num_rows, boolean writable) {
  return reinterpret_cast<JBLOCKARRAY>(
      AccessVirtual(cinfo, reinterpret_cast<VirtualArray*>(ptr), start_row, num_rows, writable));
}

void FreePool(j_common_ptr cinfo, int pool_id) {
  ArenaManager* m = ManagerOf(cinfo);
  if (pool_id == JPOOL_IMAGE) {
    m->virtual_arrays = nullptr;  // they live in the image arena
    m->image.Reset();
  } else if (pool_id == JPOOL_PERMANENT) {
    m->tables.FreeAll();
    m->permanent.FreeAll();
  } else {
    ERREXIT1(cinfo, JERR_BAD_POOL_ID, pool_id);
  }
}

void SelfDestruct(j_common_ptr cinfo) {
  ArenaManager* m = ManagerOf(cinfo);
  m->image.FreeAll();
  m->tables.FreeAll();
  m->permanent.FreeAll();
  jpeg_memory_mgr* libjpeg = m->libjpeg;
  std::free(m);
  cinfo->mem = libjpeg;
  (*libjpeg->self_destruct)(cinfo);  // frees what it holds and itself; cinfo->mem = NULL
}

bool Installed(j_common_ptr cinfo) {
  return cinfo->mem != nullptr && cinfo->mem->self_destruct == SelfDestruct;
}

}  // namespace

bool InstallJpegArenaMemory(j_common_ptr cinfo) {
  auto* m = static_cast<ArenaManager*>(std::calloc(1, sizeof(ArenaManager)));
  if (m == nullptr) return false;
  m->libjpeg = cinfo->mem;
  m->pub.alloc_small = AllocSmall;
  m->pub.alloc_large = AllocLarge;
  m->pub.alloc_sarray = AllocSarray;
  m->pub.alloc_barray = AllocBarray;
  m->pub.request_virt_sarray = RequestVirtSarray;
  m->pub.request_virt_barray = RequestVirtBarray;
  m->pub.realize_virt_arrays = RealizeVirtArrays;
  m->pub.access_virt_sarray = AccessVirtSarray;
  m->pub.access_virt_barray = AccessVirtBarray;
  m->pub.free_pool = FreePool;
  m->pub.self_destruct = SelfDestruct;
  m->pub.max_memory_to_use = m->libjpeg->max_memory_to_use;
  m->pub.max_alloc_chunk = m->libjpeg->max_alloc_chunk;
  cinfo->mem = &m->pub;
  return true;
}

void MarkJpegArenaSetUp(j_common_ptr cinfo) {
  if (Installed(cinfo)) ManagerOf(cinfo)->set_up = true;
}

void ResetJpegArenaTables(j_common_ptr cinfo) {
  if (Installed(cinfo)) ManagerOf(cinfo)->tables.Reset();
}

}  // namespace shardpack::image
