// The shardpack CLI: one file per subcommand, each thin over the library. Diagnostics go
// to stderr as "shardpack <command>: <path>[: record N at offset X]: <message>", results
// to stdout (--json for machines). Exit codes: 0 success, 1 data faults found, 2 usage or
// environment errors.
#ifndef SHARDPACK_TOOLS_COMMANDS_H_
#define SHARDPACK_TOOLS_COMMANDS_H_

#include <CLI/CLI.hpp>

#include <functional>
#include <string>

#include "shardpack/status.h"

namespace shardpack::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFaults = 1;
inline constexpr int kExitUsage = 2;

// The exit code of a failure: 1 for damaged data (a corrupt record, a truncated or shrunk
// shard), 2 for everything else (a missing dataset, a bad argument, the environment).
inline int ExitCodeOf(const Status& s) {
  return s.code() == StatusCode::kCorruption || s.code() == StatusCode::kIOError ? kExitFaults
                                                                                 : kExitUsage;
}

// A CLI11 check from one of shardpack's name parsers (ParseResizeFilter, ParseFitMode):
// an unknown name fails with the parser's message, which lists the accepted names.
template <typename Parse>
CLI::Validator NameCheck(Parse parse) {
  return CLI::Validator(
      [parse](std::string& name) {
        auto parsed = parse(name);
        return parsed.ok() ? std::string() : parsed.status().message();
      },
      "NAME");
}

// Each Add* registers a subcommand and returns the function that runs it.
std::function<int()> AddConvert(CLI::App& app);
std::function<int()> AddVerify(CLI::App& app);
std::function<int()> AddInfo(CLI::App& app);
std::function<int()> AddPreview(CLI::App& app);
std::function<int()> AddBench(CLI::App& app);
std::function<int()> AddAdopt(CLI::App& app);
std::function<int()> AddMerge(CLI::App& app);

}  // namespace shardpack::cli

#endif  // SHARDPACK_TOOLS_COMMANDS_H_
