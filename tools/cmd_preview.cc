#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "image/encoder.h"
#include "io/env.h"
#include "preview/contact_sheet.h"
#include "shardpack/dataset.h"
#include "tools/commands.h"
#include "tools/output.h"

namespace shardpack::cli {
namespace {

// The name of the dataset's file that `out` would replace (its manifest, a shard, an
// index, rejects.tsv, shardpack's own records), links resolved; "" when it is none.
std::string DatasetFileAt(const Dataset& ds, const std::string& out) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path target = fs::weakly_canonical(out, ec);
  if (ec || fs::weakly_canonical(ds.dir(), ec) != target.parent_path() || ec) return "";
  const std::string name = target.filename().string();
  if (name == "manifest.json" || name == "rejects.tsv" || name.rfind(".shardpack", 0) == 0) {
    return name;
  }
  for (const ShardEntry& e : ds.manifest().shards) {
    if (name == e.data.file || (e.index && name == e.index->file)) return name;
  }
  return "";
}

}  // namespace

std::function<int()> AddPreview(CLI::App& app) {
  struct Args {
    std::string dir, out;
    ContactSheetOptions sheet;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "preview", "Draw a contact sheet (PNG) of a dataset's samples with their labels");
  cmd->add_option("DST", a->dir, "Dataset directory (holding manifest.json)")->required();
  cmd->add_option("-o,--output", a->out, "PNG file to write (replaced atomically)")->required();
  auto* columns = cmd->add_option("--columns", a->sheet.columns, "Thumbnails per row")
                      ->check(Integer<int>(1))
                      ->capture_default_str();
  cmd->add_option("--thumb", a->sheet.thumb, "Thumbnail side in pixels (aspect kept)")
      ->check(Integer<int>(kMinSheetThumb, kMaxSheetThumb))
      ->capture_default_str();
  auto* samples = cmd->add_option("--samples", a->sheet.samples, "Samples to show")
                      ->check(Integer<uint64_t>(1))
                      ->capture_default_str();
  auto* per_class = cmd->add_flag("--per-class", a->sheet.per_class,
                                  "One row per class (the first --max-classes labels)");
  cmd->add_option("--per-class-samples", a->sheet.samples_per_class,
                  "Samples per class row with --per-class")
      ->check(Integer<int>(1))
      ->capture_default_str()
      ->needs(per_class);
  cmd->add_option("--max-classes", a->sheet.max_classes, "Class rows with --per-class")
      ->check(Integer<int>(1))
      ->capture_default_str()
      ->needs(per_class);
  cmd->add_option("--seed", a->sheet.seed,
                  "0: evenly spaced samples; other values: a random pick seeded by it")
      ->check(Integer<uint64_t>())
      ->capture_default_str();
  per_class->excludes(columns)->excludes(samples);
  return [a] {
    auto ds = Dataset::Open(a->dir);
    if (!ds.ok()) {
      Print(stderr, "shardpack preview: %s\n", ds.status().message());
      return OpenExitCode(ds.status(), a->dir);
    }
    if (std::string clash = DatasetFileAt(**ds, a->out); !clash.empty()) {
      Print(stderr,
            "shardpack preview: %s: this is the dataset's own file %s; write the "
            "preview elsewhere\n",
            a->out, clash);
      return kExitUsage;
    }
    ContactSheetInfo info;
    auto sheet = RenderContactSheet(**ds, a->sheet, &info);
    if (!sheet.ok()) {
      Print(stderr, "shardpack preview: %s\n", sheet.status().message());
      return ExitCodeOf(sheet.status());
    }
    auto png = image::EncodePng(sheet->pixels.data(), sheet->height, sheet->width, 3);
    if (!png.ok()) {
      Print(stderr, "shardpack preview: %s: %s\n", a->out, png.status().message());
      return kExitUsage;
    }
    // The message names the file (its temporary name when writing it failed).
    Status s = io::WriteFileAtomically(io::Env::Posix(), a->out, *png);
    if (!s.ok()) {
      Print(stderr, "shardpack preview: %s\n", s.message());
      return kExitUsage;
    }
    Print(stdout, "wrote %s: %zu samples, %dx%d\n", a->out, info.indices.size(), sheet->width,
          sheet->height);
    return kExitOk;
  };
}

}  // namespace shardpack::cli
