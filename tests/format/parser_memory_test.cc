// The memory ParseManifest and ParseIndex take, measured: the peak of the bytes allocated
// and not yet freed while one parse runs, against the bytes of its input. A program of its
// own, because it replaces the allocation functions (malloc and its kin, which operator
// new calls) to keep that count, forwarded to glibc's.
//
// The bounds it checks are the ones shardpack/manifest.h and format/index_file.h state;
// the inputs are the shapes that cost a parser most per byte (docs/FORMAT.md, "Limits of
// the readers"), a few MB each so that a broken bound shows at once.
#include <gtest/gtest.h>
#include <malloc.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <new>
#include <string>

#include "format/index_file.h"
#include "shardpack/manifest.h"

extern "C" {
void* __libc_malloc(size_t size);
void* __libc_calloc(size_t n, size_t size);
void* __libc_realloc(void* p, size_t size);
void* __libc_memalign(size_t alignment, size_t size);
void __libc_free(void* p);
}

namespace {
// Single-threaded test: plain counters.
uint64_t g_in_use = 0;
uint64_t g_peak = 0;

void Added(void* p) {
  if (p == nullptr) return;
  g_in_use += malloc_usable_size(p);
  if (g_in_use > g_peak) g_peak = g_in_use;
}
void Removed(void* p) {
  if (p != nullptr) g_in_use -= malloc_usable_size(p);
}
}  // namespace

extern "C" {
void* malloc(size_t size) {
  void* p = __libc_malloc(size);
  Added(p);
  return p;
}
void* calloc(size_t n, size_t size) {
  void* p = __libc_calloc(n, size);
  Added(p);
  return p;
}
void* realloc(void* old, size_t size) {
  // The old block stays counted until the new one exists: a copying realloc holds both.
  const uint64_t old_bytes = old != nullptr ? malloc_usable_size(old) : 0;
  void* p = __libc_realloc(old, size);
  if (p == nullptr) return nullptr;
  g_in_use += malloc_usable_size(p);
  if (g_in_use > g_peak) g_peak = g_in_use;
  g_in_use -= old_bytes;
  return p;
}
void free(void* p) {
  Removed(p);
  __libc_free(p);
}
void* aligned_alloc(size_t alignment, size_t size) {
  void* p = __libc_memalign(alignment, size);
  Added(p);
  return p;
}
void* memalign(size_t alignment, size_t size) {
  void* p = __libc_memalign(alignment, size);
  Added(p);
  return p;
}
int posix_memalign(void** out, size_t alignment, size_t size) {
  void* p = __libc_memalign(alignment, size);
  if (p == nullptr) return ENOMEM;
  Added(p);
  *out = p;
  return 0;
}
}

#include "operator_new_to_malloc.h"

