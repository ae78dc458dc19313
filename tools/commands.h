// The shardpack CLI: one file per subcommand, each thin over the library. Diagnostics go
// to stderr as "shardpack <command>: <path>[: record N at offset X]: <message>", results
// to stdout (--json for machines), all through tools/output.h, which keeps a dataset's
// bytes from acting on the terminal. Exit codes: 0 success, 1 data faults found, 2 usage
// or environment errors, or a dataset that cannot be read at all (docs/CLI.md).
#ifndef SHARDPACK_TOOLS_COMMANDS_H_
#define SHARDPACK_TOOLS_COMMANDS_H_

#include <CLI/CLI.hpp>

#include <charconv>
#include <functional>
#include <limits>
#include <string>
#include <type_traits>

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
