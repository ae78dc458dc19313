// VerifyTfrecordFiles (shardpack/verify.h): TFRecord files without a manifest, records
// of shardpack's image/raw schema or TensorFlow's image/encoded one.
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/task_arena.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <mutex>

#include "format/example.h"
#include "format/format.h"
#include "format/record.h"
#include "format/tfrecord_files.h"
#include "image/image.h"
#include "image/jpeg_decoder.h"
#include "io/env.h"
#include "io/mapped_range.h"
#include "shardpack/verify.h"
#include "util/crc32c.h"
#include "util/text.h"
#include "util/thread_count.h"

namespace shardpack {
namespace {

struct FileResult {
  std::vector<VerifyFault> faults;
  uint64_t fault_count = 0;
  uint64_t records = 0;
  uint64_t bytes = 0;
};

std::string Upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

std::string FirstBytes(std::string_view s) {
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < std::min<size_t>(4, s.size()); ++i) {
    if (i > 0) out += ' ';
    out += kHex[static_cast<uint8_t>(s[i]) >> 4];
    out += kHex[static_cast<uint8_t>(s[i]) & 15];
  }
  return out;
}

// Checks an image/raw sample as far as the format goes without a manifest.
std::string CheckRaw(const format::ExampleView& view) {
  format::DecodedSample d;
  Status s = format::DecodeSample(view, &d);
  if (!s.ok()) return s.message();
  if (d.has_pixel_crc) s = format::CheckPixelCrc(d, crc32c::Value(d.pixels, d.pixel_bytes));
  return s.ok() ? "" : s.message();
}

// Checks an image/encoded sample (verify.h says what).
std::string CheckEncoded(const format::ExampleView& view, bool decode_images) {
  format::EncodedSample e;
  Status s = format::DecodeEncodedSample(view, &e);
  if (!s.ok()) return s.message();
  const auto* bytes = reinterpret_cast<const uint8_t*>(e.encoded.data());
  const image::Format sniffed = image::Sniff(bytes, e.encoded.size());
  if (sniffed == image::Format::kUnknown) {
    return "feature image/encoded: not a JPEG or PNG file (starts with " + FirstBytes(e.encoded) +
           ")";
  }
  const char* actual = sniffed == image::Format::kJpeg ? "JPEG" : "PNG";
  if (!e.format.empty()) {
    const std::string declared = Upper(e.format);
    const bool jpeg = declared == "JPEG" || declared == "JPG";
    if (!jpeg && declared != "PNG") {
      return "feature image/format: \"" + EscapeBytes(e.format) + "\", expected JPEG or PNG";
    }
    if (jpeg != (sniffed == image::Format::kJpeg)) {
      return "feature image/format: \"" + EscapeBytes(e.format) + "\", but image/encoded is a " +
             actual;
    }
  }
  if (!decode_images) return "";
  image::DecodeOptions o;
  o.apply_orientation = false;
  o.min_height = o.min_width = 1;  // the largest DCT scaling: every scan is still read
  auto decoded = image::Decode(bytes, e.encoded.size(), o);
  if (!decoded.ok()) return "image/encoded: " + decoded.status().ToString();
  if (e.height > 0 && e.width > 0) {
    int denominator = 1;
    if (sniffed == image::Format::kJpeg) {
      denominator = image::ChooseJpegScaleDenominator(static_cast<int>(e.width),
                                                      static_cast<int>(e.height), false, 1, 1);
    }
    const int64_t h = (e.height + denominator - 1) / denominator;
    const int64_t w = (e.width + denominator - 1) / denominator;
    if (decoded->height != h || decoded->width != w) {
      std::string got = std::to_string(decoded->height) + "x" + std::to_string(decoded->width);
      return "image/height x image/width is " + std::to_string(e.height) + "x" +
             std::to_string(e.width) + ", but the " + actual + " decodes to " + got +
             (denominator > 1 ? " at 1/" + std::to_string(denominator) + " scale (expected " +
                                    std::to_string(h) + "x" + std::to_string(w) + ")"
                              : "");
    }
  }
  return "";
}

void VerifyFile(const format::TfrecordFile& file, const VerifyOptions& options, std::mutex* mu,
                FileResult* out) {
  auto add = [&](int64_t record, int64_t offset, std::string message) {
    ++out->fault_count;
    if (out->faults.size() >= options.max_faults_per_file) return;
    VerifyFault f{EscapeBytes(file.name), record, offset, std::move(message)};
    if (options.on_fault) {
      std::lock_guard<std::mutex> l(*mu);
      options.on_fault(f);
    }
    out->faults.push_back(std::move(f));
  };
  auto mapped = io::Env::Posix()->MapFile(file.path, io::AccessPattern::kSequential);
  if (!mapped.ok()) {
    add(-1, -1, mapped.status().message());
    return;
  }
  const uint8_t* data = (*mapped)->data();
  out->bytes = (*mapped)->size();
  format::RecordScanner scanner(
      data, out->bytes, {.max_length = kMaxRecordBytes, .check_payload_crc = true},
      [&](uint64_t record, uint64_t offset, const std::string& message) {
        std::string m = message;
        if (offset == 0 && image::Sniff(data, out->bytes) != image::Format::kUnknown) {
          m += " (the file is a JPEG or PNG image, not a TFRecord file)";
        }
        add(static_cast<int64_t>(record), static_cast<int64_t>(offset), std::move(m));
      });
  format::RecordView r;
  while (scanner.Next(&r)) {
    format::ExampleView view;
    Status s = format::ParseExampleView(r.payload, r.length, &view);
    std::string fault;
    if (!s.ok()) {
      fault = s.message();
    } else if (auto kind = format::ClassifyExample(view); !kind.ok()) {
      fault = kind.status().message();
    } else if (*kind == format::PayloadKind::kRaw) {
      fault = CheckRaw(view);
    } else {
      fault = CheckEncoded(view, options.decode_images);
    }
    if (!fault.empty()) {
      add(static_cast<int64_t>(r.index), static_cast<int64_t>(r.offset), std::move(fault));
    }
  }
  out->records = scanner.records_seen();
  if ((*mapped)->faulted()) {
    add(-1, -1,
        std::string(io::kShrunkWhileMapped) +
            "; faults listed for this file may be consequences of it");
  }
  std::stable_sort(out->faults.begin(), out->faults.end(),
                   [](const VerifyFault& a, const VerifyFault& b) { return a.offset < b.offset; });
  if (out->fault_count > out->faults.size()) {
    out->faults.push_back({EscapeBytes(file.name), -1, -1,
                           std::to_string(out->fault_count - out->faults.size()) +
                               " more faults not listed (" + std::to_string(out->fault_count) +
                               " in all)"});
  }
}

}  // namespace

