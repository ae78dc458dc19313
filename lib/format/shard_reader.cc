#include "format/shard_reader.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "format/example.h"
#include "format/format.h"
#include "format/index_file.h"
#include "format/lmdb_shard.h"
#include "format/record.h"
#include "image/image.h"
#include "io/env.h"
#include "io/mapped_range.h"
#include "util/crc32c.h"
#include "util/location.h"

namespace shardpack::format {

std::string ShardReader::Where(uint64_t record) const {
  return RecordLocation{name_, static_cast<int64_t>(record),
                        offsets_ ? static_cast<int64_t>(LocationOffset(record)) : -1}
      .ToString();
}

Status ShardReader::Fault(uint64_t record, const Status& s) const {
  return Status(s.code(), Where(record) + ": " + s.message());
}

Status DecodeSampleInto(const SampleView& view, int denominator, uint8_t* dst) {
  Status s = image::DecodeExactScaled(view.encoded.data(), view.encoded.size(), view.height,
                                      view.width, view.channels, denominator, dst);
  if (!s.ok()) return CorruptionError("image/encoded: " + s.message());
  return Status::Ok();
}

namespace {

// `out` from a parsed record, which must hold what the shard holds (`expected`); an encoded
// image is decoded into `copy` where CopyTarget says so. Errors unnamed (callers add Where).
Status Fill(const DecodedSample& d, ImageEncoding expected, SampleView* out, CopyTarget* copy) {
  SHARDPACK_RETURN_IF_ERROR(CheckEncoding(d, expected));
  out->encoding = d.encoding;
  if (d.encoding == ImageEncoding::kRaw) {
    out->pixels = {d.pixels, d.pixel_bytes};
    out->encoded = {};
  } else {
    out->pixels = {};
    out->encoded = {d.pixels, d.pixel_bytes};
  }
  out->height = static_cast<int>(d.height);
  out->width = static_cast<int>(d.width);
  out->channels = static_cast<int>(d.channels);
  out->label = d.label;
  out->class_text = d.class_text;
  out->filename = d.filename;
  const uint64_t bytes = static_cast<uint64_t>(d.height) * static_cast<uint64_t>(d.width) *
                         static_cast<uint64_t>(d.channels);
  if (d.encoding != ImageEncoding::kRaw && copy != nullptr && copy->dst != nullptr &&
      copy->bytes == bytes) {
    SHARDPACK_RETURN_IF_ERROR(DecodeSampleInto(*out, 1, copy->dst));
    copy->copied = true;
  }
  return Status::Ok();
}

// The pixels' checksum, read once: while copying them to `copy` where it fits them
// (CopyTarget), else in place.
uint32_t PixelCrc(const DecodedSample& d, CopyTarget* copy) {
  if (d.encoding == ImageEncoding::kRaw && copy != nullptr && copy->dst != nullptr &&
      copy->bytes == d.pixel_bytes) {
    copy->copied = true;
    return crc32c::CopyAndExtend(0, copy->dst, d.pixels, d.pixel_bytes, copy->stores);
  }
  return crc32c::Value(d.pixels, d.pixel_bytes);
}

// One pass over the pixels: their checksum, combined with the prefix's, gives the payload
// checksum, and is checked against image/raw/crc32c as well.
Status CheckCrcs(const RecordView& r, const DecodedSample& d, CopyTarget* copy) {
  const uint32_t pixels = PixelCrc(d, copy);
  SHARDPACK_RETURN_IF_ERROR(CheckPayloadCrc(r, PayloadCrc(r.payload, r.length, d, pixels)));
  return CheckPixelCrc(d, pixels);
}

// An Example payload (an LMDB value, or a TFRecord record's payload whose checksums were
// checked already) into a sample; with `verify_crc`, its pixel checksum checked (and the
// pixels copied to `copy` in that pass).
Status ParseExample(const uint8_t* payload, uint64_t length, bool verify_crc,
                    ImageEncoding expected, SampleView* out, CopyTarget* copy) {
  DecodedSample d;
  SHARDPACK_RETURN_IF_ERROR(ParseStoredSample(payload, length, &d));
  if (verify_crc && d.has_pixel_crc) {
    SHARDPACK_RETURN_IF_ERROR(CheckPixelCrc(d, PixelCrc(d, copy)));
  }
  return Fill(d, expected, out, copy);
}

// ShardReader::MissingBlocks over a file of `size` bytes, `resident(offset)` probing the
// page at `offset`.
template <typename ResidentFn>
bool AppendMissingBlocks(uint64_t size, uint64_t block, ResidentFn resident, uint64_t* budget,
                         std::vector<FileRange>* out) {
  const size_t first = out->size();
  for (uint64_t offset = 0; offset < size; offset += block) {
    const uint64_t length = std::min(block, size - offset);
    const uint64_t middle = offset + block / 2;
    if (resident(offset) && (middle >= offset + length || resident(middle))) continue;
    if (length > *budget) return false;
    *budget -= length;
    if (out->size() > first && out->back().offset + out->back().length == offset) {
      out->back().length += length;
    } else {
      out->push_back({offset, length});
    }
  }
  return true;
}

// What Prefetch brings of a record, in two stages a few records apart, which spreads the
// misses: a burst of 50 prefetches at once stalls on the core's outstanding misses (the
// loop was a fifth of a 32x32 sample's time in perf). Stage 1: the first 1 KiB (header,
// Example, first pixels); stage 2: the rest of the first 4 KiB, and of a longer record the
// first 512 bytes of each later page. At 32x32 (3 KB records) the 4 KiB are all of it
// (1.38x the samples/s of no prefetch in global order on 2 cores, where 128 bytes gave
// 1.12-1.24x). Two stages gave 1.15x one at 32x32 (1.02x at 64x64), the page heads
// 1.03-1.07x at 64x64 (64 B, 256 B and 1 KiB a page did no better), the second-level cache
// as the destination (prefetcht2) 1.09x the first-level's at both sizes (docs/LOADER.md).
constexpr uint64_t kPrefetchFirstBytes = 1024;
constexpr uint64_t kPrefetchBytes = 4096;
constexpr uintptr_t kPageBytes = 4096;
constexpr uintptr_t kPrefetchPageHead = 512;
constexpr int kPrefetchLocality = 1;  // __builtin_prefetch's: prefetcht2

inline void PrefetchLines(uintptr_t from, uintptr_t to) {
  for (uintptr_t at = from; at < to; at += 64) {
    __builtin_prefetch(reinterpret_cast<const void*>(at), 0, kPrefetchLocality);
  }
}

class TfrecordShard final : public ShardReader {
 public:
  TfrecordShard(const ShardEntry& e, std::string path, std::unique_ptr<io::MappedFile> file,
                std::vector<IndexEntry> index, uint64_t max_record_bytes, ImageEncoding encoding)
      : ShardReader(e.data.file, std::move(path), e.records, /*offsets=*/true, encoding),
        file_(std::move(file)),
        index_(std::move(index)),
        max_record_bytes_(max_record_bytes) {}

