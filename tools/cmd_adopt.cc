// adopt: TFRecord files that another tool wrote in shardpack's Example schema become a
// dataset where they are (an index per file, then manifest.json); nothing is rewritten.
#include <nlohmann/json.hpp>

#include <cstdio>
#include <memory>

#include "shardpack/convert.h"
#include "tools/commands.h"
#include "tools/output.h"

namespace shardpack::cli {

std::function<int()> AddAdopt(CLI::App& app) {
  struct Args {
    std::string src;
    bool json = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "adopt",
      "Make TFRecord files written by another tool in shardpack's Example schema (image/raw) "
      "a dataset in place: check every record, write .idx files and manifest.json");
  cmd->add_option("SRC", args->src,
                  "The files: a directory, one file, or a quoted glob pattern (one directory)")
      ->required();
  cmd->add_flag("--json", args->json, "Print the summary as JSON on stdout");
  return [args] {
    AdoptOptions options;
    options.on_fault = [](const VerifyFault& f) {
      Print(stderr, "shardpack adopt: %s\n", FormatFault(f));
    };
    auto summary = Adopt(args->src, options);
    if (!summary.ok()) {
      Print(stderr, "shardpack adopt: %s\n", summary.status().message());
      return kExitUsage;
    }
    const AdoptSummary& s = *summary;
    for (const ConvertReject& r : s.skipped) {
      Print(stderr, "shardpack adopt: %s: not adopted: %s\n", r.path, r.reason);
    }
    if (args->json) {
      nlohmann::ordered_json j;
      j["dataset"] = s.dir;
      j["ok"] = s.ok();
      j["files"] = s.files;
      j["records"] = s.records;
      j["bytes"] = s.bytes;
      j["fault_count"] = s.faults.size();
      nlohmann::ordered_json faults = nlohmann::ordered_json::array();
      for (const VerifyFault& f : s.faults) {
        faults.push_back(
            {{"file", f.file}, {"record", f.record}, {"offset", f.offset}, {"message", f.message}});
      }
      j["faults"] = faults;
      PrintJson(j);
    } else if (s.ok()) {
      Print(stdout,
            "%s: adopted %llu files, %llu records, %zu classes; wrote %zu .idx files and "
            "manifest.json\n",
            s.dir, static_cast<unsigned long long>(s.files),
            static_cast<unsigned long long>(s.records), s.manifest.classes.size(),
            s.manifest.shards.size());
    } else {
      Print(stdout, "%s: NOT adopted: %llu files, %llu records, %zu %s; nothing written\n", s.dir,
            static_cast<unsigned long long>(s.files), static_cast<unsigned long long>(s.records),
            s.faults.size(), s.faults.size() == 1 ? "fault" : "faults");
    }
    return s.ok() ? kExitOk : kExitFaults;
  };
}

}  // namespace shardpack::cli
