// decode_floor: the floor a naive converter pays, libjpeg-turbo's full-size decode alone.
//
// Reads every listed file into memory first, then times only the decodes: each file is
// decoded at full size (no DCT scaling) to 8-bit RGB through the libjpeg API, with
// libjpeg's defaults (accurate integer IDCT, fancy upsampling), as `shardpack convert`
// and Pillow use them. Nothing is resized, oriented or written, so this is less work
// than any converter that decodes at full size does; a converter that beats it per core
// does so by decoding less (DCT scaling).
//
// What the floor leaves out, so that it stays a floor: CMYK/YCCK files are decoded to
// libjpeg's 4-channel CMYK without the conversion to RGB; each thread reuses one
// decompressor and one output buffer (no allocation or page faults per image).
//
// Files are handed to the threads in list order through an atomic counter, as a
// converter takes them. One untimed pass first reports undecodable files (stderr).
//
// Usage: decode_floor --root DIR --list FILE [--threads N ...] [--reps R]
//   FILE: "relative/path label" lines, as `shardpack convert --list` takes (the label,
//   after the last space or tab, is ignored); '#' lines and blank lines are skipped.
// Prints, per thread count, one line per repetition and a summary line
//   decode_floor threads=T images=N failed=F megapixels=M seconds=S images_per_s=X mp_per_s=Y
// with S the median of the repetitions.
// jpeglib.h needs size_t and FILE declared before it.
#include <cstddef>
#include <cstdio>

#include <jpeglib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csetjmp>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace {

struct ErrorManager {
  jpeg_error_mgr pub;
  jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

void OnError(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<ErrorManager*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  std::longjmp(err->jump, 1);
}

void OnMessage(j_common_ptr, int) {}  // warnings are not errors here: a floor

struct File {
  std::string path;
  std::vector<uint8_t> bytes;
};

struct Decoder {
  jpeg_decompress_struct cinfo;
  ErrorManager err;
  std::vector<uint8_t> buffer;
  uint64_t pixels = 0;  // stored width x height of the last successful decode

  Decoder() {
    cinfo.err = jpeg_std_error(&err.pub);
    err.pub.error_exit = OnError;
    err.pub.emit_message = OnMessage;
    jpeg_create_decompress(&cinfo);
  }
  ~Decoder() { jpeg_destroy_decompress(&cinfo); }
  Decoder(const Decoder&) = delete;
  Decoder& operator=(const Decoder&) = delete;

  // Returns false (and leaves err.message) when libjpeg fails. No C++ object with a
  // destructor lives between setjmp and the libjpeg calls that may longjmp.
  bool Decode(const File& f) {
    if (setjmp(err.jump) != 0) {
      jpeg_abort_decompress(&cinfo);
      return false;
    }
    jpeg_mem_src(&cinfo, f.bytes.data(), static_cast<unsigned long>(f.bytes.size()));
    jpeg_read_header(&cinfo, TRUE);
    const bool cmyk = cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK;
    cinfo.out_color_space = cmyk ? JCS_CMYK : JCS_RGB;
    jpeg_start_decompress(&cinfo);
    const size_t stride = static_cast<size_t>(cinfo.output_width) * cinfo.output_components;
    const size_t need = stride * cinfo.output_height;
    if (buffer.size() < need) {
      buffer.clear();
      buffer.shrink_to_fit();
      buffer.resize(need);
    }
    while (cinfo.output_scanline < cinfo.output_height) {
      JSAMPROW row = buffer.data() + stride * cinfo.output_scanline;
      jpeg_read_scanlines(&cinfo, &row, 1);
    }
    pixels = static_cast<uint64_t>(cinfo.image_width) * cinfo.image_height;
    jpeg_finish_decompress(&cinfo);
    return true;
  }
};

struct Result {
  double seconds = 0;
  uint64_t decoded = 0;
  uint64_t failed = 0;
  uint64_t pixels = 0;
};

Result Run(const std::vector<File>& files, int threads, bool report_failures) {
  std::atomic<size_t> next{0};
  std::vector<Result> per(threads);
  std::vector<std::string> failures;
  std::vector<std::thread> pool;
  // Decoders (and their first buffers) are made before the clock starts.
  std::vector<std::unique_ptr<Decoder>> decoders;
  for (int t = 0; t < threads; ++t) decoders.push_back(std::make_unique<Decoder>());
  std::vector<std::vector<std::string>> errors(threads);
  const auto start = std::chrono::steady_clock::now();
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      Decoder& d = *decoders[t];
      Result& r = per[t];
      for (size_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < files.size();) {
        if (d.Decode(files[i])) {
          ++r.decoded;
          r.pixels += d.pixels;
        } else {
          ++r.failed;
          if (report_failures) errors[t].push_back(files[i].path + ": " + d.err.message);
        }
      }
    });
  }
  for (auto& th : pool) th.join();
  Result total;
  total.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (int t = 0; t < threads; ++t) {
    total.decoded += per[t].decoded;
    total.failed += per[t].failed;
    total.pixels += per[t].pixels;
    for (const auto& e : errors[t]) std::fprintf(stderr, "decode_floor: %s\n", e.c_str());
  }
  return total;
}

