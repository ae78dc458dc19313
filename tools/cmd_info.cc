#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <memory>

#include "io/env.h"
#include "remote/shard_cache.h"
#include "shardpack/manifest.h"
#include "shardpack/remote.h"
#include "tools/commands.h"
#include "tools/output.h"

namespace shardpack::cli {

namespace {

std::string HumanBytes(uint64_t b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(b);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.2f %s", v, units[u]);
  return buf;
}

std::string ImageText(const ImageSpec& im, LmdbSchema schema) {
  std::string s = im.fixed()        ? std::to_string(im.height) + "x" + std::to_string(im.width)
                  : im.max_side > 0 ? "variable, max side " + std::to_string(im.max_side)
                                    : "variable";
  const bool caffe = schema == LmdbSchema::kCaffe;
  const std::string stored =
      im.encoding == ImageEncoding::kJpeg
          ? (caffe ? " (Caffe Datum: JPEG files)" : " (JPEG files, decoded to HWC uint8)")
      : im.encoding == ImageEncoding::kPng
          ? (caffe ? " (Caffe Datum: PNG files)" : " (PNG files, decoded to HWC uint8)")
      : im.encoding == ImageEncoding::kMixed
          ? " (JPEG files, raw pixels where the JPEG saved little; HWC uint8)"
      : caffe ? " (Caffe Datum: CHW uint8, BGR)"
              : " (HWC uint8)";
  return s + ", " + std::to_string(im.channels) + " channel" + (im.channels == 1 ? "" : "s") +
         stored;
}

}  // namespace

std::function<int()> AddInfo(CLI::App& app) {
  struct Args {
    std::string dir;
    bool json = false;
    int classes = 20;
    std::string min_rate;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("info", "Describe a dataset: samples, classes, shards");
  cmd->add_option("DST", args->dir,
                  "Dataset directory (holding manifest.json) or http(s):// URL of one (only "
                  "the manifest is fetched)")
      ->required();
  cmd->add_flag("--json", args->json, "Print a machine-readable description on stdout");
  cmd->add_option("--classes", args->classes, "Classes to list (default 20; 0: all)")
      ->check(Integer<int>(0));
  AddMinRate(cmd, &args->min_rate);
  return [args] {
    RemoteOptions remote;
    if (!ParseMinRate("info", args->min_rate, &remote)) return kExitUsage;
    auto manifest = LoadManifest(args->dir, remote);
    if (!manifest.ok()) {
      Print(stderr, "shardpack info: %s\n", manifest.status().message());
      return kExitUsage;
    }
    const Manifest& m = *manifest;
    // A local dataset's files are there and readable (not opened: a FIFO would block); a
    // remote one's are not fetched.
    if (!IsRemotePath(args->dir)) {
      for (const ShardEntry& e : m.shards) {
        for (const FileEntry* f : {&e.data, e.index ? &*e.index : nullptr}) {
          if (f == nullptr) continue;
          if (Status s = io::RequireRegularFile(io::JoinPath(args->dir, f->file)); !s.ok()) {
            Print(stderr, "shardpack info: %s: the dataset cannot be read\n", s.message());
            return kExitUsage;
          }
        }
      }
    }
    uint64_t bytes = 0;
    for (const ShardEntry& s : m.shards) bytes += s.data.bytes + (s.index ? s.index->bytes : 0);
    if (args->json) {
      nlohmann::ordered_json j = nlohmann::ordered_json::parse(SerializeManifest(m));
      j["total_bytes"] = bytes;
      PrintJson(j);
      return kExitOk;
    }
    Print(stdout, "dataset      %s\n", args->dir);
    Print(stdout, "format       shardpack %d.%d, written by %s\n", m.format_major, m.format_minor,
          m.tool_version);
    Print(stdout, "samples      %llu\n", static_cast<unsigned long long>(m.num_samples));
    Print(stdout, "image        %s\n", ImageText(m.image, m.lmdb_schema));
    Print(stdout, "shards       %zu %s shards, %s\n", m.shards.size(),
          std::string(BackendName(m.backend)), HumanBytes(bytes));
    Print(stdout, "seed         %llu\n", static_cast<unsigned long long>(m.seed));
    Print(stdout, "options      %s\n", m.options_json);
    Print(stdout, "classes      %zu (labels 0..%zu)\n", m.classes.size(),
          m.classes.empty() ? 0 : m.classes.size() - 1);
    size_t shown =
        args->classes == 0 ? m.classes.size() : std::min<size_t>(m.classes.size(), args->classes);
    for (size_t i = 0; i < shown; ++i) {
      Print(stdout, "  %5zu  %-32s %llu\n", i, m.classes[i].name,
            static_cast<unsigned long long>(m.classes[i].count));
    }
    if (shown < m.classes.size()) {
      Print(stdout, "  ... %zu more (--classes 0 lists all)\n", m.classes.size() - shown);
    }
    return kExitOk;
  };
}

}  // namespace shardpack::cli
