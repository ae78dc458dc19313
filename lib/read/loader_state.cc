// LoaderState's text form (loader.h, "Resumption") and the digest of a dataset's shard
// layout it carries; LoaderStats' summary line.
#include <algorithm>
#include <array>
#include <charconv>
#include <cstdio>
#include <limits>
#include <sstream>
#include <vector>

#include "shardpack/loader.h"
#include "util/coding.h"
#include "util/hash.h"

namespace shardpack {
namespace {

// The items of each state version, in the order ToString writes them.
constexpr std::array<std::string_view, 8> kStateItemsV1 = {
    "epoch", "next_batch", "seed", "num_samples", "rank", "world_size", "batch_size", "shuffle"};
constexpr std::array<std::string_view, 12> kStateItemsV2 = {
    "epoch",      "next_batch", "seed", "num_samples", "rank",         "world_size",
    "batch_size", "shuffle",    "tail", "block_size",  "block_window", "shard_layout"};

Status BadState(const std::string& what) { return InvalidArgumentError("loader state: " + what); }

// A decimal number in [min, max], the whole of `value`.
StatusOr<uint64_t> StateNumber(std::string_view key, const std::string& value, uint64_t min,
                               uint64_t max) {
  uint64_t v = 0;
  const char* end = value.data() + value.size();
  auto [ptr, ec] = std::from_chars(value.data(), end, v);
  if (value.empty() || ec != std::errc() || ptr != end) {
    return BadState(std::string(key) + "=" + value + ": not a decimal number in " +
                    std::to_string(min) + ".." + std::to_string(max));
  }
  if (v < min || v > max) {
    return BadState(std::string(key) + "=" + value + ": outside " + std::to_string(min) + ".." +
                    std::to_string(max));
  }
  return v;
}

StatusOr<uint64_t> StateHex(const std::string& value) {
  uint64_t v = 0;
  auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), v, 16);
  if (value.size() != 16 || ec != std::errc() || ptr != value.data() + value.size()) {
    return BadState("shard_layout=" + value + ": expected 16 hex digits");
  }
  return v;
}

// One numeric item: its range, and the field it sets.
Status SetNumber(const std::string& key, const std::string& value, LoaderState* st) {
  constexpr uint64_t kIntMax = static_cast<uint64_t>(std::numeric_limits<int>::max());
  struct Field {
    std::string_view key;
    uint64_t min;
    uint64_t max;
    uint64_t LoaderState::*wide;
    int LoaderState::*narrow;
  };
  static constexpr std::array<Field, 9> kFields = {{
      {"epoch", 0, UINT64_MAX, &LoaderState::epoch, nullptr},
      {"next_batch", 0, UINT64_MAX, &LoaderState::next_batch, nullptr},
      {"seed", 0, UINT64_MAX, &LoaderState::seed, nullptr},
      {"num_samples", 0, UINT64_MAX, &LoaderState::num_samples, nullptr},
      {"rank", 0, kIntMax, nullptr, &LoaderState::rank},
      {"world_size", 1, kIntMax, nullptr, &LoaderState::world_size},
      {"batch_size", 1, kIntMax, nullptr, &LoaderState::batch_size},
      {"block_size", 1, kIntMax, nullptr, &LoaderState::block_size},
      {"block_window", 1, kIntMax, nullptr, &LoaderState::block_window},
  }};
  for (const Field& f : kFields) {
    if (f.key != key) continue;
    SHARDPACK_ASSIGN_OR_RETURN(const uint64_t v, StateNumber(key, value, f.min, f.max));
    if (f.wide != nullptr) {
      st->*f.wide = v;
    } else {
      st->*f.narrow = static_cast<int>(v);
    }
    return Status::Ok();
  }
  return BadState("unknown item \"" + key + "\"");
}

template <typename E>
Status SetEnum(const std::string& key, const std::string& value, E* out) {
  StatusOr<E> e = ParseEnum<E>(value, key);
  if (!e.ok()) return e.status().WithPrefix("loader state");
  *out = *e;
  return Status::Ok();
}

