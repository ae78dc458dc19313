#include <cstdio>
#include <memory>
#include <string>

#include "image/encoder.h"
#include "io/env.h"
#include "read/contact_sheet.h"
#include "shardpack/dataset.h"
#include "tools/commands.h"

namespace shardpack::cli {

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
                      ->check(CLI::PositiveNumber)
                      ->capture_default_str();
  cmd->add_option("--thumb", a->sheet.thumb, "Thumbnail side in pixels (aspect kept)")
      ->check(CLI::Range(kMinSheetThumb, kMaxSheetThumb))
      ->capture_default_str();
  auto* samples = cmd->add_option("--samples", a->sheet.samples, "Samples to show")
                      ->check(CLI::PositiveNumber)
                      ->capture_default_str();
  auto* per_class = cmd->add_flag("--per-class", a->sheet.per_class,
                                  "One row per class (the first --max-classes labels)");
  cmd->add_option("--per-class-samples", a->sheet.samples_per_class,
                  "Samples per class row with --per-class")
      ->check(CLI::PositiveNumber)
      ->capture_default_str()
      ->needs(per_class);
  cmd->add_option("--max-classes", a->sheet.max_classes, "Class rows with --per-class")
      ->check(CLI::PositiveNumber)
      ->capture_default_str()
      ->needs(per_class);
  cmd->add_option("--seed", a->sheet.seed,
                  "0: evenly spaced samples; other values: a random pick seeded by it")
      ->capture_default_str();
  per_class->excludes(columns)->excludes(samples);
  return [a] {
    auto ds = Dataset::Open(a->dir);
    if (!ds.ok()) {
      std::fprintf(stderr, "shardpack preview: %s\n", ds.status().message().c_str());
      return ExitCodeOf(ds.status());
    }
    ContactSheetInfo info;
    auto sheet = RenderContactSheet(**ds, a->sheet, &info);
    if (!sheet.ok()) {
      std::fprintf(stderr, "shardpack preview: %s\n", sheet.status().message().c_str());
      return ExitCodeOf(sheet.status());
    }
    auto png = image::EncodePng(sheet->pixels.data(), sheet->height, sheet->width, 3);
    if (!png.ok()) {
      std::fprintf(stderr, "shardpack preview: %s: %s\n", a->out.c_str(),
                   png.status().message().c_str());
      return kExitUsage;
    }
    // The message names the file (its temporary name when writing it failed).
    Status s = io::WriteFileAtomically(io::Env::Posix(), a->out, *png);
    if (!s.ok()) {
      std::fprintf(stderr, "shardpack preview: %s\n", s.message().c_str());
      return kExitUsage;
    }
    std::printf("wrote %s: %zu samples, %dx%d\n", a->out.c_str(), info.indices.size(), sheet->width,
                sheet->height);
    return kExitOk;
  };
}

}  // namespace shardpack::cli