[[noreturn]] void Usage(const char* msg) {
  std::fprintf(stderr,
               "decode_floor: %s\nusage: decode_floor --root DIR --list FILE "
               "[--threads N ...] [--reps R]\n",
               msg);
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  std::string root, list;
  std::vector<int> thread_counts;
  int reps = 3;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) Usage((a + " needs a value").c_str());
      return argv[++i];
    };
    if (a == "--root") {
      root = value();
    } else if (a == "--list") {
      list = value();
    } else if (a == "--threads") {
      thread_counts.push_back(std::atoi(value().c_str()));
    } else if (a == "--reps") {
      reps = std::atoi(value().c_str());
    } else {
      Usage(("unknown argument " + a).c_str());
    }
  }
  if (root.empty() || list.empty()) Usage("--root and --list are required");
  if (thread_counts.empty()) thread_counts.push_back(1);
  for (int t : thread_counts) {
    if (t < 1) Usage("--threads must be at least 1");
  }
  if (reps < 1) Usage("--reps must be at least 1");

  std::ifstream in(list);
  if (!in) Usage(("cannot read " + list).c_str());
  std::vector<File> files;
  uint64_t bytes = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    const size_t cut = line.find_last_of(" \t");
    File f;
    f.path = root + "/" + (cut == std::string::npos ? line : line.substr(0, cut));
    std::ifstream file(f.path, std::ios::binary);
    if (!file) {
      std::fprintf(stderr, "decode_floor: cannot read %s\n", f.path.c_str());
      return 2;
    }
    f.bytes.assign(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
    bytes += f.bytes.size();
    files.push_back(std::move(f));
  }
  if (files.empty()) Usage("the list names no file");
  std::printf("decode_floor: %zu files, %.1f MiB in memory\n", files.size(),
              static_cast<double>(bytes) / (1 << 20));

  Run(files, 1, true);  // warm-up (caches, allocator, libjpeg's tables); reports failures
  for (int threads : thread_counts) {
    std::vector<Result> results;
    for (int r = 0; r < reps; ++r) {
      results.push_back(Run(files, threads, false));
      const Result& x = results.back();
      std::printf("decode_floor: threads=%d rep=%d seconds=%.3f images_per_s=%.1f\n", threads,
                  r + 1, x.seconds, static_cast<double>(x.decoded) / x.seconds);
    }
    std::sort(results.begin(), results.end(),
              [](const Result& a, const Result& b) { return a.seconds < b.seconds; });
    const Result& m = results[results.size() / 2];
    std::printf(
        "decode_floor threads=%d images=%llu failed=%llu megapixels=%.1f seconds=%.3f "
        "images_per_s=%.1f mp_per_s=%.1f\n",
        threads, static_cast<unsigned long long>(m.decoded),
        static_cast<unsigned long long>(m.failed), static_cast<double>(m.pixels) / 1e6, m.seconds,
        static_cast<double>(m.decoded) / m.seconds,
        static_cast<double>(m.pixels) / 1e6 / m.seconds);
  }
  return 0;
}