namespace shardpack {
namespace {

// The most bytes `parse` held at once beyond what was allocated before it (its result
// included, until it is destroyed inside `parse`).
uint64_t PeakOf(const std::function<void()>& parse) {
  const uint64_t before = g_in_use;
  g_peak = before;
  parse();
  return g_peak - before;
}

// The bound ParseManifest states (shardpack/manifest.h): peak <= k x bytes + c.
constexpr double kManifestBytesFactor = 6;
constexpr uint64_t kManifestConstant = 2ull << 20;
// The bound ParseIndex states (format/index_file.h); c: malloc's rounding of one block.
constexpr double kIndexBytesFactor = 3.2;
constexpr uint64_t kIndexConstant = 4096;

constexpr size_t kInputBytes = 4ull << 20;

struct Measured {
  uint64_t bytes = 0;
  uint64_t peak = 0;
  bool ok = false;
  std::string status;
};

Measured MeasureManifest(const std::string& text) {
  Measured m{text.size(), 0, false, ""};
  m.peak = PeakOf([&] {
    auto r = ParseManifest(text, "manifest.json");
    m.ok = r.ok();
    m.status = r.ok() ? "OK" : r.status().ToString().substr(0, 160);
  });
  std::fprintf(stderr, "  manifest %9llu bytes: peak %10llu bytes, %.2f per byte (%s)\n",
               static_cast<unsigned long long>(m.bytes), static_cast<unsigned long long>(m.peak),
               static_cast<double>(m.peak) / static_cast<double>(m.bytes), m.status.c_str());
  return m;
}

Measured MeasureIndex(const std::string& text, uint64_t records) {
  Measured m{text.size(), 0, false, ""};
  m.peak = PeakOf([&] {
    auto r = format::ParseIndex(text, records);
    m.ok = r.ok();
    m.status = r.ok() ? "OK, " + std::to_string(r->size()) + " entries"
                      : r.status().ToString().substr(0, 160);
  });
  std::fprintf(stderr, "  index    %9llu bytes: peak %10llu bytes, %.2f per byte (%s)\n",
               static_cast<unsigned long long>(m.bytes), static_cast<unsigned long long>(m.peak),
               static_cast<double>(m.peak) / static_cast<double>(m.bytes), m.status.c_str());
  return m;
}

void ExpectManifestBound(const Measured& m) {
  EXPECT_LE(m.peak, kManifestBytesFactor * static_cast<double>(m.bytes) + kManifestConstant)
      << m.bytes << " bytes of manifest held " << m.peak << " bytes at once (" << m.status << ")";
}

void ExpectIndexBound(const Measured& m) {
  EXPECT_LE(m.peak, kIndexBytesFactor * static_cast<double>(m.bytes) + kIndexConstant)
      << m.bytes << " bytes of index held " << m.peak << " bytes at once (" << m.status << ")";
}

// The manifest's text around a `classes` list and a `shards` list given as text, for a
// dataset of `samples` samples, and an `options` object.
std::string ManifestText(const std::string& classes, const std::string& shards, uint64_t samples,
                         const std::string& options = "{}", const std::string& backend = "lmdb") {
  return R"({"format": "shardpack", "format_version": "1.2", "tool_version": "t", "backend": ")" +
         backend + R"(", "num_samples": )" + std::to_string(samples) +
         R"(, "image": {"layout": "HWC", "dtype": "uint8", "channels": 3, "max_side": 0},)"
         R"( "pixel_alignment": 64, "label_base": 0, "classes": [)" +
         classes + R"(], "seed": 0, "options": )" + options + R"(, "shards": [)" + shards + "]}";
}

// A list of `n` copies of `item`, comma-separated.
std::string Repeated(const std::string& item, size_t n) {
  std::string out;
  out.reserve(n * (item.size() + 1));
  for (size_t i = 0; i < n; ++i) {
    if (i > 0) out += ',';
    out += item;
  }
  return out;
}

const std::string kHash(32, 'a');

// A dataset as a writer makes it: ImageNet-21k's 21,841 classes and 20,000 TFRecord
// shards, pretty-printed.
TEST(ParserMemoryTest, ARealisticManifestStaysWithinTheBound) {
  Manifest m;
  m.format_minor = 2;
  m.tool_version = "shardpack 0.1.0";
  m.image = {.channels = 3, .height = 256, .width = 256};
  for (int i = 0; i < 21841; ++i) m.classes.push_back({"n" + std::to_string(10000000 + i), 0});
  for (uint64_t i = 0; i < 20000; ++i) {
    ShardEntry s;
    char name[64];
    std::snprintf(name, sizeof name, "shard-%05llu-of-20000", static_cast<unsigned long long>(i));
    s.data = {std::string(name) + ".tfrecord", 64ull << 20, kHash};
    s.index = FileEntry{std::string(name) + ".idx", 3000, kHash};
    s.records = 300;
    s.first_sample = i * 300;
    m.shards.push_back(std::move(s));
  }
  m.num_samples = 20000 * 300;
  m.classes[0].count = m.num_samples;
  const std::string text = SerializeManifest(m);
  const Measured r = MeasureManifest(text);
  EXPECT_TRUE(r.ok) << r.status;
  ExpectManifestBound(r);
}