  using ShardReader::Get;
  using ShardReader::Parse;

  Status Get(uint64_t record, bool verify_crc, SampleView* out, CopyTarget* copy) const override {
    const IndexEntry& e = index_[record];
    // The rest of the file from the record on: a length field claiming more than the
    // index line says is named as such, not as a truncation.
    // (Open checked that every index line lies inside the file: they are ordered.)
    Status s =
        Decode(record, file_->data() + e.offset, file_->size() - e.offset, verify_crc, out, copy);
    // Whatever was read (a checksum over zeros fails too), a lost page is the fault.
    if (file_->faulted()) return CheckIntact(record);
    return s;
  }

  void WillNeed(uint64_t record) const override {
    const IndexEntry& e = index_[record];
    file_->WillNeed(e.offset, e.size);
  }

  void Prefetch(uint64_t record, int stage) const override {
    if (stage == 0) {
      __builtin_prefetch(&index_[record]);
      return;
    }
    const IndexEntry& e = index_[record];
    const auto start = reinterpret_cast<uintptr_t>(file_->data() + e.offset);
    const uintptr_t first = start + std::min<uint64_t>(e.size, kPrefetchFirstBytes);
    if (stage == 1) {
      PrefetchLines(start, first);
      return;
    }
    const uintptr_t whole = start + std::min<uint64_t>(e.size, kPrefetchBytes);
    PrefetchLines(first, whole);
    // The head of each later page walks the page table for the page and gives the
    // hardware's prefetcher, which stops at page boundaries, a start there.
    const uintptr_t end = start + e.size;
    for (uintptr_t page = (whole + kPageBytes - 1) & ~(kPageBytes - 1); page < end;
         page += kPageBytes) {
      PrefetchLines(page, std::min<uintptr_t>(end, page + kPrefetchPageHead));
    }
    // The footer (the payload's checksum), which the record's read takes first.
    if (end > whole) PrefetchLines(end - 4, end);
  }

  void Populate(uint64_t record) const override {
    const IndexEntry& e = index_[record];
    file_->Populate(e.offset, e.size);
  }

