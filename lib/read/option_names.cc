// The names of the loader's option enums (loader.h), one table each, in enum order.
#include <array>
#include <string>
#include <string_view>

#include "shardpack/loader.h"

namespace shardpack {
namespace {

// Each table's strings are literals: EnumName hands out their data() as C strings.
constexpr std::array<std::string_view, 3> kShuffleModeNames = {"none", "global", "block"};
constexpr std::array<std::string_view, 3> kTailNames = {"partial", "drop", "pad"};
constexpr std::array<std::string_view, 4> kTransformNames = {"none", "center_crop",
                                                             "random_resized_crop", "random_crop"};
constexpr std::array<std::string_view, 2> kOnCorruptNames = {"fail", "skip"};
constexpr std::array<std::string_view, 3> kOutputTypeNames = {"uint8", "float32", "float16"};
constexpr std::array<std::string_view, 3> kIoPathNames = {"auto", "mapped", "readahead"};
constexpr std::array<std::string_view, 3> kIoQueueNames = {"auto", "uring", "pread"};
constexpr std::array<std::string_view, 3> kHugePagesNames = {"auto", "on", "off"};

}  // namespace

template <>
std::span<const std::string_view> EnumNames<ShuffleMode>() {
  return kShuffleModeNames;
}
template <>
std::span<const std::string_view> EnumNames<Tail>() {
  return kTailNames;
}
template <>
std::span<const std::string_view> EnumNames<Transform>() {
  return kTransformNames;
}
template <>
std::span<const std::string_view> EnumNames<OnCorrupt>() {
  return kOnCorruptNames;
}
template <>
std::span<const std::string_view> EnumNames<OutputType>() {
  return kOutputTypeNames;
}
template <>
std::span<const std::string_view> EnumNames<IoPath>() {
  return kIoPathNames;
}
template <>
std::span<const std::string_view> EnumNames<IoQueue>() {
  return kIoQueueNames;
}
template <>
std::span<const std::string_view> EnumNames<HugePages>() {
  return kHugePagesNames;
}

StatusOr<size_t> ParseEnumIndex(std::span<const std::string_view> names, std::string_view name,
                                std::string_view what) {
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == name) return i;
  }
  std::string expected;
  for (size_t i = 0; i < names.size(); ++i) {
    expected += i == 0 ? "" : i + 1 == names.size() ? " or " : ", ";
    expected += names[i];
  }
  return InvalidArgumentError(std::string(what) + "=" + std::string(name) + ": expected " +
                              expected);
}

}  // namespace shardpack