// The shapes that cost most per byte: lists of the smallest entries, valid ones and
// empty objects, and values of every kind in `options` (numbers, empty strings, empty
// arrays, arrays nested as deep as allowed).
TEST(ParserMemoryTest, AdversarialManifestsStayWithinTheBound) {
  const std::string klass = R"({"name":"","count":0})";
  const std::string shard =
      R"({"file":"a","bytes":0,"xxh3_128":")" + kHash + R"(","records":1,"first_sample":0})";
  std::vector<std::string> texts;
  // 2^17 + 1 entries: the vector of classes has just doubled (it holds 2^18 then, and held
  // the 2^17 before at the same time).
  texts.push_back(ManifestText(Repeated(klass, (1u << 17) + 1), "", 0));
  texts.push_back(ManifestText(Repeated("{}", kInputBytes / 3), "", 0));
  texts.push_back(ManifestText("", Repeated("{}", kInputBytes / 3), 0));
  texts.push_back(ManifestText("", Repeated("[]", kInputBytes / 3), 0));
  {
    // Valid shard entries, each with its own name and first sample; 2^15 + 1 of them, as
    // the classes above.
    std::string shards;
    for (uint64_t i = 0; i < (1u << 15) + 1; ++i) {
      if (i > 0) shards += ',';
      shards += R"({"file":"s)" + std::to_string(i) + R"(","bytes":0,"xxh3_128":")" + kHash +
                R"(","records":1,"first_sample":)" + std::to_string(i) + "}";
    }
    const uint64_t n = static_cast<uint64_t>(std::count(shards.begin(), shards.end(), '{'));
    texts.push_back(ManifestText(R"({"name":"a","count":)" + std::to_string(n) + "}", shards, n));
  }
  texts.push_back(ManifestText("", "", 0, "[" + Repeated("0", kInputBytes / 2) + "]"));
  texts.push_back(ManifestText("", "", 0, "[" + Repeated(R"("")", kInputBytes / 3) + "]"));
  texts.push_back(ManifestText("", "", 0, R"({"a":[)" + Repeated("[]", kInputBytes / 3) + "]}"));
  texts.push_back(ManifestText(
      "", "", 0,
      "[" + Repeated(std::string(97, '[') + std::string(97, ']'), kInputBytes / 196) + "]"));
  texts.push_back(ManifestText("", "", 0, R"({"a":")" + std::string(kInputBytes, 'x') + R"("})"));
  {
    // A shard entry of many keys the format does not know.
    std::string keys;
    for (uint64_t i = 0; keys.size() < kInputBytes; ++i)
      keys += ",\"k" + std::to_string(i) + "\":0";
    texts.push_back(ManifestText(R"({"name":"a","count":2})",
                                 shard + R"(,{"file":"b","bytes":0,"xxh3_128":")" + kHash +
                                     R"(","records":1,"first_sample":1)" + keys + "}",
                                 2));
  }
  for (const std::string& text : texts) ExpectManifestBound(MeasureManifest(text));
}

// Index lines of a real shard: records of 110,000 bytes or so.
TEST(ParserMemoryTest, ARealisticIndexStaysWithinTheBound) {
  std::string text;
  uint64_t offset = 0, records = 0;
  while (text.size() < kInputBytes) {
    const format::IndexEntry e{offset, 110000 + records % 977};
    format::AppendIndexLine(&text, e);
    offset += e.size;
    ++records;
  }
  const Measured r = MeasureIndex(text, records);
  EXPECT_TRUE(r.ok) << r.status;
  ExpectIndexBound(r);
}

// The most lines per byte, valid ("0 16", the smallest record, next to each other) and
// not ("0 0", blank lines), with and without the manifest's record count.
TEST(ParserMemoryTest, AdversarialIndexesStayWithinTheBound) {
  std::string smallest;
  uint64_t records = 0;
  for (uint64_t offset = 0; smallest.size() < kInputBytes; offset += 16, ++records) {
    format::AppendIndexLine(&smallest, {offset, 16});
  }
  std::string zeros;
  while (zeros.size() < kInputBytes) zeros += "0 0\n";
  const std::string blank(kInputBytes, '\n');
  for (uint64_t limit : {records, UINT64_MAX}) {
    ExpectIndexBound(MeasureIndex(smallest, limit));
    ExpectIndexBound(MeasureIndex(zeros, limit));
    ExpectIndexBound(MeasureIndex(blank, limit));
  }
}

// The counter sees what the parsers allocate: a parse of a large valid index holds its
// entries.
TEST(ParserMemoryTest, TheCounterSeesTheParsersAllocations) {
  std::string text;
  for (uint64_t i = 0; i < 100000; ++i) format::AppendIndexLine(&text, {i * 100, 100});
  const Measured r = MeasureIndex(text, 100000);
  ASSERT_TRUE(r.ok) << r.status;
  EXPECT_GE(r.peak, 100000 * sizeof(format::IndexEntry));
}

}  // namespace
}  // namespace shardpack
