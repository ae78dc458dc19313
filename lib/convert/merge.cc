// Merge: the parts of a partitioned conversion (convert.h, docs/SCALE.md) become one
// dataset.
//
// Crash safety: nothing in DST changes until every part has been checked (and verified).
// Then the whole outcome is written down first, atomically, in a plan
// (DST/.shardpack-merge.json: every rename, the rejects text and the manifest text); the
// renames follow, each atomic, so that every file is at its part's name or at its final
// one; then rejects.tsv and manifest.json, the commit point; then the part directories
// go, and the plan last. A merge run again after an interruption finds the plan and
// finishes it.
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "format/format.h"
#include "io/dir_lock.h"
#include "io/env.h"
#include "shardpack/convert.h"
#include "util/hash.h"
#include "util/text.h"
#include "util/thread_count.h"

namespace shardpack {
namespace {

using format::kPartsDirName;
constexpr const char* kPlanName = format::kMergePlanName;
constexpr const char* kRejectsName = "rejects.tsv";
constexpr const char* kRejectsHeader = "path\treason\n";
constexpr uint64_t kMaxPlanBytes = 1ull << 30;
constexpr uint64_t kMaxRejectsBytes = 1ull << 30;

// What a merge does, decided before it touches anything.
struct Plan {
  struct Move {
    std::string from, to;  // relative to DST
  };
  std::vector<Move> moves;
  std::vector<std::string> part_dirs;  // relative to DST, to remove at the end
  std::string rejects;                 // rejects.tsv
  std::string manifest;                // manifest.json
};

std::string PlanJson(const Plan& p) {
  nlohmann::ordered_json j;
  j["version"] = 1;
  nlohmann::ordered_json moves = nlohmann::ordered_json::array();
  for (const auto& m : p.moves) moves.push_back({{"from", m.from}, {"to", m.to}});
  j["moves"] = moves;
  j["part_dirs"] = p.part_dirs;
  j["rejects"] = p.rejects;
  j["manifest"] = p.manifest;
  return j.dump(1);
}

StatusOr<Plan> ReadPlan(const std::string& path) {
  auto text = io::Env::Posix()->ReadFile(path, kMaxPlanBytes);
  if (!text.ok()) return text.status();
  auto j = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  try {
    if (j.is_discarded() || j.at("version").get<int>() != 1) {
      return CorruptionError(path + ": not a merge plan of this version");
    }
    Plan p;
    for (const auto& m : j.at("moves")) {
      p.moves.push_back({m.at("from").get<std::string>(), m.at("to").get<std::string>()});
    }
    p.part_dirs = j.at("part_dirs").get<std::vector<std::string>>();
    p.rejects = j.at("rejects").get<std::string>();
    p.manifest = j.at("manifest").get<std::string>();
    // Names come from this file: refuse any that would leave DST.
    auto safe = [](const std::string& n) {
      return !n.empty() && n[0] != '/' && n.find("..") == std::string::npos;
    };
    for (const auto& m : p.moves) {
      if (!safe(m.from) || !safe(m.to)) return CorruptionError(path + ": unsafe file name");
    }
    for (const auto& d : p.part_dirs) {
      if (!safe(d)) return CorruptionError(path + ": unsafe directory name");
    }
    return p;
  } catch (const nlohmann::json::exception& e) {
    return CorruptionError(path + ": unreadable merge plan: " + e.what());
  }
}

// One part as found in DST/parts.
struct Part {
  int index = 0;
  std::string dir;  // relative to DST: "parts/part-00001-of-00004"
  Manifest manifest;
  nlohmann::ordered_json options;  // the manifest's options, "part" removed
  uint64_t first_input = 0, end_input = 0, total_inputs = 0;
  std::string inputs_fingerprint;
  uint64_t inputs = 0, written = 0, rejected = 0;
};

bool ParsePartName(const std::string& name, int* index, int* count) {
  int i = 0, n = 0, used = 0;
  if (name.size() != 19 || std::sscanf(name.c_str(), "part-%5d-of-%5d%n", &i, &n, &used) != 2 ||
      used != 19) {
    return false;
  }
  *index = i;
  *count = n;
  return n >= 1 && i >= 0 && i < n;
}

std::string PartName(int index, int count) {
  char name[32];
  std::snprintf(name, sizeof name, "part-%05d-of-%05d", index, count);
  return name;
}

std::string RedoHint(int index, int count) {
  return "re-run it alone: shardpack convert --part " + std::to_string(index) + "/" +
         std::to_string(count) +
         " SRC DST with the same options (--resume goes on where it "
         "stopped)";
}

// Reads and checks part `index`'s manifest and the facts Merge needs from its options.
StatusOr<Part> ReadPart(const std::string& dst, int index, int count) {
  Part p;
  p.index = index;
  p.dir = io::JoinPath(kPartsDirName, PartName(index, count));
  const std::string dir = io::JoinPath(dst, p.dir);
  const std::string label = "part " + std::to_string(index) + "/" + std::to_string(count);
  if (!io::Env::Posix()->FileExists(dir)) {
    return NotFoundError(label + " is missing (" + p.dir + "): " + RedoHint(index, count));
  }
  if (!io::Env::Posix()->FileExists(io::JoinPath(dir, format::kManifestName))) {
    return FailedPreconditionError(label + " did not finish (" + p.dir +
                                   " has no manifest.json): " + RedoHint(index, count));
  }
  auto m = ReadManifest(dir);
  if (!m.ok()) return m.status();
  p.manifest = std::move(m).value();
  auto j = nlohmann::ordered_json::parse(p.manifest.options_json, nullptr, false);
  try {
    if (j.is_discarded() || !j.contains("part")) {
      return InvalidArgumentError(p.dir + "/manifest.json: not made by a partitioned conversion");
    }
    const auto& part = j.at("part");
    if (part.at("index").get<int>() != index || part.at("count").get<int>() != count) {
      return InvalidArgumentError(
          p.dir + "/manifest.json: says part " + std::to_string(part.at("index").get<int>()) + "/" +
          std::to_string(part.at("count").get<int>()) + ", not the part its directory names");
    }
    p.first_input = part.at("first_input").get<uint64_t>();
    p.end_input = part.at("end_input").get<uint64_t>();
    p.total_inputs = part.at("total_inputs").get<uint64_t>();
    p.inputs_fingerprint = part.at("inputs_fingerprint").get<std::string>();
    p.inputs = j.at("inputs").get<uint64_t>();
    p.written = j.at("written").get<uint64_t>();
    p.rejected = j.at("rejected").get<uint64_t>();
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgumentError(p.dir + "/manifest.json: unreadable part options: " + e.what());
  }
  if (p.written != p.manifest.num_samples) {
    return CorruptionError(p.dir + "/manifest.json: options say " + std::to_string(p.written) +
                           " samples written, the manifest holds " +
                           std::to_string(p.manifest.num_samples));
  }
  j.erase("part");
  p.options = std::move(j);
  return p;
}

// The parts must be of one conversion: same inputs and options, ranges that tile them.
Status CheckParts(const std::vector<Part>& parts) {
  const Part& a = parts.front();
  const Manifest& ma = a.manifest;
  for (const Part& p : parts) {
    const Manifest& m = p.manifest;
    auto differs = [&](const std::string& what) {
      return InvalidArgumentError(p.dir + ": " + what + " differs from " + a.dir +
                                  "'s: the parts are not of one conversion (same SRC, "
                                  "inputs and options)");
    };
    if (p.inputs_fingerprint != a.inputs_fingerprint) return differs("the inputs or options");
    if (m.backend != ma.backend) return differs("the shard format");
    if (m.lmdb_schema != ma.lmdb_schema) return differs("the LMDB schema");
    if (m.image.channels != ma.image.channels || m.image.height != ma.image.height ||
        m.image.width != ma.image.width || m.image.max_side != ma.image.max_side) {
      return differs("the image spec");
    }
    if (m.pixel_alignment != ma.pixel_alignment) return differs("the pixel alignment");
    if (m.seed != ma.seed) return differs("the seed");
    if (m.tool_version != ma.tool_version) return differs("the tool version");
    if (m.format_major != ma.format_major || m.format_minor != ma.format_minor) {
      return differs("the format version");
    }
    if (m.classes.size() != ma.classes.size()) return differs("the class list");
    for (size_t c = 0; c < m.classes.size(); ++c) {
      if (m.classes[c].name != ma.classes[c].name) return differs("the class list");
    }
    if (p.total_inputs != a.total_inputs) return differs("the input count");
  }
  uint64_t expect = 0;
  for (const Part& p : parts) {
    if (p.first_input != expect || p.end_input < p.first_input) {
      return InvalidArgumentError(p.dir + ": converted inputs [" + std::to_string(p.first_input) +
                                  ", " + std::to_string(p.end_input) + "), expected to start at " +
                                  std::to_string(expect));
    }
    expect = p.end_input;
  }
  if (expect != a.total_inputs) {
    return InvalidArgumentError("the parts cover " + std::to_string(expect) + " of " +
                                std::to_string(a.total_inputs) + " inputs");
  }
  return Status::Ok();
}

// Every file a part lists is there with its size (what `verify = false` still checks).
Status CheckPartFiles(const std::string& dst, const Part& p) {
  for (const ShardEntry& e : p.manifest.shards) {
    std::vector<const FileEntry*> files{&e.data};
    if (e.index) files.push_back(&*e.index);
    for (const FileEntry* f : files) {
      const std::string rel = io::JoinPath(p.dir, f->file);
      auto size = io::Env::Posix()->FileSize(io::JoinPath(dst, rel));
      if (!size.ok()) return IOError(rel + ": " + size.status().message());
      if (*size != f->bytes) {
        return CorruptionError(rel + ": " + std::to_string(*size) + " bytes, the manifest says " +
                               std::to_string(f->bytes));
      }
    }
  }
  return Status::Ok();
}

// The outcome of the merge: the final manifest (the single-process conversion's), the
// joined rejects and the renames.
StatusOr<Plan> MakePlan(const std::string& dst, const std::vector<Part>& parts,
                        MergeSummary* summary) {
  Plan plan;
  Manifest m = parts.front().manifest;
  m.shards.clear();
  m.num_samples = 0;
  for (ClassEntry& c : m.classes) c.count = 0;
  uint64_t total_shards = 0;
  for (const Part& p : parts) total_shards += p.manifest.shards.size();
  plan.rejects = kRejectsHeader;
  for (const Part& p : parts) {
    for (size_t c = 0; c < m.classes.size(); ++c) m.classes[c].count += p.manifest.classes[c].count;
    for (const ShardEntry& e : p.manifest.shards) {
      const uint64_t g = m.shards.size();
      ShardEntry out = e;
      out.first_sample = m.num_samples;
      // The index first, so that a shard under its final name always has its index.
      if (e.index) {
        out.index->file = format::IndexFileName(g, total_shards);
        plan.moves.push_back({io::JoinPath(p.dir, e.index->file), out.index->file});
      }
      out.data.file = format::ShardFileName(g, total_shards, m.backend);
      plan.moves.push_back({io::JoinPath(p.dir, e.data.file), out.data.file});
      m.num_samples += e.records;
      m.shards.push_back(std::move(out));
    }
    summary->inputs += p.inputs;
    summary->written += p.written;
    summary->rejected += p.rejected;
    plan.part_dirs.push_back(p.dir);

    auto rejects = io::Env::Posix()->ReadFile(io::JoinPath(io::JoinPath(dst, p.dir), kRejectsName),
                                              kMaxRejectsBytes);
    if (!rejects.ok()) return rejects.status();
    if (rejects->rfind(kRejectsHeader, 0) != 0) {
      return CorruptionError(io::JoinPath(p.dir, kRejectsName) + ": does not start with \"" +
                             EscapeBytes("path\treason") + "\"");
    }
    plan.rejects += rejects->substr(std::string_view(kRejectsHeader).size());
  }
  // The options the single-process conversion records: the same, with the totals.
  nlohmann::ordered_json options = parts.front().options;
  options["inputs"] = summary->inputs;
  options["written"] = summary->written;
  options["rejected"] = summary->rejected;
  m.options_json = options.dump();
  m.rejects = FileEntry{kRejectsName, plan.rejects.size(),
                        Xxh3Hex(plan.rejects.data(), plan.rejects.size())};
  plan.manifest = SerializeManifest(m);
  summary->manifest = std::move(m);
  return plan;
}

// Removes a part directory's own files and the directory. A file that is not the
// conversion's own is left, and so is the directory: the merge still succeeds.
void RemovePartDir(const std::string& dir) {
  io::Env* env = io::Env::Posix();
  auto names = env->ListDir(dir);
  if (names.ok()) {
    for (const std::string& n : *names) {
      bool ours = n == format::kManifestName || n == kRejectsName ||
                  n == ".shardpack-convert.json" || (n.size() > 4 && n.ends_with(".tmp"));
      if (ours) env->RemoveFile(io::JoinPath(dir, n)).IgnoreError();
    }
  }
  ::rmdir(dir.c_str());
}

// Carries out `plan` in DST; every step may have been done before (see the file comment).
Status ExecutePlan(const std::string& dst, const Plan& plan) {
  io::Env* env = io::Env::Posix();
  for (const Plan::Move& mv : plan.moves) {
    const std::string from = io::JoinPath(dst, mv.from), to = io::JoinPath(dst, mv.to);
    if (env->FileExists(from)) {
      SHARDPACK_RETURN_IF_ERROR(env->RenameFile(from, to));
    } else if (!env->FileExists(to)) {
      return NotFoundError(mv.from + ": missing, and " + mv.to +
                           " is not there either: the merge cannot go on; convert the part "
                           "again");
    }
  }
  SHARDPACK_RETURN_IF_ERROR(env->SyncDir(dst));
  SHARDPACK_RETURN_IF_ERROR(
      io::WriteFileAtomically(env, io::JoinPath(dst, kRejectsName), plan.rejects));
  // The commit point.
  SHARDPACK_RETURN_IF_ERROR(
      io::WriteFileAtomically(env, io::JoinPath(dst, format::kManifestName), plan.manifest));
  // The plan goes last: while it is there, a merge run again redoes the cleanup (a DST
  // holding a manifest and parts/ but no plan is refused, as it is not a merge's doing).
  for (const std::string& d : plan.part_dirs) RemovePartDir(io::JoinPath(dst, d));
  ::rmdir(io::JoinPath(dst, kPartsDirName).c_str());  // only when empty
  SHARDPACK_RETURN_IF_ERROR(env->SyncDir(dst));
  SHARDPACK_RETURN_IF_ERROR(env->RemoveFile(io::JoinPath(dst, kPlanName)));
  return env->SyncDir(dst);
}

StatusOr<MergeSummary> SummaryOfMerged(const std::string& dst, MergeSummary summary) {
  auto m = ReadManifest(dst);
  if (!m.ok()) return m.status();
  auto j = nlohmann::json::parse(m->options_json, nullptr, false);
  if (!j.is_discarded()) {
    summary.inputs = j.value("inputs", uint64_t{0});
    summary.written = j.value("written", uint64_t{0});
    summary.rejected = j.value("rejected", uint64_t{0});
  }
  summary.manifest = std::move(m).value();
  return summary;
}

// The part directories in `parts_dir`, by index: every entry must be a part of one
// count, and every part of that count must be there.
StatusOr<std::vector<std::string>> FindParts(const std::string& parts_dir) {
  io::Env* env = io::Env::Posix();
  if (!env->FileExists(parts_dir)) {
    return NotFoundError(parts_dir + ": no parts to merge (convert --part I/N writes them)");
  }
  auto names = env->ListDir(parts_dir);
  if (!names.ok()) return names.status();
  int count = 0;
  std::map<int, std::string> found;
  for (const std::string& n : *names) {
    int i = 0, c = 0;
    if (!ParsePartName(n, &i, &c)) {
      return InvalidArgumentError(io::JoinPath(parts_dir, n) +
                                  ": not a part directory (part-IIIII-of-NNNNN)");
    }
    if (count != 0 && c != count) {
      return InvalidArgumentError(parts_dir + " holds parts of " + std::to_string(count) +
                                  " and of " + std::to_string(c) +
                                  ": remove those of the conversion that is not wanted");
    }
    count = c;
    found[i] = n;
  }
  if (count == 0) return NotFoundError(parts_dir + ": no parts to merge");
  std::string missing;
  for (int i = 0; i < count; ++i) {
    if (!found.count(i)) missing += (missing.empty() ? "" : ", ") + std::to_string(i);
  }
  if (!missing.empty()) {
    return NotFoundError("parts " + missing + " of " + std::to_string(count) + " are missing in " +
                         parts_dir + ": run them (shardpack convert --part I/" +
                         std::to_string(count) +
                         " SRC DST with the same options), then merge again");
  }
  std::vector<std::string> dirs;
  for (auto& [i, n] : found) dirs.push_back(std::move(n));
  return dirs;
}

// Every part's manifest read and the parts checked as one conversion's, with at least one
// sample among them.
StatusOr<std::vector<Part>> ReadParts(const std::string& dst, const std::string& parts_dir,
                                      int count) {
  std::vector<Part> parts;
  for (int i = 0; i < count; ++i) {
    auto p = ReadPart(dst, i, count);
    if (!p.ok()) return p.status();
    parts.push_back(std::move(p).value());
  }
  SHARDPACK_RETURN_IF_ERROR(CheckParts(parts));
  uint64_t written = 0, rejected = 0;
  for (const Part& p : parts) {
    written += p.written;
    rejected += p.rejected;
  }
  if (written == 0) {
    // As convert without parts: an empty dataset is no result, and nothing is merged.
    return CorruptionError(parts_dir + ": the " + std::to_string(count) +
                           " parts hold no sample (" + std::to_string(rejected) +
                           " inputs rejected, each part's rejects.tsv says why); nothing "
                           "was merged");
  }
  return parts;
}

// Checks every part's files: their sizes, or with options.verify the whole of each part
// (VerifyDataset), whose faults go to `summary` with the part's directory in their names.
Status CheckPartData(const std::string& dst, const std::vector<Part>& parts,
                     const MergeOptions& options, MergeSummary* summary) {
  for (const Part& p : parts) {
    if (!options.verify) {
      SHARDPACK_RETURN_IF_ERROR(CheckPartFiles(dst, p));
      continue;
    }
    VerifyOptions vo;
    vo.num_threads = options.num_threads;
    vo.on_fault = [&](const VerifyFault& f) {
      if (!options.on_fault) return;
      VerifyFault named = f;
      named.file = io::JoinPath(p.dir, f.file);
      options.on_fault(named);
    };
    auto report = VerifyDataset(io::JoinPath(dst, p.dir), vo);
    if (!report.ok()) return report.status();
    for (VerifyFault f : report->faults) {
      f.file = io::JoinPath(p.dir, f.file);
      summary->faults.push_back(std::move(f));
    }
  }
  return Status::Ok();
}

}  // namespace

std::string PartDirectory(const std::string& dst, int index, int count) {
  return io::JoinPath(io::JoinPath(dst, kPartsDirName), PartName(index, count));
}

InputRange PartitionInputs(uint64_t inputs, int index, int count, uint64_t shard_records) {
  auto cut = [&](int i) -> uint64_t {
    if (i >= count) return inputs;
    // 128-bit product: no overflow for any input count.
    uint64_t c = static_cast<uint64_t>(static_cast<unsigned __int128>(inputs) *
                                       static_cast<unsigned>(i) / static_cast<unsigned>(count));
    if (shard_records > 0) c -= c % shard_records;
    return c;
  };
  return {cut(index), cut(index + 1)};
}

StatusOr<MergeSummary> Merge(const std::string& dst, const MergeOptions& options) {
  SHARDPACK_RETURN_IF_ERROR(CheckThreadCount(options.num_threads, "num_threads"));
  const auto start = std::chrono::steady_clock::now();
  io::Env* env = io::Env::Posix();
  SHARDPACK_RETURN_IF_ERROR(io::CheckPathScheme(dst, io::PathKind::kLocal));
  MergeSummary summary;
  const std::string plan_path = io::JoinPath(dst, kPlanName);
  if (!env->FileExists(dst)) {
    return NotFoundError(dst +
                         ": no such directory: no parts to merge (convert --part I/N "
                         "writes them)");
  }
  SHARDPACK_ASSIGN_OR_RETURN(const auto lock, io::DirLock::Acquire(dst, "shardpack merge"));
  auto finish = [&](MergeSummary s) -> StatusOr<MergeSummary> {
    s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return s;
  };

  // Interrupted after its plan was written: finish that plan; nothing is decided again.
  if (env->FileExists(plan_path)) {
    auto plan = ReadPlan(plan_path);
    if (!plan.ok()) return plan.status();
    SHARDPACK_RETURN_IF_ERROR(ExecutePlan(dst, *plan));
    summary.parts = static_cast<int>(plan->part_dirs.size());
    auto merged = SummaryOfMerged(dst, std::move(summary));
    if (!merged.ok()) return merged.status();
    return finish(std::move(merged).value());
  }
  if (env->FileExists(io::JoinPath(dst, format::kManifestName))) {
    const std::string parts = io::JoinPath(dst, kPartsDirName);
    if (env->FileExists(parts)) {
      return Status(StatusCode::kAlreadyExists,
                    dst + " holds a dataset (manifest.json) and also " + parts +
                        ", which is not being merged: remove one of them");
    }
    summary.already_merged = true;
    auto merged = SummaryOfMerged(dst, std::move(summary));
    if (!merged.ok()) return merged.status();
    return finish(std::move(merged).value());
  }

  const std::string parts_dir = io::JoinPath(dst, kPartsDirName);
  SHARDPACK_ASSIGN_OR_RETURN(const std::vector<std::string> part_names, FindParts(parts_dir));
  const int count = static_cast<int>(part_names.size());
  // No part may still be converting while it is read; the locks go before the plan moves
  // the parts' files and removes their directories.
  std::vector<std::unique_ptr<io::DirLock>> part_locks;
  for (const std::string& name : part_names) {
    SHARDPACK_ASSIGN_OR_RETURN(
        auto part_lock, io::DirLock::Acquire(io::JoinPath(parts_dir, name), "shardpack merge"));
    part_locks.push_back(std::move(part_lock));
  }
  SHARDPACK_ASSIGN_OR_RETURN(const std::vector<Part> parts, ReadParts(dst, parts_dir, count));
  summary.parts = count;
  SHARDPACK_RETURN_IF_ERROR(CheckPartData(dst, parts, options, &summary));
  if (!summary.ok()) return finish(std::move(summary));
  part_locks.clear();

  auto plan = MakePlan(dst, parts, &summary);
  if (!plan.ok()) return plan.status();
  SHARDPACK_RETURN_IF_ERROR(io::WriteFileAtomically(env, plan_path, PlanJson(*plan)));
  SHARDPACK_RETURN_IF_ERROR(ExecutePlan(dst, *plan));
  return finish(std::move(summary));
}

}  // namespace shardpack
