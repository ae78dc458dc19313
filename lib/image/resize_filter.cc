// The names of ResizeFilter and FitMode (shardpack/resize_filter.h).
#include "shardpack/resize_filter.h"

#include <array>
#include <cstddef>
#include <string>

namespace shardpack {
namespace {

constexpr std::array<std::string_view, 4> kFilterNames = {"area", "bilinear", "bicubic",
                                                          "lanczos3"};
constexpr std::array<std::string_view, 3> kFitNames = {"stretch", "crop", "pad"};

// "a", "b" or "c".
std::string Alternatives(std::span<const std::string_view> names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += i + 1 == names.size() ? " or " : ", ";
    out += '"';
    out += names[i];
    out += '"';
  }
  return out;
}

}  // namespace

std::span<const std::string_view> ResizeFilterNames() { return kFilterNames; }
std::span<const std::string_view> FitModeNames() { return kFitNames; }

const char* ResizeFilterName(ResizeFilter filter) {
  const auto i = static_cast<size_t>(filter);
  return i < kFilterNames.size() ? kFilterNames[i].data() : "?";
}

const char* FitModeName(FitMode fit) {
  const auto i = static_cast<size_t>(fit);
  return i < kFitNames.size() ? kFitNames[i].data() : "?";
}

StatusOr<ResizeFilter> ParseResizeFilter(std::string_view name) {
  if (name == "lanczos") return ResizeFilter::kLanczos3;
  for (size_t i = 0; i < kFilterNames.size(); ++i) {
    if (name == kFilterNames[i]) return static_cast<ResizeFilter>(i);
  }
  return InvalidArgumentError("unknown resize filter \"" + std::string(name) + "\": expected " +
                              Alternatives(kFilterNames));
}

StatusOr<FitMode> ParseFitMode(std::string_view name) {
  for (size_t i = 0; i < kFitNames.size(); ++i) {
    if (name == kFitNames[i]) return static_cast<FitMode>(i);
  }
  return InvalidArgumentError("unknown fit mode \"" + std::string(name) + "\": expected " +
                              Alternatives(kFitNames));
}

Status CheckResizeFilter(ResizeFilter filter, std::string_view what) {
  const auto i = static_cast<size_t>(filter);
  if (i < kFilterNames.size()) return Status::Ok();
  return InvalidArgumentError(std::string(what) + " is not a resize filter (value " +
                              std::to_string(static_cast<int>(filter)) + "): expected " +
                              Alternatives(kFilterNames));
}

Status CheckFitMode(FitMode fit, std::string_view what) {
  const auto i = static_cast<size_t>(fit);
  if (i < kFitNames.size()) return Status::Ok();
  return InvalidArgumentError(std::string(what) + " is not a fit mode (value " +
                              std::to_string(static_cast<int>(fit)) + "): expected " +
                              Alternatives(kFitNames));
}

}  // namespace shardpack