StatusOr<VerifyReport> VerifyTfrecordFiles(const std::string& src, const VerifyOptions& options) {
  SHARDPACK_RETURN_IF_ERROR(CheckThreadCount(options.num_threads, "num_threads"));
  const auto start = std::chrono::steady_clock::now();
  auto found = format::FindTfrecordFiles(src);
  if (!found.ok()) return found.status();
  VerifyReport report;
  std::mutex mu;
  for (const auto& [name, reason] : found->rejects) {
    VerifyFault f{"(directory)", -1, -1, EscapeBytes(name) + ": " + reason};
    if (options.on_fault) options.on_fault(f);
    report.faults.push_back(std::move(f));
    ++report.fault_count;
  }
  std::vector<FileResult> results(found->files.size());
  const int threads =
      options.num_threads > 0 ? options.num_threads : tbb::this_task_arena::max_concurrency();
  tbb::task_arena arena(threads);
  arena.execute([&] {
    tbb::parallel_for(size_t{0}, found->files.size(),
                      [&](size_t i) { VerifyFile(found->files[i], options, &mu, &results[i]); });
  });
  for (FileResult& r : results) {
    ++report.files;
    report.records += r.records;
    report.bytes += r.bytes;
    report.fault_count += r.fault_count;
    for (VerifyFault& f : r.faults) report.faults.push_back(std::move(f));
  }
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

}  // namespace shardpack
