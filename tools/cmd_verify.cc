#include <nlohmann/json.hpp>

#include <cstdio>
#include <memory>

#include "remote/shard_cache.h"
#include "shardpack/remote.h"
#include "shardpack/verify.h"
#include "tools/commands.h"
#include "tools/output.h"

namespace shardpack::cli {

std::function<int()> AddVerify(CLI::App& app) {
  struct Args {
    std::string dir;
    int threads = 0;
    bool json = false, tfrecord = false, no_decode = false, decode = false;
    std::string cache_dir, cache_bytes, min_rate;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "verify", "Prove a dataset intact, or name each fault by file, record and byte offset");
  cmd->add_option("DST", args->dir,
                  "Dataset directory (holding manifest.json) or http(s):// URL of one; with "
                  "--tfrecord, TFRecord files: a file, a directory or a quoted glob pattern")
      ->required();
  cmd->add_flag("--tfrecord", args->tfrecord,
                "Check TFRecord files without a manifest (TensorFlow's image/encoded or "
                "shardpack's image/raw Examples): framing, checksums, Example schema, and "
                "that every encoded image decodes");
  cmd->add_flag("--no-decode", args->no_decode,
                "With --tfrecord: do not decode image/encoded images");
  cmd->add_flag("--decode", args->decode,
                "A dataset of encoded images: also decode every image and check its size");
  cmd->add_option("--threads", args->threads, "Threads checking shards (default: all cores)")
      ->check(Integer<int>(0, kMaxThreads));
  cmd->add_flag("--json", args->json, "Print a machine-readable report on stdout");
  cmd->add_option("--cache-dir", args->cache_dir,
                  "URL datasets: the local cache (default: $SHARDPACK_CACHE_DIR, else "
                  "$XDG_CACHE_HOME/shardpack or ~/.cache/shardpack)");
  cmd->add_option("--cache-bytes", args->cache_bytes,
                  "URL datasets: the most the cache may hold, e.g. 200G (default: "
                  "$SHARDPACK_CACHE_BYTES, else 64G)");
  AddMinRate(cmd, &args->min_rate);
  return [args] {
    VerifyOptions options;
    if (!ParseMinRate("verify", args->min_rate, &options.remote)) return kExitUsage;
    options.num_threads = args->threads;
    options.decode_images = !args->no_decode;
    options.decode_encoded = args->decode;
    if (args->decode && args->tfrecord) {
      Print(stderr,
            "shardpack verify: --decode is for datasets; --tfrecord decodes unless "
            "--no-decode\n");
      return kExitUsage;
    }
    if (args->no_decode && !args->tfrecord) {
      Print(stderr, "shardpack verify: --no-decode applies to --tfrecord only\n");
      return kExitUsage;
    }
    options.remote.cache_dir = args->cache_dir;
    if (!args->cache_bytes.empty()) {
      auto bytes = remote::ParseByteSize(args->cache_bytes);
      if (!bytes.ok()) {
        Print(stderr, "shardpack verify: --cache-bytes: %s\n", bytes.status().message());
        return kExitUsage;
      }
      options.remote.cache_bytes = *bytes;
    }
    auto report = args->tfrecord ? VerifyTfrecordFiles(args->dir, options)
                                 : VerifyDataset(args->dir, options);
    if (!report.ok()) {
      // Only for a directory that is no conversion of ours, finished or not.
      const bool no_manifest =
          !args->tfrecord && report.status().code() == StatusCode::kNotFound &&
          report.status().message().find("is not a shardpack dataset") != std::string::npos;
      Print(stderr, "shardpack verify: %s%s\n", report.status().message(),
            no_manifest ? " (TFRecord files without a manifest: shardpack verify "
                          "--tfrecord PATH)"
                        : "");
      return kExitUsage;
    }
    const VerifyReport& r = *report;
    if (args->json) {
      nlohmann::ordered_json j;
      j["dataset"] = args->dir;
      j["ok"] = r.ok();
      j["files"] = r.files;
      j["records"] = r.records;
      j["bytes"] = r.bytes;
      j["seconds"] = r.seconds;
      j["fault_count"] = r.fault_count;
      nlohmann::ordered_json faults = nlohmann::ordered_json::array();
      for (const VerifyFault& f : r.faults) {
        faults.push_back(
            {{"file", f.file}, {"record", f.record}, {"offset", f.offset}, {"message", f.message}});
      }
      j["faults"] = faults;
      PrintJson(j);
    } else {
      // A remote dataset's faults name the file's URL, a local one's its name.
      const std::string prefix = IsRemotePath(args->dir) && !args->tfrecord
                                     ? args->dir + (args->dir.back() == '/' ? "" : "/")
                                     : "";
      for (const VerifyFault& f : r.faults) {
        Print(stderr, "shardpack verify: %s%s\n", prefix, FormatFault(f));
      }
      double gbps = r.seconds > 0 ? static_cast<double>(r.bytes) / r.seconds / 1e9 : 0;
      Print(stdout, "%s: %s: %llu files, %llu records, %.3f GB in %.2f s (%.2f GB/s), %llu %s\n",
            args->dir, r.ok() ? "OK" : "FAULTS", static_cast<unsigned long long>(r.files),
            static_cast<unsigned long long>(r.records), static_cast<double>(r.bytes) / 1e9,
            r.seconds, gbps, static_cast<unsigned long long>(r.fault_count),
            r.fault_count == 1 ? "fault" : "faults");
    }
    return r.ok() ? kExitOk : kExitFaults;
  };
}

}  // namespace shardpack::cli
