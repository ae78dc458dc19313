// CRC32C (Castagnoli, reflected polynomial 0x82F63B78), as used by TFRecord, LevelDB
// and iSCSI (RFC 3720). Chosen once at run time by what the CPU has: carry-less
// multiplication folding (AVX-512 VPCLMULQDQ) for buffers of 1 KiB and more, the SSE4.2
// crc32 instruction in three interleaved streams otherwise, and a portable slicing-by-8
// fallback. The fused copy (CopyAndExtend) folds with AVX-512 or AVX2 VPCLMULQDQ.
//
// Thread-safety: all functions are pure.
#ifndef SHARDPACK_UTIL_CRC32C_H_
#define SHARDPACK_UTIL_CRC32C_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace shardpack::crc32c {

// Returns crc32c(A || data[0, n)) given `init_crc` = crc32c(A).
uint32_t Extend(uint32_t init_crc, const void* data, size_t n);

// Returns crc32c(data[0, n)).
inline uint32_t Value(const void* data, size_t n) { return Extend(0, data, n); }
inline uint32_t Value(std::string_view s) { return Extend(0, s.data(), s.size()); }

// Copies data[0, n) to dst (the ranges must not overlap) and returns Extend(init_crc,
// data, n), reading the source once: with VPCLMULQDQ (AVX-512 or AVX2) the checksum folds
// the blocks as they are copied; elsewhere each 16 KiB piece is summed, then copied
// while it is in the first-level cache. kStreaming stores around the caches (non-temporal
// stores, then a fence) where the fused copy runs, which spares reading the destination's
// lines before writing them: for a destination that no one reads again soon (a batch
// buffer on its way to the GPU or to another thread); kCached for one read right after.
// kStreamingUnfenced is kStreaming without its fence, for many copies in a row: such
// stores are not ordered with later ones, so the caller calls StoreFence() after the last
// of them and before anything (another thread, a device's copy) may read what they wrote.
// The fence waits for the stores to leave the core, which a copy after a copy need not.
enum class CopyStores { kCached, kStreaming, kStreamingUnfenced };
uint32_t CopyAndExtend(uint32_t init_crc, void* dst, const void* data, size_t n,
                       CopyStores stores = CopyStores::kCached);

// Orders every earlier store, non-temporal ones included, before every later one (SFENCE
// on x86-64): what kStreamingUnfenced copies need before they are published.
void StoreFence();

// Returns crc32c(A || B) given crc_a = crc32c(A), crc_b = crc32c(B) and len_b = |B|,
// in O(log len_b) time without touching the bytes. Lets a payload checksum be built from
// the checksum of its pixels, which were summed once already.
uint32_t Combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b);

// TFRecord and LevelDB store CRCs masked: a CRC of data that itself embeds CRCs is weak.
inline constexpr uint32_t kMaskDelta = 0xa282ead8u;
inline uint32_t Mask(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + kMaskDelta; }
inline uint32_t Unmask(uint32_t masked) {
  uint32_t rot = masked - kMaskDelta;
  return (rot >> 17) | (rot << 15);
}

// True when Extend runs on the SSE4.2 instruction.
bool IsHardwareAccelerated();

// The portable implementation, exposed so that tests compare both paths.
uint32_t ExtendPortable(uint32_t init_crc, const void* data, size_t n);

// The implementations Extend chooses from (by CPU and length), for tests and benchmarks.
// The folding ones need n >= 256; ExtendWith falls back to Extend when an implementation is
// unavailable or n is shorter. CopyAndExtendWith copies as CopyAndExtend would on a CPU
// whose best is `impl` (kPortable and kCrc32Instruction: summed, then copied, in pieces),
// and as CopyAndExtend where `impl` is unavailable.
enum class Implementation { kPortable, kCrc32Instruction, kClmulAvx512, kClmulAvx2 };
bool IsAvailable(Implementation impl);
uint32_t ExtendWith(Implementation impl, uint32_t init_crc, const void* data, size_t n);
uint32_t CopyAndExtendWith(Implementation impl, uint32_t init_crc, void* dst, const void* data,
                           size_t n, CopyStores stores);

}  // namespace shardpack::crc32c

#endif  // SHARDPACK_UTIL_CRC32C_H_
