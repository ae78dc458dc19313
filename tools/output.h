// Everything the CLI prints for people, results on stdout and diagnostics on stderr, goes
// through Print: each string argument (a path, a class name, a file name, a Status message
// quoting a dataset's bytes) is shown through TerminalText (util/text.h), so that nothing
// a dataset or a file name holds reaches the terminal as a control (ESC, OSC, CSI, C1,
// CR, backspace, bidirectional overrides, invalid UTF-8): the escape happens here, once,
// not where each message is built. The format string is the CLI's own and keeps its
// newlines and tabs; numbers print as printf prints them. --json documents go through
// PrintJson, which writes nothing but printable ASCII.
//
//   Print(stderr, "shardpack verify: %s\n", status.message());
//   Print(stdout, "  %5zu  %-32s %llu\n", i, name, count);
//
// The format is checked against the arguments at compile time, as the compiler checks
// printf's: a conversion without an argument of its kind (%s for a string, %d/%i/%u/%x
// for an integer of that size, %f/%e/%g for a floating-point number, %c, %%) does not
// compile. Width and precision are digits (no '*').
#ifndef SHARDPACK_TOOLS_OUTPUT_H_
#define SHARDPACK_TOOLS_OUTPUT_H_

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdio>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>

#include "util/text.h"

namespace shardpack::cli {
namespace output_internal {

template <typename T>
inline constexpr bool kIsText = std::is_convertible_v<const T&, std::string_view>;

// What a conversion takes: a string, an integer of a size, a floating-point number.
enum class Kind { kText, kInteger, kFloat, kNone };
struct Expected {
  Kind kind = Kind::kNone;
  size_t size = 0;  // kInteger: bytes, after the default promotions
};

template <typename T>
consteval Expected KindOf() {
  using U = std::remove_cvref_t<T>;
  if constexpr (kIsText<T>) {
    return {Kind::kText, 0};
  } else if constexpr (std::is_integral_v<U> || std::is_enum_v<U>) {
    return {Kind::kInteger, sizeof(U) < sizeof(int) ? sizeof(int) : sizeof(U)};
  } else if constexpr (std::is_floating_point_v<U>) {
    return {Kind::kFloat, sizeof(U) == sizeof(long double) ? sizeof(long double) : sizeof(double)};
  } else {
    return {Kind::kNone, 0};
  }
}

// Not constexpr: calling it from the checker is the compile error, and its name says why.
void format_and_arguments_disagree();

consteval bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// Walks `format` as printf does and compares each conversion with the next argument.
template <size_t N>
consteval void CheckFormat(std::string_view format, const Expected (&args)[N], size_t count) {
  size_t next = 0;
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%') continue;
    if (++i >= format.size()) format_and_arguments_disagree();
    if (format[i] == '%') continue;
    while (i < format.size() && (format[i] == '-' || format[i] == '+' || format[i] == ' ' ||
                                 format[i] == '#' || format[i] == '0')) {
      ++i;
    }
    while (i < format.size() && IsDigit(format[i])) ++i;
    if (i < format.size() && format[i] == '.') {
      ++i;
      while (i < format.size() && IsDigit(format[i])) ++i;
    }
    size_t size = sizeof(int);
    bool long_double = false;
    if (format.substr(i, 2) == "ll") {
      size = sizeof(long long);
      i += 2;
    } else if (format.substr(i, 2) == "hh") {
      i += 2;
    } else if (i < format.size() && format[i] == 'h') {
      ++i;
    } else if (i < format.size() && (format[i] == 'l' || format[i] == 'j')) {
      size = sizeof(long);
      ++i;
    } else if (i < format.size() && (format[i] == 'z' || format[i] == 't')) {
      size = sizeof(size_t);
      ++i;
    } else if (i < format.size() && format[i] == 'L') {
      long_double = true;
      ++i;
    }
    if (i >= format.size() || next >= count) format_and_arguments_disagree();
    const char c = format[i];
    const Expected& arg = args[next++];
    if (c == 's') {
      if (arg.kind != Kind::kText) format_and_arguments_disagree();
    } else if (c == 'd' || c == 'i' || c == 'u' || c == 'x' || c == 'X' || c == 'o') {
      if (arg.kind != Kind::kInteger || arg.size != size) format_and_arguments_disagree();
    } else if (c == 'c') {
      if (arg.kind != Kind::kInteger || arg.size != sizeof(int)) format_and_arguments_disagree();
    } else if (c == 'f' || c == 'F' || c == 'e' || c == 'E' || c == 'g' || c == 'G') {
      if (arg.kind != Kind::kFloat || (arg.size == sizeof(long double)) != long_double) {
        format_and_arguments_disagree();
      }
    } else {
      format_and_arguments_disagree();  // %n, %p, %*d, ...: not used by the CLI
    }
  }
  if (next != count) format_and_arguments_disagree();
}

// A format string checked against the argument types `Args` where it is written.
template <typename... Args>
class Format {
 public:
  template <size_t N>
  consteval Format(const char (&text)[N]) : text_(text) {  // NOLINT: implicit by design
    constexpr Expected kinds[sizeof...(Args) + 1] = {KindOf<Args>()..., Expected{}};
    CheckFormat(std::string_view(text, N - 1), kinds, sizeof...(Args));
  }
  const char* text() const { return text_; }

 private:
  const char* text_;
};

// A string argument as shown on a terminal; any other passes as it is.
template <typename T>
auto Shown(const T& value) {
  if constexpr (kIsText<T>) {
    return TerminalText(std::string_view(value));
  } else {
    return value;
  }
}

template <typename T>
auto PrintfArgument(const T& value) {
  if constexpr (std::is_same_v<T, std::string>) {
    return value.c_str();
  } else {
    return value;
  }
}

}  // namespace output_internal

// fprintf(out, format, args...) with every string argument shown through TerminalText.
template <typename... Args>
void Print(std::FILE* out, output_internal::Format<std::type_identity_t<Args>...> format,
           const Args&... args) {
  const auto shown = std::make_tuple(output_internal::Shown(args)...);
  std::apply(
      [&](const auto&... a) {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
#pragma GCC diagnostic ignored "-Wformat-security"
        std::fprintf(out, format.text(), output_internal::PrintfArgument(a)...);
#pragma GCC diagnostic pop
      },
      shown);
}

// A --json document on stdout, indented by 2, then a newline: printable ASCII only. Every
// control character, DEL and every non-ASCII character of its strings is written as a
// \uXXXX escape (valid JSON, read back unchanged by any parser); bytes that are not UTF-8
// (a file name, a key quoted in a message) become U+FFFD instead of failing the dump.
inline void PrintJson(const nlohmann::ordered_json& j) {
  const std::string text =
      j.dump(2, ' ', /*ensure_ascii=*/true, nlohmann::ordered_json::error_handler_t::replace);
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fputc('\n', stdout);
}

}  // namespace shardpack::cli

#endif  // SHARDPACK_TOOLS_OUTPUT_H_
