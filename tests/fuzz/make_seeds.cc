// Writes the seed corpora of the fuzz harnesses, tests/fuzz/corpus/<harness>/, with the
// project's own writers and encoders (plus libjpeg and libpng directly for the forms the
// encoder does not make: CMYK, arithmetic coding, palette, 16-bit, interlaced, eXIf).
// Every seed is a few hundred bytes to a few KB: tiny images, two- or three-record shards.
//
//   build-fuzz/tests/fuzz/fuzz_make_seeds tests/fuzz/corpus
//
// A development tool: any failure aborts (libjpeg's and libpng's default error handlers).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

// jpeglib.h needs size_t and FILE declared before it.
#include <jpeglib.h>
#include <png.h>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "dataset_input.h"
#include "format/example.h"
#include "format/format.h"
#include "format/lmdb_shard.h"
#include "format/record.h"
#include "image/encoder.h"
#include "shardpack/manifest.h"
#include "shardpack/shard_writer.h"
#include "util/crc32c.h"

namespace fs = std::filesystem;
using namespace shardpack;

namespace {

fs::path g_out;

void Write(const std::string& harness, const std::string& name, const std::string& bytes) {
  fs::create_directories(g_out / harness);
  std::ofstream f(g_out / harness / name, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!f) {
    std::cerr << "cannot write " << (g_out / harness / name) << "\n";
    std::exit(1);
  }
}

std::string ReadAll(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

template <typename T>
T Must(StatusOr<T> v) {
  if (!v.ok()) {
    std::cerr << v.status().ToString() << "\n";
    std::exit(1);
  }
  return std::move(v).value();
}

// A smooth pattern with some edges, so that the encoders produce non-trivial data.
std::vector<uint8_t> Pixels(int h, int w, int c, int seed) {
  std::vector<uint8_t> p(static_cast<size_t>(h) * w * c);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      for (int k = 0; k < c; ++k) {
        p[(static_cast<size_t>(y) * w + x) * c + k] = static_cast<uint8_t>(
            (x * 37 + y * 11 + k * 80 + seed * 53 + ((x ^ y) & 4) * 20) & 0xff);
      }
    }
  }
  return p;
}

// A TIFF header and IFD0 holding only Orientation (0x0112, SHORT) = `orientation`.
std::string ExifTiff(int orientation) {
  const uint8_t tiff[] = {'I',  'I',  0x2a, 0, 8, 0, 0, 0,  // little-endian, IFD0 at 8
                          1,    0,                          // one entry
                          0x12, 0x01, 3,    0, 1, 0, 0, 0, static_cast<uint8_t>(orientation),
                          0,    0,    0,    0, 0, 0, 0};  // no next IFD
  return std::string(reinterpret_cast<const char*>(tiff), sizeof tiff);
}

// Inserts an APP1 Exif segment right after the SOI marker.
std::string WithExif(const std::string& jpeg, int orientation) {
  const std::string payload = std::string("Exif\0\0", 6) + ExifTiff(orientation);
  const size_t len = payload.size() + 2;
  std::string app1 = {'\xff', '\xe1', static_cast<char>(len >> 8), static_cast<char>(len & 0xff)};
  return jpeg.substr(0, 2) + app1 + payload + jpeg.substr(2);
}

// JPEG forms the project's encoder does not write.
struct JpegForm {
  J_COLOR_SPACE in_space = JCS_RGB;
  J_COLOR_SPACE jpeg_space = JCS_YCbCr;
  int components = 3;
  bool arithmetic = false;
  unsigned restart_rows = 0;
  bool progressive = false;
};

std::string EncodeJpegForm(int h, int w, const JpegForm& form) {
  const std::vector<uint8_t> px = Pixels(h, w, form.components, 3);
  jpeg_compress_struct cinfo;
  jpeg_error_mgr err;
  cinfo.err = jpeg_std_error(&err);
  jpeg_create_compress(&cinfo);
  unsigned char* out = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&cinfo, &out, &size);
  cinfo.image_width = static_cast<JDIMENSION>(w);
  cinfo.image_height = static_cast<JDIMENSION>(h);
  cinfo.input_components = form.components;
  cinfo.in_color_space = form.in_space;
  jpeg_set_defaults(&cinfo);
  jpeg_set_colorspace(&cinfo, form.jpeg_space);
  jpeg_set_quality(&cinfo, 75, TRUE);
  cinfo.arith_code = form.arithmetic ? TRUE : FALSE;
  cinfo.restart_in_rows = static_cast<int>(form.restart_rows);
  if (form.progressive) jpeg_simple_progression(&cinfo);
  jpeg_start_compress(&cinfo, TRUE);
  while (cinfo.next_scanline < cinfo.image_height) {
    JSAMPROW row = const_cast<JSAMPROW>(px.data() + static_cast<size_t>(cinfo.next_scanline) * w *
                                                        form.components);
    jpeg_write_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_compress(&cinfo);
  jpeg_destroy_compress(&cinfo);
  std::string bytes(reinterpret_cast<char*>(out), size);
  std::free(out);
  return bytes;
}

