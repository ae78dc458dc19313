// The shardpack CLI: one file per subcommand, each thin over the library. Diagnostics go
// to stderr as "shardpack <command>: <path>[: record N at offset X]: <message>", results
// to stdout (--json for machines), all through tools/output.h, which keeps a dataset's
// bytes from acting on the terminal. Exit codes: 0 success, 1 data faults found, 2 usage
// or environment errors, or a dataset that cannot be read at all (docs/CLI.md).
#ifndef SHARDPACK_TOOLS_COMMANDS_H_
#define SHARDPACK_TOOLS_COMMANDS_H_

#include <sys/stat.h>
#include <CLI/CLI.hpp>

#include <charconv>
#include <functional>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "remote/shard_cache.h"
#include "shardpack/loader.h"
#include "shardpack/manifest.h"
#include "shardpack/remote.h"
#include "shardpack/status.h"
#include "tools/output.h"

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

// The exit code of a failure to open the dataset at `dataset` (Dataset::Open): 2 when its
// manifest cannot be read (missing, not a regular file, damaged, of a format this build
// does not read): the dataset cannot be read at all (docs/CLI.md), as verify and info say
// too; otherwise ExitCodeOf's (1 for a damaged shard). The manifest is read again only on
// this failure path, to tell the two apart.
inline int OpenExitCode(const Status& s, const std::string& dataset,
                        const RemoteOptions& remote = {}) {
  if (ExitCodeOf(s) == kExitUsage) return kExitUsage;
  return LoadManifest(dataset, remote).ok() ? kExitFaults : kExitUsage;
}

// A CLI11 check that the argument is one of an option enum's names (EnumNames, loader.h).
template <typename E>
CLI::Validator EnumCheck() {
  std::vector<std::string> names;
  for (const std::string_view n : EnumNames<E>()) names.emplace_back(n);
  return CLI::IsMember(names);
}

// A CLI11 check of an integer option of type T, run on the argument before CLI11 converts
// it: the whole argument must be a decimal integer (no sign on unsigned types, no
// fraction, no exponent, no overflow) within [min, max]. CLI11's own conversion wraps "-1"
// into an unsigned option and truncates "2.5". CLI11 prefixes the option's name:
// "--batch-size: 2.5 is not a whole number; expected an integer from 1 to 2147483647".
template <typename T>
CLI::Validator Integer(T min = std::numeric_limits<T>::min(),
                       T max = std::numeric_limits<T>::max()) {
  std::string range =
      "expected an integer from " + std::to_string(min) + " to " + std::to_string(max);
  return CLI::Validator(
      [min, max, range](std::string& text) -> std::string {
        T value{};
        const char* end = text.data() + text.size();
        auto [ptr, ec] = std::from_chars(text.data(), end, value);
        if (std::is_unsigned_v<T> && !text.empty() && text[0] == '-') {
          return text + " is negative; " + range;
        }
        if (text.empty() || ptr != end || ec == std::errc::invalid_argument) {
          const bool fraction =
              ptr != end && ec == std::errc() && (*ptr == '.' || *ptr == 'e' || *ptr == 'E');
          return "\"" + text + "\" is not " + (fraction ? "a whole number" : "an integer") + "; " +
                 range;
        }
        if (ec == std::errc::result_out_of_range || value < min || value > max) {
          return text + " is out of range; " + range;
        }
        return std::string();
      },
      "INT", "integer");
}

// "WIDTHxHEIGHT" with each side a decimal integer in 1..max_side, nothing else ("64x64x3",
// "4294967297x1" and " 64x64" are refused).
inline bool ParseSize(const std::string& text, int max_side, int* width, int* height) {
  const size_t x = text.find('x');
  if (x == std::string::npos) return false;
  auto side = [max_side](std::string_view t, int* out) {
    auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), *out);
    return !t.empty() && ec == std::errc() && ptr == t.data() + t.size() && *out >= 1 &&
           *out <= max_side;
  };
  return side(std::string_view(text).substr(0, x), width) &&
         side(std::string_view(text).substr(x + 1), height);
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

// True when `dir` holds a manifest.json that cannot be read (damaged, not a regular file,
// of a format this build does not read). Convert and merge fail with Corruption both for
// such a manifest (of SRC, DST or a part: exit 2, a dataset that cannot be read) and for
// damaged data (exit 1); on that failure path this tells them apart.
inline bool HoldsUnreadableManifest(const std::string& dir) {
  if (IsRemotePath(dir)) return false;
  struct stat st {};
  const std::string path = dir + "/manifest.json";
  return ::lstat(path.c_str(), &st) == 0 && !ReadManifest(dir).ok();
}

// --min-rate RATE, for the commands that download a dataset: the rate that each download's
// deadline is made of (RemoteOptions::min_bytes_per_second).
inline void AddMinRate(CLI::App* cmd, std::string* rate) {
  cmd->add_option("--min-rate", *rate,
                  "URL datasets: each download must end within 60 s plus one second per this "
                  "many bytes of it, e.g. 64K (default: $SHARDPACK_MIN_RATE, else 256K)");
}

// Sets remote->min_bytes_per_second from --min-rate's `text` ("" leaves the default);
// false, after saying why on stderr, for a value that is no positive rate.
inline bool ParseMinRate(const char* command, const std::string& text, RemoteOptions* remote) {
  if (text.empty()) return true;
  auto rate = remote::ParseByteSize(text);
  if (!rate.ok() || *rate == 0) {
    Print(stderr,
          "shardpack %s: --min-rate: \"%s\" is not a rate (bytes per second above 0, or a "
          "number with K, M or G: 64K)\n",
          command, text);
    return false;
  }
  remote->min_bytes_per_second = *rate;
  return true;
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