  void PreferHugePages() const override { file_->PreferHugePages(); }

  bool MissingBlocks(uint64_t block, uint64_t* budget, std::vector<FileRange>* out) const override {
    return AppendMissingBlocks(
        file_->size(), block, [&](uint64_t offset) { return file_->Resident(offset); }, budget,
        out);
  }

  void WillNeedRange(const FileRange& range) const override {
    file_->WillNeed(range.offset, range.length);
  }

  // The middle of the record: its pixels. Its first page also holds the previous record's
  // tail and its own header, which a reader may have touched alone.
  bool Resident(uint64_t record) const override {
    const IndexEntry& e = index_[record];
    return file_->Resident(e.offset + e.size / 2);
  }

  Status CheckIntact(uint64_t record) const override {
    if (!file_->faulted()) return Status::Ok();
    return Fault(record, IOError(std::string(io::kShrunkWhileMapped)));
  }

  StatusOr<RecordExtent> Extent(uint64_t record) const override {
    return RecordExtent{index_[record].offset, index_[record].size};
  }

  Status Parse(uint64_t record, const uint8_t* bytes, uint64_t n, bool verify_crc, SampleView* out,
               CopyTarget* copy) const override {
    return Decode(record, bytes, n, verify_crc, out, copy);
  }

  uint64_t LocationOffset(uint64_t record) const override { return index_[record].offset; }

 private:
  // The framed record at the start of `bytes` (`n` of them available).
  Status Decode(uint64_t record, const uint8_t* bytes, uint64_t n, bool verify_crc, SampleView* out,
                CopyTarget* copy) const {
    const IndexEntry& e = index_[record];
    RecordView r;
    Status s = ReadRecordAt(bytes, n, 0, max_record_bytes_,
                            /*check_payload_crc=*/false, &r);
    if (s.ok() && r.framed_size() != e.size) {
      s = CorruptionError("the record is " + std::to_string(r.framed_size()) +
                          " bytes, its index line says " + std::to_string(e.size));
    }
    if (!s.ok()) return Fault(record, s);
    if (!verify_crc) {
      s = ParseExample(r.payload, r.length, /*verify_crc=*/false, encoding(), out, copy);
      return s.ok() ? s : Fault(record, s);
    }
    DecodedSample d;
    s = ParseStoredSample(r.payload, r.length, &d);
    if (s.ok()) s = CheckCrcs(r, d, copy);
    if (s.ok()) s = Fill(d, encoding(), out, copy);
    return s.ok() ? s : Fault(record, s);
  }

  std::unique_ptr<io::MappedFile> file_;
  std::vector<IndexEntry> index_;
  uint64_t max_record_bytes_;
};

class LmdbShard final : public ShardReader {
 public:
  LmdbShard(const ShardEntry& e, std::string path, std::unique_ptr<LmdbShardReader> lmdb,
            ImageEncoding encoding)
      : ShardReader(e.data.file, std::move(path), e.records, /*offsets=*/false, encoding),
        lmdb_(std::move(lmdb)) {}

  using ShardReader::Get;
  using ShardReader::Parse;

  Status Get(uint64_t record, bool verify_crc, SampleView* out, CopyTarget* copy) const override {
    std::string_view v;
    Status s = lmdb_->Get(record, &v);
    if (s.ok()) {
      s = ParseExample(reinterpret_cast<const uint8_t*>(v.data()), v.size(), verify_crc, encoding(),
                       out, copy);
      if (!s.ok()) s = Fault(record, s);
    }
    if (lmdb_->faulted()) return CheckIntact(record);
    return s;
  }

  // The lookup reads the (few, cached) branch and leaf pages; the value's own pages are
  // what is hinted. A faulted map is left alone.
  void WillNeed(uint64_t record) const override {
    std::string_view value;
    if (lmdb_->faulted() || !lmdb_->Get(record, &value).ok()) return;
    lmdb_->WillNeed(value);
  }

  void Populate(uint64_t record) const override {
    std::string_view value;
    if (lmdb_->faulted() || !lmdb_->Get(record, &value).ok()) return;
    lmdb_->Populate(value);
  }

  void PreferHugePages() const override { lmdb_->PreferHugePages(); }

  void Prefetch(uint64_t record, int stage) const override {
    if (!lmdb_->faulted()) lmdb_->Prefetch(record, stage);
  }

  bool MissingBlocks(uint64_t block, uint64_t* budget, std::vector<FileRange>* out) const override {
    if (lmdb_->faulted()) return true;
    return AppendMissingBlocks(
        lmdb_->file_bytes(), block, [&](uint64_t offset) { return lmdb_->ResidentAt(offset); },
        budget, out);
  }