// One key=value item of a state, known to its version.
Status SetItem(const std::string& key, const std::string& value, LoaderState* st) {
  if (key == "shuffle") return SetEnum(key, value, &st->shuffle);
  if (key == "tail") return SetEnum(key, value, &st->tail);
  if (key == "shard_layout") {
    SHARDPACK_ASSIGN_OR_RETURN(st->shard_layout, StateHex(value));
  } else {
    return SetNumber(key, value, st);
  }
  return Status::Ok();
}

}  // namespace

uint64_t ShardLayoutDigest(const Manifest& manifest) {
  std::string counts;
  for (const ShardEntry& e : manifest.shards) {
    uint8_t le[8];
    EncodeFixed64(le, e.records);
    counts.append(reinterpret_cast<const char*>(le), sizeof le);
  }
  const std::string hex = Xxh3Hex(counts.data(), counts.size());
  uint64_t digest = 0;
  std::from_chars(hex.data(), hex.data() + 16, digest, 16);
  return digest;
}

std::string LoaderState::ToString() const {
  char layout[17];
  std::snprintf(layout, sizeof layout, "%016llx", static_cast<unsigned long long>(shard_layout));
  std::ostringstream out;
  out << "shardpack-loader-state " << kVersion << " epoch=" << epoch << " next_batch=" << next_batch
      << " seed=" << seed << " num_samples=" << num_samples << " rank=" << rank
      << " world_size=" << world_size << " batch_size=" << batch_size
      << " shuffle=" << EnumName(shuffle) << " tail=" << EnumName(tail)
      << " block_size=" << block_size << " block_window=" << block_window
      << " shard_layout=" << layout;
  return out.str();
}

StatusOr<LoaderState> LoaderState::Parse(const std::string& text) {
  std::istringstream in(text);
  std::string magic;
  std::string version;
  in >> magic >> version;
  if (magic != "shardpack-loader-state" || (version != "1" && version != "2")) {
    return BadState("expected \"shardpack-loader-state 2 ...\" (or version 1), found \"" +
                    text.substr(0, 40) + "\"");
  }
  LoaderState st;
  st.version = version == "1" ? 1 : 2;
  const std::span<const std::string_view> items =
      st.version == 1 ? std::span<const std::string_view>(kStateItemsV1)
                      : std::span<const std::string_view>(kStateItemsV2);
  std::vector<bool> seen(items.size(), false);
  std::string item;
  while (in >> item) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos) return BadState("\"" + item + "\" is not key=value");
    const std::string key = item.substr(0, eq);
    const auto known = std::find(items.begin(), items.end(), key);
    if (known == items.end()) {
      return BadState("unknown item \"" + key + "\" in a version " + version + " state");
    }
    const size_t k = static_cast<size_t>(known - items.begin());
    if (seen[k]) return BadState("item \"" + key + "\" appears twice");
    seen[k] = true;
    SHARDPACK_RETURN_IF_ERROR(SetItem(key, item.substr(eq + 1), &st));
  }
  std::string missing;
  for (size_t k = 0; k < items.size(); ++k) {
    if (!seen[k]) missing += (missing.empty() ? "" : ", ") + std::string(items[k]);
  }
  if (!missing.empty()) return BadState("missing " + missing);
  if (st.rank >= st.world_size) {
    return BadState("rank " + std::to_string(st.rank) + " is not below world_size " +
                    std::to_string(st.world_size));
  }
  return st;
}

std::string LoaderStats::ToString() const {
  char buf[256];
  const double s = seconds > 0 ? seconds : 1e-9;
  std::snprintf(buf, sizeof(buf),
                "%llu batches, %.0f samples/s, %.2f GB/s, waited %.1f%% of the time (%.2f s), "
                "%.2f batches ready on average, %llu corrupt samples skipped",
                static_cast<unsigned long long>(batches), samples / s, bytes / s / 1e9,
                100.0 * wait_seconds / s, wait_seconds, mean_ready_batches,
                static_cast<unsigned long long>(skipped_corrupt));
  return buf;
}

}  // namespace shardpack