// PNG forms the project's encoder does not write.
struct PngForm {
  int color_type = PNG_COLOR_TYPE_RGB;
  int bit_depth = 8;
  bool interlaced = false;
  bool trns = false;
  int exif_orientation = 0;  // 0: no eXIf chunk
  bool text = false;
};

void AppendPng(png_structp png, png_bytep data, size_t n) {
  static_cast<std::string*>(png_get_io_ptr(png))->append(reinterpret_cast<char*>(data), n);
}
void FlushPng(png_structp) {}

std::string EncodePngForm(int h, int w, const PngForm& form) {
  std::string out;
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  png_set_write_fn(png, &out, AppendPng, FlushPng);
  png_set_IHDR(png, info, static_cast<png_uint_32>(w), static_cast<png_uint_32>(h), form.bit_depth,
               form.color_type, form.interlaced ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  std::vector<png_color> palette;
  if (form.color_type == PNG_COLOR_TYPE_PALETTE) {
    for (int i = 0; i < (1 << form.bit_depth); ++i) {
      palette.push_back({static_cast<png_byte>(i * 40), static_cast<png_byte>(255 - i * 30),
                         static_cast<png_byte>(i * 90)});
    }
    png_set_PLTE(png, info, palette.data(), static_cast<int>(palette.size()));
  }
  png_byte trns_alpha[2] = {0, 128};
  png_color_16 trns_color{};
  trns_color.gray = 3;
  trns_color.red = 40;
  trns_color.green = 230;
  trns_color.blue = 90;
  if (form.trns) png_set_tRNS(png, info, trns_alpha, 2, &trns_color);
  std::string exif;
  if (form.exif_orientation != 0) {
    exif = ExifTiff(form.exif_orientation);
    png_set_eXIf_1(png, info, static_cast<png_uint_32>(exif.size()),
                   reinterpret_cast<png_bytep>(exif.data()));
  }
  png_text text{};
  if (form.text) {
    text.compression = PNG_TEXT_COMPRESSION_zTXt;
    text.key = const_cast<char*>("Comment");
    text.text = const_cast<char*>("a compressed comment, skipped by the decoder");
    png_set_text(png, info, &text, 1);
  }
  png_write_info(png, info);
  if (form.bit_depth == 16) png_set_swap(png);  // rows below are little-endian samples
  const int channels = png_get_channels(png, info);
  const size_t rowbytes = png_get_rowbytes(png, info);
  std::vector<uint8_t> rows(rowbytes * h);
  const std::vector<uint8_t> px = Pixels(h, w, 8, 5);
  for (int y = 0; y < h; ++y) {
    for (size_t i = 0; i < rowbytes; ++i) rows[y * rowbytes + i] = px[(y * w * 8 + i) % px.size()];
    if (form.color_type == PNG_COLOR_TYPE_PALETTE && form.bit_depth == 8) {
      for (size_t i = 0; i < rowbytes; ++i) rows[y * rowbytes + i] %= palette.size();
    }
  }
  (void)channels;
  std::vector<png_bytep> pointers;
  for (int y = 0; y < h; ++y) pointers.push_back(rows.data() + y * rowbytes);
  png_write_image(png, pointers.data());
  png_write_end(png, info);
  png_destroy_write_struct(&png, &info);
  return out;
}

// A small dataset written by ShardWriter; returns its directory.
fs::path WriteDataset(const fs::path& dir, Backend backend, bool fixed, int channels,
                      uint32_t alignment) {
  fs::remove_all(dir);
  ShardWriterOptions o;
  o.backend = backend;
  o.class_names = {"cat", "dog"};
  o.max_shard_records = 2;
  o.pixel_alignment = alignment;
  o.lmdb_initial_map_bytes = 1 << 20;
  o.seed = 7;
  o.options_json = R"({"max_side":8,"shuffle":true})";
  o.image.channels = channels;
  if (fixed) {
    o.image.height = 3;
    o.image.width = 4;
  } else {
    o.image.max_side = 8;
  }
  auto writer = Must(ShardWriter::Create(dir.string(), o));
  for (int i = 0; i < 3; ++i) {
    const int h = fixed ? 3 : 2 + i, w = fixed ? 4 : 5 - i;
    const std::vector<uint8_t> px = Pixels(h, w, channels, i);
    SampleInput s;
    s.pixels = px;
    s.height = h;
    s.width = w;
    s.channels = channels;
    s.label = i % 2;
    s.filename = i == 0 ? "a.png" : "photos/b.jpg";
    Status st = writer->Add(s);
    if (!st.ok()) {
      std::cerr << st.ToString() << "\n";
      std::exit(1);
    }
  }
  Must(writer->Finish());
  return dir;
}

std::string Payload(int h, int w, int c, int64_t label, std::string_view text,
                    std::string_view filename, uint64_t offset, uint32_t alignment) {
  const std::vector<uint8_t> px = Pixels(h, w, c, 1);
  const std::string pixels(px.begin(), px.end());
  format::SampleMeta meta;
  meta.height = h;
  meta.width = w;
  meta.channels = c;
  meta.label = label;
  meta.class_text = text;
  meta.filename = filename;
  const std::string entries = format::EncodeFeatureEntries(meta, crc32c::Value(pixels));
  return format::EncodePayloadPrefix(entries, pixels.size(), offset, alignment) + pixels;
}

// A whole dataset for dataset_fuzzer: `samples` images of the sizes `sizes` cycles
// through, labels cycling through three classes, in shards of `per_shard` records.
struct DatasetSeed {
  Backend backend = Backend::kTfrecord;
  LmdbSchema schema = LmdbSchema::kExample;
  ImageEncoding encoding = ImageEncoding::kRaw;
  int channels = 3;
  std::vector<std::pair<int, int>> sizes = {{4, 4}};  // one size: a fixed-size dataset
  int max_side = 0;
  int samples = 6;
  uint64_t per_shard = 3;
  uint32_t alignment = 64;
  uint8_t flags = fuzz::kPristine;
};

std::string DatasetContainer(const fs::path& dir, const DatasetSeed& seed) {
  fs::remove_all(dir);
  ShardWriterOptions o;
  o.backend = seed.backend;
  o.lmdb_schema = seed.schema;
  o.class_names = {"cat", "dog", "bird"};
  o.max_shard_records = seed.per_shard;
  o.pixel_alignment = seed.encoding == ImageEncoding::kRaw ? seed.alignment : 1;
  o.lmdb_initial_map_bytes = 1 << 20;
  o.seed = 11;
  o.image.channels = seed.channels;
  o.image.encoding = seed.encoding;
  if (seed.sizes.size() == 1) {
    o.image.height = seed.sizes[0].first;
    o.image.width = seed.sizes[0].second;
  } else {
    o.image.max_side = seed.max_side;
  }
  auto writer = Must(ShardWriter::Create(dir.string(), o));
  for (int i = 0; i < seed.samples; ++i) {
    const auto [h, w] = seed.sizes[static_cast<size_t>(i) % seed.sizes.size()];
    const std::vector<uint8_t> px = Pixels(h, w, seed.channels, i);
    std::string encoded;
    const bool jpeg = seed.encoding == ImageEncoding::kJpeg ||
                      (seed.encoding == ImageEncoding::kMixed && i % 2 == 0);
    if (jpeg) encoded = Must(image::EncodeJpeg(px.data(), h, w, seed.channels));
    if (seed.encoding == ImageEncoding::kPng) {
      encoded = Must(image::EncodePng(px.data(), h, w, seed.channels));
    }
    SampleInput s;
    s.pixels = px;
    s.encoded = {reinterpret_cast<const uint8_t*>(encoded.data()), encoded.size()};
    s.height = h;
    s.width = w;
    s.channels = seed.channels;
    s.label = i % 3;
    s.filename = i % 2 == 0 ? "a.png" : "photos/b.jpg";
    Status st = writer->Add(s);
    if (!st.ok()) {
      std::cerr << st.ToString() << "\n";
      std::exit(1);
    }
  }
  const Manifest m = Must(writer->Finish());
  fuzz::DatasetInput input;
  input.flags = seed.flags;
  input.files.push_back({"manifest.json", ReadAll(dir / "manifest.json")});
  for (const FileEntry* f : ListedFiles(m)) {
    input.files.push_back({f->file, ReadAll(dir / f->file)});
  }
  // The fix-ups must leave what the writer made as it is (the harness checks it too).
  fuzz::DatasetInput fixed = input;
  fuzz::FixUpOptions all;
  all.counts = true;
  fuzz::FixUp(&fixed, all);
  if (fuzz::Pack(fixed) != fuzz::Pack(input)) {
    std::cerr << "the fix-ups change the dataset written to " << dir << "\n";
    std::exit(1);
  }
  return fuzz::Pack(input);
}

// An LMDB shard of two levels: a branch page over leaf pages of small values, and a few
// values in overflow runs.
std::string TwoLevelLmdb(const fs::path& dir) {
  fs::create_directories(dir);
  const fs::path path = dir / "two-level.lmdb";
  auto writer =
      Must(format::LmdbShardWriter::Create(path.string(), {.initial_map_bytes = 1 << 20}));
  const std::string small = format::EncodeFeatureEntries({2, 2, 3, 0, "c", ""}, 0);
  const std::string large = format::EncodeFeatureEntries({40, 40, 3, 1, "d", ""}, 0);
  for (int i = 0; i < 160; ++i) {
    const bool big = i % 40 == 39;
    const std::string px(big ? 40 * 40 * 3 : 12, static_cast<char>(i));
    if (!writer->Append(big ? large : small, px, 0, format::kKeyRaw).ok()) std::exit(1);
  }
  FileEntry f;
  if (!writer->Finish(&f).ok()) std::exit(1);
  return ReadAll(path);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: fuzz_make_seeds CORPUS_DIR (tests/fuzz/corpus)\n";
    return 2;
  }
  g_out = argv[1];
  const fs::path tmp = fs::temp_directory_path() / ("shardpack-seeds-" + std::to_string(getpid()));

  // Datasets: their shards, index files and manifests.
  const fs::path tf = WriteDataset(tmp / "tf", Backend::kTfrecord, /*fixed=*/true, 3, 64);
  const fs::path tf1 = WriteDataset(tmp / "tf1", Backend::kTfrecord, /*fixed=*/false, 1, 1);
  const fs::path lm = WriteDataset(tmp / "lmdb", Backend::kLmdb, /*fixed=*/false, 3, 64);
  Write("record", "shard-aligned-rgb.tfrecord", ReadAll(tf / "shard-00000-of-00002.tfrecord"));
  Write("record", "shard-unaligned-gray.tfrecord", ReadAll(tf1 / "shard-00000-of-00002.tfrecord"));
  Write("record", "one-record.tfrecord", ReadAll(tf / "shard-00001-of-00002.tfrecord"));
  // An odd first byte asks the harness to recompute the checksums of what follows.
  Write("record", "checksums-fixed-by-harness.bin",
        "\x01" + ReadAll(tf1 / "shard-00001-of-00002.tfrecord"));
  uint8_t empty_record[format::kRecordOverhead];
  format::EncodeRecordHeader(0, empty_record);
  format::EncodeRecordFooter(crc32c::Value(nullptr, 0), empty_record + format::kRecordHeaderSize);
  Write("record", "empty-record.tfrecord",
        std::string(reinterpret_cast<char*>(empty_record), sizeof empty_record));
  Write("index", "two-records.idx", ReadAll(tf / "shard-00000-of-00002.idx"));
  Write("index", "one-record.idx", ReadAll(tf1 / "shard-00001-of-00002.idx"));
  Write("index", "spaces-tabs-crlf.idx", "0 330\r\n330\t326 \r\n656 400\n\n");
  Write("manifest", "tfrecord-fixed.json", ReadAll(tf / "manifest.json"));
  Write("manifest", "tfrecord-variable-gray.json", ReadAll(tf1 / "manifest.json"));
  Write("manifest", "lmdb.json", ReadAll(lm / "manifest.json"));
  Write("lmdb", "two-records.lmdb", ReadAll(lm / "shard-00000-of-00002.lmdb"));
  Write("lmdb", "two-levels.lmdb", TwoLevelLmdb(tmp / "lmdb2"));

  // Whole datasets, both backends, raw pixels and encoded images.
  {
    DatasetSeed tf;
    tf.samples = 8;
    Write("dataset", "tfrecord-rgb-4x4-three-shards", DatasetContainer(tmp / "d1", tf));
    DatasetSeed gray;
    gray.channels = 1;
    gray.sizes = {{8, 6}, {5, 7}, {6, 8}};
    gray.max_side = 8;
    gray.alignment = 1;
    gray.flags |= fuzz::kLoaderShuffle | fuzz::kUncheckedGet;
    Write("dataset", "tfrecord-gray-variable-unaligned", DatasetContainer(tmp / "d2", gray));
    DatasetSeed large;
    large.sizes = {{16, 12}, {4, 4}, {9, 16}};
    large.max_side = 16;
    large.samples = 5;
    large.per_shard = 4;
    large.alignment = 128;
    Write("dataset", "tfrecord-rgb-variable-aligned-128", DatasetContainer(tmp / "d10", large));
    DatasetSeed jpeg;
    jpeg.encoding = ImageEncoding::kJpeg;
    jpeg.sizes = {{8, 8}};
    jpeg.samples = 5;
    jpeg.flags |= fuzz::kLoaderReadAhead;
    Write("dataset", "tfrecord-jpeg-8x8", DatasetContainer(tmp / "d3", jpeg));
    DatasetSeed png;
    png.encoding = ImageEncoding::kPng;
    png.channels = 1;
    png.sizes = {{8, 6}, {6, 5}};
    png.max_side = 8;
    png.samples = 4;
    png.per_shard = 2;
    Write("dataset", "tfrecord-png-gray-variable", DatasetContainer(tmp / "d4", png));
    DatasetSeed mixed;
    mixed.encoding = ImageEncoding::kMixed;
    mixed.sizes = {{8, 8}};
    mixed.samples = 4;
    mixed.per_shard = 2;
    Write("dataset", "tfrecord-mixed-8x8", DatasetContainer(tmp / "d5", mixed));
    DatasetSeed lmdb;
    lmdb.backend = Backend::kLmdb;
    Write("dataset", "lmdb-rgb-4x4", DatasetContainer(tmp / "d6", lmdb));
    DatasetSeed overflow;
    overflow.backend = Backend::kLmdb;
    overflow.sizes = {{4, 4}, {32, 24}, {6, 5}};
    overflow.max_side = 32;
    overflow.samples = 4;
    overflow.per_shard = 2;
    overflow.flags |= fuzz::kLoaderReadAhead | fuzz::kLoaderShuffle;
    Write("dataset", "lmdb-rgb-variable-overflow-pages", DatasetContainer(tmp / "d7", overflow));
    DatasetSeed lmdb_png;
    lmdb_png.backend = Backend::kLmdb;
    lmdb_png.encoding = ImageEncoding::kPng;
    lmdb_png.sizes = {{6, 6}};
    lmdb_png.samples = 4;
    lmdb_png.per_shard = 2;
    Write("dataset", "lmdb-png-6x6", DatasetContainer(tmp / "d8", lmdb_png));
    DatasetSeed caffe;
    caffe.backend = Backend::kLmdb;
    caffe.schema = LmdbSchema::kCaffe;
    Write("dataset", "lmdb-caffe-rgb-4x4", DatasetContainer(tmp / "d9", caffe));
  }
  fs::remove_all(tmp);

  // Payloads: aligned and not, gray, long text, an Example serialized another way.
  Write("example", "aligned-rgb.pb", Payload(2, 1, 3, 0, "cat", "a.png", 12, 64));
  Write("example", "unaligned-gray.pb", Payload(3, 5, 1, 1, "dog", "", 0, 1));
  Write("example", "lmdb-aligned.pb", Payload(4, 4, 3, 7, "class", "dir/file.jpg", 16, 256));
  // Hand-built: unpacked int64s, features in another order, an unknown field and a float
  // list, as other writers (or libprotobuf's map order) produce them.
  {
    std::string f;
    auto entry = [&f](std::string_view key, const std::string& feature) {
      std::string e = "\x0a" + std::string(1, static_cast<char>(key.size())) + std::string(key) +
                      "\x12" + std::string(1, static_cast<char>(feature.size())) + feature;
      f += "\x0a" + std::string(1, static_cast<char>(e.size())) + e;
    };
    entry("image/raw", std::string("\x0a\x05\x0a\x03\x01\x02\x03", 7));
    entry("image/width", std::string("\x1a\x02\x08\x01", 4));       // unpacked
    entry("image/height", std::string("\x1a\x03\x0a\x01\x01", 5));  // packed
    entry("image/channels", std::string("\x1a\x02\x08\x03", 4));
    entry("image/class/label", std::string("\x1a\x02\x08\x00", 4));
    entry("image/extra", std::string("\x12\x05\x0a\x04\x00\x00\x80\x3f", 8));  // float list
    std::string payload = "\x0a" + std::string(1, static_cast<char>(f.size())) + f;
    payload += std::string("\x10\x2a", 2);  // unknown varint field 2 of Example
    Write("example", "other-order-unpacked.pb", payload);
  }

  // JPEG: the encoder's forms, EXIF orientations, and forms written with libjpeg here.
  for (int c : {1, 3}) {
    const std::vector<uint8_t> px = Pixels(16, 24, c, 2);
    image::JpegEncodeOptions o;
    o.quality = 80;
    Write("jpeg", c == 3 ? "baseline-420.jpg" : "gray.jpg",
          Must(image::EncodeJpeg(px.data(), 16, 24, c, o)));
    o.progressive = true;
    Write("jpeg", c == 3 ? "progressive-420.jpg" : "progressive-gray.jpg",
          Must(image::EncodeJpeg(px.data(), 16, 24, c, o)));
  }
  {
    const std::vector<uint8_t> px = Pixels(12, 20, 3, 4);
    image::JpegEncodeOptions o;
    o.subsampling = 444;
    Write("jpeg", "baseline-444-exif6.jpg",
          WithExif(Must(image::EncodeJpeg(px.data(), 12, 20, 3, o)), 6));
    o.subsampling = 422;
    Write("jpeg", "baseline-422-exif3.jpg",
          WithExif(Must(image::EncodeJpeg(px.data(), 12, 20, 3, o)), 3));
  }
  Write("jpeg", "cmyk-adobe.jpg", EncodeJpegForm(8, 16, {JCS_CMYK, JCS_CMYK, 4}));
  Write("jpeg", "ycck-adobe.jpg", EncodeJpegForm(8, 16, {JCS_CMYK, JCS_YCCK, 4}));
  Write("jpeg", "rgb-no-transform.jpg", EncodeJpegForm(8, 16, {JCS_RGB, JCS_RGB, 3}));
  Write("jpeg", "arithmetic.jpg", EncodeJpegForm(16, 16, {JCS_RGB, JCS_YCbCr, 3, true}));
  Write("jpeg", "restart-intervals.jpg", EncodeJpegForm(32, 16, {JCS_RGB, JCS_YCbCr, 3, false, 1}));
  Write("jpeg", "arithmetic-progressive.jpg",
        EncodeJpegForm(16, 16, {JCS_RGB, JCS_YCbCr, 3, true, 0, true}));

  // PNG: the encoder's forms and the rest of the colour types, depths and chunks.
  for (int c : {1, 2, 3, 4}) {
    const std::vector<uint8_t> px = Pixels(6, 7, c, c);
    const char* names[] = {"", "gray.png", "gray-alpha.png", "rgb.png", "rgba.png"};
    Write("png", names[c], Must(image::EncodePng(px.data(), 6, 7, c)));
  }
  Write("png", "palette-8-trns.png", EncodePngForm(6, 7, {PNG_COLOR_TYPE_PALETTE, 8, false, true}));
  Write("png", "palette-2-interlaced.png", EncodePngForm(9, 10, {PNG_COLOR_TYPE_PALETTE, 2, true}));
  Write("png", "gray-1.png", EncodePngForm(5, 13, {PNG_COLOR_TYPE_GRAY, 1}));
  Write("png", "gray-16-trns.png", EncodePngForm(5, 6, {PNG_COLOR_TYPE_GRAY, 16, false, true}));
  Write("png", "rgb-16-interlaced.png", EncodePngForm(9, 9, {PNG_COLOR_TYPE_RGB, 16, true}));
  Write("png", "rgba-16.png", EncodePngForm(4, 5, {PNG_COLOR_TYPE_RGB_ALPHA, 16}));
  Write("png", "rgb-exif8-ztxt.png",
        EncodePngForm(5, 8, {PNG_COLOR_TYPE_RGB, 8, false, false, 8, true}));
  Write("png", "gray-alpha-exif5.png",
        EncodePngForm(4, 6, {PNG_COLOR_TYPE_GRAY_ALPHA, 8, false, false, 5}));
  std::cout << "seeds written under " << g_out << "\n";
  return 0;
}
