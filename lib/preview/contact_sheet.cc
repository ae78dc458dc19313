#include "preview/contact_sheet.h"

#include <oneapi/tbb/parallel_for.h>

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "image/resize.h"
#include "preview/font.h"
#include "read/random.h"

namespace shardpack {

namespace {

// Per-class scans read labels this many samples at a time, in parallel; the batch is
// then taken in scan order, so the picks do not depend on the number of threads.
constexpr size_t kScanBatch = 1024;

struct Geometry {
  int thumb = 0;
  int scale = 0;  // text scale
  int tile_w = 0;
  int tile_h = 0;
  size_t max_chars = 0;  // characters of a caption line
};

Geometry MakeGeometry(int thumb) {
  Geometry g;
  g.thumb = thumb;
  g.scale = std::max(1, thumb / 128);
  g.tile_w = thumb + 2 * kSheetPad;
  g.tile_h = thumb + 3 * kSheetPad + preview::kCellHeight * g.scale;
  g.max_chars = static_cast<size_t>(thumb / (preview::kCellWidth * g.scale));
  return g;
}

Status CheckOptions(const ContactSheetOptions& o) {
  auto bad = [](std::string_view name, int64_t value, std::string_view want) {
    return InvalidArgumentError("contact sheet: " + std::string(name) + " is " +
                                std::to_string(value) + ", must be " + std::string(want));
  };
  if (o.thumb < kMinSheetThumb || o.thumb > kMaxSheetThumb) {
    return bad("thumb", o.thumb,
               std::to_string(kMinSheetThumb) + ".." + std::to_string(kMaxSheetThumb));
  }
  if (o.per_class) {
    if (o.samples_per_class < 1) return bad("samples_per_class", o.samples_per_class, ">= 1");
    if (o.max_classes < 1) return bad("max_classes", o.max_classes, ">= 1");
  } else {
    if (o.columns < 1) return bad("columns", o.columns, ">= 1");
    if (o.samples < 1) return bad("samples", 0, ">= 1");
  }
  return Status::Ok();
}

// Cells across and down, each tile_w x tile_h, checked against the limits before any
// pixel is allocated.
StatusOr<image::Image> BlankSheet(const Geometry& g, uint64_t cells_across, uint64_t cells_down) {
  const uint64_t w = cells_across * static_cast<uint64_t>(g.tile_w);
  const uint64_t h = cells_down * static_cast<uint64_t>(g.tile_h);
  if (w > kMaxImageSide || h > kMaxImageSide || w * h > kMaxSheetPixels) {
    return InvalidArgumentError(
        "contact sheet: " + std::to_string(w) + "x" + std::to_string(h) + " pixels (" +
        std::to_string(cells_across) + "x" + std::to_string(cells_down) + " cells of " +
        std::to_string(g.tile_w) + "x" + std::to_string(g.tile_h) + ") is above the limit of " +
        std::to_string(kMaxImageSide) + " a side and " + std::to_string(kMaxSheetPixels) +
        " in all: show fewer samples or smaller thumbnails");
  }
  image::Image sheet;
  sheet.width = static_cast<int>(w);
  sheet.height = static_cast<int>(h);
  sheet.channels = 3;
  sheet.pixels.resize(w * h * 3);
  for (size_t i = 0; i < sheet.pixels.size(); i += 3) {
    std::copy(kSheetBackground, kSheetBackground + 3, sheet.pixels.data() + i);
  }
  return sheet;
}

// Every index of [0, n) once, in an order that does not depend on the platform: bit-reversed
// (seed 0) or a Fisher-Yates shuffle driven by splitmix64, computed lazily so that a scan
// that stops early costs memory for the indices it visited only.
class ScanOrder {
 public:
  ScanOrder(uint64_t n, uint64_t seed) : n_(n), seed_(seed), random_(seed) {
    while (bits_ < 64 && (uint64_t{1} << bits_) < n) ++bits_;
  }

