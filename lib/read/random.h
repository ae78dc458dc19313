// The loader's randomness: key mixing and a small deterministic generator.
//
// Everything random in the loader (the epoch shuffles of sampler.cc, the per-sample
// transforms of transform.cc) is drawn from a Random seeded with a key mixed from
// (seed, epoch, ...), never from a global or per-thread engine, so results depend on
// nothing but those values: not on thread count, timing or the order of the work.
//
// The algorithms are fixed, because datasets' orders and augmented pixels are promised to
// be reproducible across releases and platforms: changing any constant here changes every
// epoch order and every random crop. Nothing uses std::uniform_*_distribution, whose
// output differs between standard libraries.
//
//   Mix64        the splitmix64 finaliser (Steele, Lea & Flood 2014; Vigna's constants):
//                a bijection on 64-bit values whose every output bit depends on every
//                input bit.
//   MixKey       Mix64(Mix64(Mix64(a) ^ b) ^ c): for any two arguments fixed, a bijection
//                of the third, so e.g. the keys of one (seed, epoch) never collide.
//   Random       the splitmix64 generator: state += 0x9e3779b97f4a7c15, output
//                Mix64-of-state (period 2^64, passes BigCrush). Not cryptographic.
//   Below(n)     Lemire's nearly-divisionless method ("Fast Random Integer Generation in
//                an Interval", 2019): exactly uniform, usually one draw.
//   UniformDouble  the top 53 bits of a draw times 2^-53: exactly uniform on the 2^53
//                multiples of 2^-53 in [0, 1).
//
// Thread-safety: MixKey and Mix64 are pure. A Random is a plain value: one thread at a
// time; copies are independent and continue the same stream.
#ifndef SHARDPACK_READ_RANDOM_H_
#define SHARDPACK_READ_RANDOM_H_

#include <cassert>
#include <cstdint>

namespace shardpack::read {

constexpr uint64_t Mix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

constexpr uint64_t MixKey(uint64_t a, uint64_t b, uint64_t c) {
  return Mix64(Mix64(Mix64(a) ^ b) ^ c);
}

class Random {
 public:
  // Seeds the stream with `key`, used as is: pass a mixed key (MixKey) so that nearby
  // seeds give unrelated streams.
  explicit constexpr Random(uint64_t key) : state_(key) {}

  // The next 64 uniformly distributed bits.
  constexpr uint64_t Next64() {
    const uint64_t z = state_;
    state_ += 0x9e3779b97f4a7c15ull;
    return Mix64(z);  // adds the same constant, then finalises: the splitmix64 output
  }

  // A uniform integer in [0, bound), without bias. bound must be positive (Below(0)
  // returns 0 and draws nothing). Usually one draw; a rejected draw (probability below
  // bound / 2^64) takes another.
  constexpr uint64_t Below(uint64_t bound) {
    assert(bound > 0 && "Random::Below(0)");
    if (bound == 0) return 0;
    unsigned __int128 m = static_cast<unsigned __int128>(Next64()) * bound;
    uint64_t low = static_cast<uint64_t>(m);
    if (low < bound) {
      const uint64_t threshold = (0 - bound) % bound;  // 2^64 mod bound
      while (low < threshold) {
        m = static_cast<unsigned __int128>(Next64()) * bound;
        low = static_cast<uint64_t>(m);
      }
    }
    return static_cast<uint64_t>(m >> 64);
  }

  // A uniform integer in [lo, hi], inclusive (lo <= hi; lo == hi draws nothing).
  constexpr int64_t Between(int64_t lo, int64_t hi) {
    assert(lo <= hi);
    const uint64_t span = static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo);
    if (span == 0) return lo;
    const uint64_t offset = span == UINT64_MAX ? Next64() : Below(span + 1);
    return static_cast<int64_t>(static_cast<uint64_t>(lo) + offset);
  }

  // A uniform double in [0, 1), 53 bits of resolution.
  constexpr double UniformDouble() { return static_cast<double>(Next64() >> 11) * 0x1.0p-53; }

  // lo + (hi - lo) * UniformDouble(), for lo <= hi: uniform in [lo, hi), except that the
  // rounding of the last step can give hi itself. With lo == hi, lo after one draw.
  constexpr double UniformDouble(double lo, double hi) { return lo + (hi - lo) * UniformDouble(); }

 private:
  uint64_t state_;
};

}  // namespace shardpack::read

#endif  // SHARDPACK_READ_RANDOM_H_
