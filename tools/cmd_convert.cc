#include <unistd.h>

#include <nlohmann/json.hpp>

#include <cstdio>
#include <iostream>
#include <memory>

#include "shardpack/convert.h"
#include "tools/commands.h"

namespace shardpack::cli {

std::function<int()> AddConvert(CLI::App& app) {
  struct Args {
    std::string src, dst, format = "tfrecord", size, fit = "crop", filter = "lanczos",
                          background = "ffffff", list;
    int max_side = 0, channels = 3, threads = 0, max_scans = 500;
    bool keep = false, shuffle = false, no_orient = false, strict = false, json = false,
         resume = false;
    uint64_t seed = 0, shard_size = 64ull << 20, shard_records = 0, max_pixels = 89478485;
    uint64_t max_rejects = UINT64_MAX;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "convert", "Decode and resize a folder of JPEG/PNG images into shards of pixels");
  cmd->add_option("SRC", a->src,
                  "Folder of class folders (SRC/<class>/<image>), or the root "
                  "of --list paths")
      ->required();
  cmd->add_option("DST", a->dst, "Output dataset directory (must not hold a dataset)")->required();
  cmd->add_option("--format", a->format, "Shard format")
      ->check(CLI::IsMember({"tfrecord", "lmdb"}))
      ->capture_default_str();
  auto* size = cmd->add_option("--size", a->size, "Output size WIDTHxHEIGHT, e.g. 256x256");
  cmd->add_option("--fit", a->fit,
                  "With --size: stretch, crop (shorter side, centre crop) "
                  "or pad (longer side, padded with --background)")
      ->check(CLI::IsMember({"stretch", "crop", "pad"}))
      ->capture_default_str();
  auto* max_side = cmd->add_option("--max-side", a->max_side, "Longer side at most N, aspect kept")
                       ->check(CLI::PositiveNumber);
  auto* keep = cmd->add_flag("--keep", a->keep, "Keep the decoded size");
  size->excludes(max_side)->excludes(keep);
  max_side->excludes(keep);
  cmd->add_option("--filter", a->filter, "Resampling filter (antialiased)")
      ->check(CLI::IsMember({"area", "bilinear", "bicubic", "lanczos"}))
      ->capture_default_str();
  cmd->add_option("--channels", a->channels, "3 (RGB) or 1 (gray)")
      ->check(CLI::IsMember({1, 3}))
      ->capture_default_str();
  cmd->add_option("--shard-size", a->shard_size, "Shard size limit in bytes")
      ->capture_default_str();
  cmd->add_option("--shard-records", a->shard_records, "Records per shard (0: no limit)");
  cmd->add_flag("--shuffle", a->shuffle, "Shuffle the write order with --seed");
  cmd->add_option("--seed", a->seed, "Seed of --shuffle (recorded in the manifest)");
  cmd->add_option("--threads", a->threads, "Decoding threads (default: all cores)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--no-orient", a->no_orient, "Ignore EXIF orientation (recorded)");
  cmd->add_option("--background", a->background,
                  "RRGGBB hex colour under alpha and around --fit pad")
      ->capture_default_str();
  cmd->add_option("--list", a->list, "List file of \"path label\" lines relative to SRC");
  cmd->add_option("--max-pixels", a->max_pixels, "Reject images with more pixels")
      ->capture_default_str();
  cmd->add_option("--max-scans", a->max_scans, "Reject progressive JPEGs with more scans")
      ->capture_default_str();
  cmd->add_flag("--strict", a->strict, "Fail (exit 1) on the first rejected input");
  cmd->add_flag("--resume", a->resume,
                "Go on with an interrupted conversion into DST (same SRC and options); the "
                "result is byte-identical to an uninterrupted run");
  cmd->add_option("--max-rejects", a->max_rejects, "Abort (exit 1) past N rejected inputs");
  cmd->add_flag("--json", a->json, "Print the summary as JSON on stdout");

  return [a] {
    ConvertOptions o;
    o.backend = a->format == "lmdb" ? Backend::kLmdb : Backend::kTfrecord;
    if (!a->size.empty()) {
      if (std::sscanf(a->size.c_str(), "%dx%d", &o.width, &o.height) != 2 || o.width < 1 ||
          o.height < 1) {
        std::fprintf(stderr, "shardpack convert: --size %s: expected WIDTHxHEIGHT\n",
                     a->size.c_str());
        return kExitUsage;
      }
      o.fit = a->fit == "stretch" ? FitMode::kStretch
              : a->fit == "pad"   ? FitMode::kPad
                                  : FitMode::kCrop;
    } else if (a->max_side > 0) {
      o.max_side = a->max_side;
    } else if (a->keep) {
      o.keep = true;
    } else {
      std::fprintf(stderr,
                   "shardpack convert: choose the output geometry: --size WxH, --max-side N "
                   "or --keep\n");
      return kExitUsage;
    }
    o.filter = a->filter == "area"       ? ResizeFilter::kArea
               : a->filter == "bilinear" ? ResizeFilter::kBilinear
               : a->filter == "bicubic"  ? ResizeFilter::kBicubic
                                         : ResizeFilter::kLanczos3;
    unsigned r, g, b;
    if (a->background.size() != 6 ||
        std::sscanf(a->background.c_str(), "%2x%2x%2x", &r, &g, &b) != 3) {
      std::fprintf(stderr, "shardpack convert: --background %s: expected RRGGBB\n",
                   a->background.c_str());
      return kExitUsage;
    }
    o.background[0] = static_cast<uint8_t>(r);
    o.background[1] = static_cast<uint8_t>(g);
    o.background[2] = static_cast<uint8_t>(b);
    o.channels = a->channels;
    o.max_shard_bytes = a->shard_size;
    o.max_shard_records = a->shard_records;
    o.shuffle = a->shuffle;
    o.seed = a->seed;
    o.num_threads = a->threads;
    o.apply_orientation = !a->no_orient;
    o.max_pixels = a->max_pixels;
    o.max_scans = a->max_scans;
    o.strict = a->strict;
    o.max_rejects = a->max_rejects;
    o.list_file = a->list;
    o.resume = a->resume;
    if (::isatty(STDERR_FILENO)) {
      o.progress = [](uint64_t done, uint64_t total) {
        std::fprintf(stderr, "\rshardpack convert: %llu / %llu", (unsigned long long)done,
                     (unsigned long long)total);
        if (done == total) std::fputc('\n', stderr);
      };
    }
    auto summary = Convert(a->src, a->dst, o);
    if (!summary.ok()) {
      std::fprintf(stderr, "shardpack convert: %s\n", summary.status().message().c_str());
      StatusCode c = summary.status().code();
      return c == StatusCode::kCorruption ? kExitFaults : kExitUsage;
    }
    const ConvertSummary& s = *summary;
    if (a->resume && s.resumed_from > 0) {
      std::fprintf(stderr, "shardpack convert: resumed after %llu of %llu inputs\n",
                   (unsigned long long)s.resumed_from, (unsigned long long)s.inputs);
    }
    for (const ConvertReject& r : s.rejects) {
      std::fprintf(stderr, "shardpack convert: %s: rejected: %s\n", r.path.c_str(),
                   r.reason.c_str());
    }
    uint64_t bytes = 0;
    for (const auto& sh : s.manifest.shards) bytes += sh.data.bytes;
    if (a->json) {
      nlohmann::ordered_json j;
      j["source"] = a->src;
      j["dataset"] = a->dst;
      j["inputs"] = s.inputs;
      j["written"] = s.written;
      j["rejected"] = s.rejected;
      j["hidden_ignored"] = s.hidden_ignored;
      j["shards"] = s.manifest.shards.size();
      j["bytes"] = bytes;
      j["seconds"] = s.seconds;
      nlohmann::ordered_json rejects = nlohmann::ordered_json::array();
      for (const auto& r : s.rejects) rejects.push_back({{"path", r.path}, {"reason", r.reason}});
      j["rejects"] = rejects;
      std::cout << j.dump(2) << "\n";
    } else {
      std::printf(
          "%s: %llu inputs: %llu written, %llu rejected%s (see rejects.tsv); %zu shards, "
          "%.1f MB, %.1f s, %.0f images/s\n",
          a->dst.c_str(), (unsigned long long)s.inputs, (unsigned long long)s.written,
          (unsigned long long)s.rejected,
          s.hidden_ignored ? (", " + std::to_string(s.hidden_ignored) + " hidden ignored").c_str()
                           : "",
          s.manifest.shards.size(), bytes / 1e6, s.seconds,
          s.seconds > 0 ? s.inputs / s.seconds : 0.0);
    }
    return kExitOk;
  };
}

}  // namespace shardpack::cli