  bool Next(uint64_t* index) {
    if (visited_ == n_) return false;
    ++visited_;
    if (seed_ == 0) {
      // Positions whose reversal falls beyond n are skipped: at most one per visit.
      for (;;) {
        const uint64_t r = Reverse(pos_++);
        if (r < n_) {
          *index = r;
          return true;
        }
      }
    }
    const uint64_t j = pos_ + Uniform(n_ - pos_);
    const uint64_t at_j = At(j);
    swapped_[j] = At(pos_);
    swapped_.erase(pos_++);
    *index = at_j;
    return true;
  }

 private:
  uint64_t Reverse(uint64_t v) const {
    uint64_t r = 0;
    for (int b = 0; b < bits_; ++b) r = (r << 1) | ((v >> b) & 1);
    return r;
  }
  // Unbiased: draws below 2^64 mod bound are rejected.
  uint64_t Uniform(uint64_t bound) {
    const uint64_t threshold = (0 - bound) % bound;
    uint64_t x;
    do {
      x = random_.Next64();
    } while (x < threshold);
    return x % bound;
  }
  uint64_t At(uint64_t i) const {
    auto it = swapped_.find(i);
    return it == swapped_.end() ? i : it->second;
  }

  uint64_t n_;
  uint64_t seed_;
  read::Random random_;  // splitmix64 seeded with the seed itself
  int bits_ = 0;
  uint64_t pos_ = 0;
  uint64_t visited_ = 0;
  std::unordered_map<uint64_t, uint64_t> swapped_;
};

std::vector<uint64_t> PickGrid(uint64_t size, uint64_t n, uint64_t seed) {
  std::vector<uint64_t> picks;
  picks.reserve(n);
  if (seed == 0) {
    // floor(i * size / n) without overflow: i * (size % n) < n * n.
    for (uint64_t i = 0; i < n; ++i) picks.push_back(i * (size / n) + i * (size % n) / n);
    return picks;
  }
  ScanOrder order(size, seed);
  uint64_t index;
  while (picks.size() < n && order.Next(&index)) picks.push_back(index);
  std::sort(picks.begin(), picks.end());
  return picks;
}

// Rows of indices, one per label 0..rows-1, each filled to
// min(per_row, the class's count in the manifest) when the dataset has that many.
Status PickPerClass(const Dataset& ds, size_t rows, size_t per_row, uint64_t seed,
                    std::vector<std::vector<uint64_t>>* picks, uint64_t* scanned) {
  const Manifest& m = ds.manifest();
  picks->assign(rows, {});
  std::vector<size_t> need(rows);
  uint64_t missing = 0;
  for (size_t k = 0; k < rows; ++k) {
    need[k] = static_cast<size_t>(std::min<uint64_t>(per_row, m.classes[k].count));
    missing += need[k];
  }
  ScanOrder order(ds.size(), seed);
  std::vector<uint64_t> batch;
  std::vector<int64_t> labels(kScanBatch);
  std::vector<Status> statuses(kScanBatch);
  uint64_t index;
  while (missing > 0) {
    batch.clear();
    while (batch.size() < kScanBatch && order.Next(&index)) batch.push_back(index);
    if (batch.empty()) break;
    tbb::parallel_for(size_t{0}, batch.size(), [&](size_t i) {
      SampleView s;
      statuses[i] = ds.Get(batch[i], &s);
      labels[i] = s.label;
    });
    for (size_t i = 0; i < batch.size() && missing > 0; ++i) {
      ++*scanned;
      if (!statuses[i].ok()) return statuses[i];
      if (labels[i] < 0 || static_cast<uint64_t>(labels[i]) >= rows) continue;
      std::vector<uint64_t>& row = (*picks)[static_cast<size_t>(labels[i])];
      if (row.size() < need[static_cast<size_t>(labels[i])]) {
        row.push_back(batch[i]);
        --missing;
      }
    }
  }
  for (std::vector<uint64_t>& row : *picks) std::sort(row.begin(), row.end());
  return Status::Ok();
}

// `text` cut to `max_chars` characters, ending in ".." when it was longer.
std::string Shorten(std::string_view text, size_t max_chars) {
  if (text.size() <= max_chars) return std::string(text);
  const std::string_view dots = "..";
  if (max_chars <= dots.size()) return std::string(dots.substr(0, max_chars));
  return std::string(text.substr(0, max_chars - dots.size())) + std::string(dots);
}

std::string_view ClassText(const Manifest& m, const SampleView& s) {
  if (!s.class_text.empty()) return s.class_text;
  if (s.label >= 0 && static_cast<uint64_t>(s.label) < m.classes.size()) {
    return m.classes[static_cast<size_t>(s.label)].name;
  }
  return {};
}

// Copies `thumb` (1 or 3 channels) into the RGB sheet at (x, y); gray is replicated.
void Blit(const image::Image& thumb, int x, int y, image::Image* sheet) {
  for (int row = 0; row < thumb.height; ++row) {
    const uint8_t* src = thumb.row(row);
    uint8_t* dst = sheet->row(y + row) + static_cast<size_t>(x) * 3;
    if (thumb.channels == 3) {
      std::copy(src, src + static_cast<size_t>(thumb.width) * 3, dst);
    } else {
      for (int col = 0; col < thumb.width; ++col, dst += 3) dst[0] = dst[1] = dst[2] = src[col];
    }
  }
}

// Draws sample `index` as the tile whose top-left corner is (x, y).
Status DrawTile(const Dataset& ds, uint64_t index, const Geometry& g, int x, int y,
                image::Image* sheet) {
  SampleView s;
  SHARDPACK_RETURN_IF_ERROR(ds.Get(index, &s));
  image::Image src;
  src.height = s.height;
  src.width = s.width;
  src.channels = s.channels;
  if (s.encoding == ImageEncoding::kRaw) {
    src.pixels.assign(s.pixels.begin(), s.pixels.end());
  } else {
    src.pixels.resize(static_cast<size_t>(s.height) * s.width * s.channels);
    SHARDPACK_RETURN_IF_ERROR(ds.GetPixels(index, src.pixels, &s));
  }
  SHARDPACK_RETURN_IF_ERROR(ds.CheckIntact(index));  // the copy read the file's bytes
  auto thumb =
      image::ResizeFit(src, g.thumb, g.thumb, FitMode::kPad, ResizeFilter::kArea, kSheetBackground);
  if (!thumb.ok()) return thumb.status().WithPrefix("sample " + std::to_string(index));
  Blit(*thumb, x + kSheetPad, y + kSheetPad, sheet);
  std::string caption = std::to_string(s.label);
  std::string_view text = ClassText(ds.manifest(), s);
  if (!text.empty()) caption += " " + std::string(text);
  preview::DrawText(sheet, x + kSheetPad, y + g.thumb + 2 * kSheetPad,
                    Shorten(caption, g.max_chars), kSheetText, g.scale);
  return Status::Ok();
}

// The first cell of a per-class row: the label, the class name wrapped over as many lines
// as fit, and the class's sample count.
void DrawRowHeader(const ClassEntry& c, size_t label, const Geometry& g, int y,
                   image::Image* sheet) {
  const int line_h = preview::kCellHeight * g.scale;
  const size_t lines = static_cast<size_t>((g.tile_h - 2 * kSheetPad) / line_h);
  std::vector<std::string> text = {std::to_string(label)};
  const size_t name_lines = lines > 2 ? lines - 2 : 1;
  for (size_t at = 0; at < c.name.size(); at += g.max_chars) {
    if (text.size() == name_lines) {
      // The last line there is room for: it ends in ".." when the name goes on.
      text.push_back(Shorten(std::string_view(c.name).substr(at), g.max_chars));
      break;
    }
    text.push_back(c.name.substr(at, g.max_chars));
  }
  const std::string count = std::to_string(c.count);
  const std::string counted = count + (c.count == 1 ? " sample" : " samples");
  text.push_back(Shorten(counted.size() <= g.max_chars ? counted : count, g.max_chars));
  for (size_t i = 0; i < text.size() && i < lines; ++i) {
    preview::DrawText(sheet, kSheetPad, y + kSheetPad + static_cast<int>(i) * line_h, text[i],
                      kSheetText, g.scale);
  }
}

}  // namespace

uint64_t ContactSheetMemory(const Dataset& ds, const ContactSheetOptions& o) {
  const Geometry g = MakeGeometry(std::clamp(o.thumb, kMinSheetThumb, kMaxSheetThumb));
  uint64_t across = 0, down = 0;
  if (o.per_class) {
    across = 1 + static_cast<uint64_t>(std::max(o.samples_per_class, 0));
    down = std::min<uint64_t>(static_cast<uint64_t>(std::max(o.max_classes, 0)),
                              ds.manifest().classes.size());
  } else {
    const uint64_t n = std::min(o.samples, ds.size());
    across = std::min<uint64_t>(static_cast<uint64_t>(std::max(o.columns, 1)), n);
    down = across == 0 ? 0 : (n + across - 1) / across;
  }
  const unsigned __int128 pixels = static_cast<unsigned __int128>(across) * down *
                                   static_cast<uint64_t>(g.tile_w) *
                                   static_cast<uint64_t>(g.tile_h);
  const uint64_t sheet = pixels > kMaxSheetPixels ? kMaxSheetPixels : static_cast<uint64_t>(pixels);
  const ImageSpec& image = ds.manifest().image;
  const uint64_t side = static_cast<uint64_t>(image.max_side);
  const uint64_t sample =
      image.fixed() ? static_cast<uint64_t>(image.height) * static_cast<uint64_t>(image.width)
                    : std::min<uint64_t>(side > 0 ? side * side : kMaxImagePixels, kMaxImagePixels);
  return sheet * 3 + 2 * sample * static_cast<uint64_t>(image.channels);
}

StatusOr<image::Image> RenderContactSheet(const Dataset& ds, const ContactSheetOptions& o,
                                          ContactSheetInfo* info) {
  SHARDPACK_RETURN_IF_ERROR(CheckOptions(o));
  if (ds.size() == 0) {
    return InvalidArgumentError(ds.dir() + ": the dataset has no samples to show");
  }
  const Geometry g = MakeGeometry(o.thumb);
  ContactSheetInfo local;
  if (info == nullptr) info = &local;
  *info = {};

  if (!o.per_class) {
    const uint64_t n = std::min(o.samples, ds.size());
    const uint64_t columns = std::min<uint64_t>(static_cast<uint64_t>(o.columns), n);
    SHARDPACK_ASSIGN_OR_RETURN(image::Image sheet,
                               BlankSheet(g, columns, (n + columns - 1) / columns));
    info->indices = PickGrid(ds.size(), n, o.seed);
    for (size_t i = 0; i < info->indices.size(); ++i) {
      SHARDPACK_RETURN_IF_ERROR(DrawTile(ds, info->indices[i], g,
                                         static_cast<int>(i % columns) * g.tile_w,
                                         static_cast<int>(i / columns) * g.tile_h, &sheet));
    }
    return sheet;
  }

  const Manifest& m = ds.manifest();
  if (m.classes.empty()) {
    return InvalidArgumentError(ds.dir() + ": the manifest lists no classes to show by class");
  }
  const size_t rows = std::min(m.classes.size(), static_cast<size_t>(o.max_classes));
  const size_t per_row = static_cast<size_t>(o.samples_per_class);
  SHARDPACK_ASSIGN_OR_RETURN(image::Image sheet, BlankSheet(g, 1 + per_row, rows));
  std::vector<std::vector<uint64_t>> picks;
  SHARDPACK_RETURN_IF_ERROR(PickPerClass(ds, rows, per_row, o.seed, &picks, &info->scanned));
  for (size_t k = 0; k < rows; ++k) {
    const int y = static_cast<int>(k) * g.tile_h;
    DrawRowHeader(m.classes[k], k, g, y, &sheet);
    for (size_t j = 0; j < picks[k].size(); ++j) {
      SHARDPACK_RETURN_IF_ERROR(
          DrawTile(ds, picks[k][j], g, static_cast<int>(1 + j) * g.tile_w, y, &sheet));
      info->indices.push_back(picks[k][j]);
    }
  }
  return sheet;
}

}  // namespace shardpack
