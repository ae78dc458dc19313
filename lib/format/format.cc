#include "format/format.h"

#include <cstdio>

namespace shardpack::format {
namespace {
std::string_view Extension(Backend b) { return b == Backend::kTfrecord ? ".tfrecord" : ".lmdb"; }
std::string Number(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%05llu", static_cast<unsigned long long>(v));
  return buf;
}
}  // namespace

std::string ShardFileName(uint64_t shard, uint64_t num_shards, Backend backend) {
  return "shard-" + Number(shard) + "-of-" + Number(num_shards) + std::string(Extension(backend));
}
std::string StagedShardFileName(uint64_t shard, Backend backend) {
  return "shard-" + Number(shard) + std::string(Extension(backend));
}
std::string IndexFileName(uint64_t shard, uint64_t num_shards) {
  return "shard-" + Number(shard) + "-of-" + Number(num_shards) + ".idx";
}
std::string StagedIndexFileName(uint64_t shard) { return "shard-" + Number(shard) + ".idx"; }

std::string LmdbKey(uint64_t index) {
  // "%010llu" without snprintf: the readers make a key for every lookup.
  char buf[20];
  int n = 0;
  do {
    buf[sizeof buf - 1 - n++] = static_cast<char>('0' + index % 10);
    index /= 10;
  } while (index != 0);
  while (n < static_cast<int>(kLmdbKeySize)) buf[sizeof buf - 1 - n++] = '0';
  return std::string(buf + sizeof buf - n, static_cast<size_t>(n));
}

}  // namespace shardpack::format
