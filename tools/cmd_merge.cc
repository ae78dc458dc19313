#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <memory>

#include "shardpack/convert.h"
#include "tools/commands.h"
#include "tools/output.h"

namespace shardpack::cli {

std::function<int()> AddMerge(CLI::App& app) {
  struct Args {
    std::string dst;
    int threads = 0;
    bool no_verify = false, json = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "merge", "Join the parts of a partitioned conversion (convert --part I/N) into one dataset");
  cmd->add_option("DST", a->dst, "The DST every part was converted into (it holds parts/)")
      ->required();
  cmd->add_option("--threads", a->threads, "Verify threads (default: all cores)")
      ->check(Integer<int>(0, kMaxThreads));
  cmd->add_flag("--no-verify", a->no_verify,
                "Check only that every part's files are there with their sizes (parts "
                "verified where they were made)");
  cmd->add_flag("--json", a->json, "Print the summary as JSON on stdout");
  return [a] {
    MergeOptions o;
    o.verify = !a->no_verify;
    o.num_threads = a->threads;
    o.on_fault = [](const VerifyFault& f) {
      Print(stderr, "shardpack merge: %s\n", FormatFault(f));
    };
    auto summary = Merge(a->dst, o);
    if (!summary.ok()) {
      Print(stderr, "shardpack merge: %s\n", summary.status().message());
      if (summary.status().code() != StatusCode::kCorruption) return kExitUsage;
      // A part whose manifest cannot be read did not finish: exit 2, as for a missing one.
      std::error_code ec;
      for (const auto& part : std::filesystem::directory_iterator(a->dst + "/parts", ec)) {
        if (HoldsUnreadableManifest(part.path().string())) return kExitUsage;
      }
      return kExitFaults;
    }
    const MergeSummary& s = *summary;
    if (a->json) {
      nlohmann::ordered_json j;
      j["dataset"] = a->dst;
      j["merged"] = s.ok();
      j["already_merged"] = s.already_merged;
      j["parts"] = s.parts;
      j["inputs"] = s.inputs;
      j["written"] = s.written;
      j["rejected"] = s.rejected;
      j["faults"] = s.faults.size();
      j["shards"] = s.manifest.shards.size();
      j["seconds"] = s.seconds;
      PrintJson(j);
    }
    if (!s.ok()) {
      Print(stderr,
            "shardpack merge: %zu faults in the parts; nothing merged. Convert the "
            "damaged parts again (--part I/N --overwrite), then merge\n",
            s.faults.size());
      return kExitFaults;
    }
    if (!a->json) {
      if (s.already_merged) {
        Print(stdout, "%s: already merged: %llu samples in %zu shards\n", a->dst,
              (unsigned long long)s.manifest.num_samples, s.manifest.shards.size());
      } else {
        Print(stdout,
              "%s: merged %d parts: %llu inputs: %llu written, %llu rejected; %zu %s "
              "shards, %.1f s\n",
              a->dst, s.parts, (unsigned long long)s.inputs, (unsigned long long)s.written,
              (unsigned long long)s.rejected, s.manifest.shards.size(),
              std::string(BackendName(s.manifest.backend)), s.seconds);
      }
    }
    return kExitOk;
  };
}

}  // namespace shardpack::cli