  void WillNeedRange(const FileRange& range) const override {
    if (!lmdb_->faulted()) lmdb_->WillNeedAt(range.offset, range.length);
  }

  bool Resident(uint64_t record) const override {
    std::string_view value;
    if (lmdb_->faulted() || !lmdb_->Get(record, &value).ok()) return true;
    return lmdb_->Resident(value.substr(value.size() / 2));
  }

  Status CheckIntact(uint64_t record) const override {
    if (!lmdb_->faulted()) return Status::Ok();
    return Fault(record, IOError(lmdb_->FaultMessage()));
  }

  // The value's bytes: LMDB stores a value larger than a page contiguously, in overflow
  // pages, and a smaller one inside its leaf page; either way one range of the file.
  StatusOr<RecordExtent> Extent(uint64_t record) const override {
    std::string_view v;
    Status s = lmdb_->Get(record, &v);
    if (lmdb_->faulted()) return CheckIntact(record);
    if (!s.ok()) return s;
    return RecordExtent{lmdb_->FileOffset(v), v.size()};
  }

  Status Parse(uint64_t record, const uint8_t* bytes, uint64_t n, bool verify_crc, SampleView* out,
               CopyTarget* copy) const override {
    Status s = ParseExample(bytes, n, verify_crc, encoding(), out, copy);
    return s.ok() ? s : Fault(record, s);
  }

  uint64_t LocationOffset(uint64_t) const override { return 0; }

 private:
  std::unique_ptr<LmdbShardReader> lmdb_;
};

}  // namespace

StatusOr<std::unique_ptr<ShardReader>> OpenTfrecordShard(const ShardEntry& e,
                                                         const std::string& path,
                                                         const std::string& shown,
                                                         const std::string& index_path,
                                                         const std::string& index_shown,
                                                         const ShardOpenOptions& options) {
  io::Env* env = options.env != nullptr ? options.env : io::Env::Posix();
  const auto pattern =
      options.random_access ? io::AccessPattern::kRandom : io::AccessPattern::kSequential;
  SHARDPACK_ASSIGN_OR_RETURN(
      auto file,
      env->MapFile(path, pattern,
                   options.copy_on_write ? io::MapMode::kCopyOnWrite : io::MapMode::kReadOnly));
  if (file->size() != e.data.bytes) {
    return CorruptionError(shown + ": " + std::to_string(file->size()) +
                           " bytes, the manifest says " + std::to_string(e.data.bytes));
  }
  SHARDPACK_ASSIGN_OR_RETURN(std::string index_text, env->ReadFile(index_path, kMaxIndexBytes));
  auto index = ParseIndex(index_text, e.records);
  if (!index.ok()) return index.status().WithPrefix(index_shown);
  if (index->size() != e.records) {
    return CorruptionError(index_shown + ": " + std::to_string(index->size()) +
                           " records, the manifest says " + std::to_string(e.records));
  }
  if (!index->empty()) {
    const IndexEntry& last = index->back();
    // Not `last.offset + last.size > size`: the sum can wrap.
    if (last.offset > file->size() || last.size > file->size() - last.offset) {
      return CorruptionError(index_shown + ": line " + std::to_string(index->size()) +
                             ": record ends at " + std::to_string(last.offset + last.size) +
                             ", past the end of " + e.data.file + " (" +
                             std::to_string(file->size()) + " bytes)");
    }
  }
  return std::unique_ptr<ShardReader>(
      new TfrecordShard(e, path, std::move(file), std::move(index).value(),
                        options.max_record_bytes, options.encoding));
}

StatusOr<std::unique_ptr<ShardReader>> OpenLmdbShard(const ShardEntry& e, const std::string& path,
                                                     const std::string& shown,
                                                     const ShardOpenOptions& options) {
  SHARDPACK_ASSIGN_OR_RETURN(auto lmdb, LmdbShardReader::Open(path, options.random_access));
  if (lmdb->file_bytes() != e.data.bytes) {
    return CorruptionError(shown + ": " + std::to_string(lmdb->file_bytes()) +
                           " bytes, the manifest says " + std::to_string(e.data.bytes));
  }
  if (lmdb->entries() != e.records) {
    return CorruptionError(shown + ": " + std::to_string(lmdb->entries()) +
                           " records, the manifest says " + std::to_string(e.records));
  }
  if (options.random_access) lmdb->IndexLeaves(e.records);
  return std::unique_ptr<ShardReader>(new LmdbShard(e, path, std::move(lmdb), options.encoding));
}

}  // namespace shardpack::format
