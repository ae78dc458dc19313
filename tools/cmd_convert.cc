#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <vector>

#include "format/format.h"
#include "shardpack/convert.h"
#include "shardpack/limits.h"
#include "tools/commands.h"
#include "tools/mpi_session.h"
#include "tools/output.h"

namespace shardpack::cli {

constexpr int kMaxSide = static_cast<int>(kMaxImageSide);

// The command line of convert, as parsed.
struct ConvertArgs {
  std::string src, dst, staging,
      format = "tfrecord", size, fit = "crop", filter = "lanczos3", background = "ffffff", list,
      input = "auto", lmdb_schema = "example", part, encoding = "raw", write_method = "auto";
  int max_side = 0, channels = 3, threads = 0, max_scans = 500, quality = 90, subsampling = 420,
      png_compression = 6;
  bool keep = false, shuffle = false, no_orient = false, strict = false, json = false,
       resume = false, overwrite = false, quiet = false, mpi = false, stats = false;
  uint64_t seed = 0, shard_size = 64ull << 20, shard_records = 0, max_pixels = kMaxImagePixels;
  uint64_t max_rejects = UINT64_MAX, max_png_chunk = 8000000, max_file = 1ull << 30;
  uint64_t write_chunk = ConvertOptions{}.write_chunk_bytes;
  double mixed_ratio = 0.5;
};

namespace {

// Progress on stderr: redrawn in place on a terminal (at most ten times a second), a plain
// line every ten seconds otherwise (logs, CI).
std::function<void(const ConvertProgress&)> ProgressPrinter(bool terminal) {
  auto last = std::make_shared<double>(-1);
  return [terminal, last](const ConvertProgress& p) {
    const bool end = p.done == p.total;
    if (!end && p.seconds - *last < (terminal ? 0.1 : 10.0)) return;
    *last = p.seconds;
    const double rate = p.seconds > 0 ? p.done / p.seconds : 0;
    const double eta = rate > 0 ? (p.total - p.done) / rate : 0;
    char line[256];
    std::snprintf(line, sizeof line,
                  "%llu/%llu inputs (%.0f%%), %.0f images/s, %.1f MB/s in, %llu rejected, "
                  "ETA %.0f s",
                  (unsigned long long)p.done, (unsigned long long)p.total,
                  p.total ? 100.0 * p.done / p.total : 100.0, rate,
                  p.seconds > 0 ? p.bytes_in / p.seconds / 1e6 : 0.0,
                  (unsigned long long)p.rejected, eta);
    if (terminal) {
      // The redraw's own controls are in the format; the line holds only numbers.
      if (end) {
        Print(stderr, "\r\033[Kshardpack convert: %s\n", line);
      } else {
        Print(stderr, "\r\033[Kshardpack convert: %s", line);
      }
    } else {
      Print(stderr, "shardpack convert: %s\n", line);
    }
  };
}

// Rejects grouped by the start of their reason ("Corruption: JPEG", "NotSupported: not a
// JPEG or PNG file"), most frequent first.
std::vector<std::pair<std::string, uint64_t>> RejectsByReason(
    const std::vector<ConvertReject>& rejects) {
  std::map<std::string, uint64_t> counts;
  for (const ConvertReject& r : rejects) {
    size_t first = r.reason.find(": ");
    size_t second = first == std::string::npos ? first : r.reason.find(": ", first + 2);
    // Values (checksums, offsets) end the group: "Corruption: data checksum".
    size_t cut = std::min({second, r.reason.find(" ("), r.reason.find(" near "),
                           r.reason.find(" 0x"), r.reason.size()});
    ++counts[r.reason.substr(0, cut)];
  }
  std::vector<std::pair<std::string, uint64_t>> out(counts.begin(), counts.end());
  std::stable_sort(out.begin(), out.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  return out;
}

int RunConvert(const ConvertArgs& a, const ConvertOptions& o);
int RunMpi(const ConvertArgs& a, ConvertOptions o);

}  // namespace

std::function<int()> AddConvert(CLI::App& app) {
  auto a = std::make_shared<ConvertArgs>();
  CLI::App* cmd = app.add_subcommand(
      "convert",
      "Decode and resize a folder of JPEG/PNG images, or TFRecord files, into shards of pixels");
  cmd->add_option("SRC", a->src,
                  "Folder of class folders (SRC/<class>/<image>), the root of --list paths, "
                  "or TFRecord files: a file, a directory, a dataset, a quoted glob pattern")
      ->required();
  cmd->add_option("DST", a->dst,
                  "Output dataset directory (must not hold a dataset), or s3://BUCKET/PREFIX")
      ->required();
  cmd->add_option("--staging", a->staging,
                  "DST s3://...: convert into this local directory, then upload it (default: "
                  "under the cache directory; removed once uploaded, kept for a rerun when "
                  "the upload fails)");
  cmd->add_option("--format", a->format, "Shard format")
      ->check(CLI::IsMember({"tfrecord", "lmdb"}))
      ->capture_default_str();
  cmd->add_option("--lmdb-schema", a->lmdb_schema,
                  "LMDB values: example (tf.train.Example, read by shardpack) or caffe "
                  "(Caffe Datum, CHW BGR, \"%08d_path\" keys)")
      ->check(CLI::IsMember({"example", "caffe"}))
      ->capture_default_str();
  cmd->add_option("--input", a->input,
                  "What SRC holds: auto, folders (class folders) or tfrecord (the records of "
                  "TFRecord files, image/encoded or image/raw Examples)")
      ->check(CLI::IsMember({"auto", "folders", "tfrecord"}))
      ->capture_default_str();
  auto* size = cmd->add_option("--size", a->size, "Output size WIDTHxHEIGHT, e.g. 256x256");
  cmd->add_option("--fit", a->fit,
                  "With --size: stretch, crop (shorter side, centre crop) "
                  "or pad (longer side, padded with --background)")
      ->check(NameCheck(ParseFitMode))
      ->capture_default_str();
  auto* max_side = cmd->add_option("--max-side", a->max_side, "Longer side at most N, aspect kept")
                       ->check(Integer<int>(1, kMaxSide));
  auto* keep = cmd->add_flag("--keep", a->keep, "Keep the decoded size");
  size->excludes(max_side)->excludes(keep);
  max_side->excludes(keep);
  cmd->add_option("--filter", a->filter,
                  "Resampling filter (antialiased): area, bilinear, bicubic or lanczos3 "
                  "(also: lanczos)")
      ->check(NameCheck(ParseResizeFilter))
      ->capture_default_str();
  cmd->add_option("--channels", a->channels, "3 (RGB) or 1 (gray)")
      ->check(CLI::IsMember({1, 3}))
      ->capture_default_str();
  cmd->add_option("--encoding", a->encoding,
                  "How samples store the resized image: raw (pixels), jpeg, png, or mixed "
                  "(JPEG, raw where the JPEG saves little: --mixed-ratio) (docs/FORMAT.md 2.5)")
      ->check(NameCheck(ParseImageEncoding))
      ->capture_default_str();
  cmd->add_option("--mixed-ratio", a->mixed_ratio,
                  "--encoding mixed: an image is stored as its JPEG when that is at most this "
                  "fraction of its raw bytes, else raw")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  cmd->add_option("--quality", a->quality, "--encoding jpeg|mixed: quality, 1..100")
      ->check(Integer<int>(1, 100))
      ->capture_default_str();
  cmd->add_option("--subsampling", a->subsampling, "--encoding jpeg|mixed: chroma subsampling")
      ->check(CLI::IsMember({444, 422, 420}))
      ->capture_default_str();
  cmd->add_option("--png-compression", a->png_compression,
                  "--encoding png: zlib level, 0 (stored) to 9 (smallest); 1 is the fastest "
                  "that compresses")
      ->check(Integer<int>(0, 9))
      ->capture_default_str();
  cmd->add_option("--shard-size", a->shard_size, "Shard size limit in bytes")
      ->check(Integer<uint64_t>(1))
      ->capture_default_str();
  cmd->add_option("--shard-records", a->shard_records, "Records per shard (0: no limit)")
      ->check(Integer<uint64_t>());
  cmd->add_option("--write-chunk", a->write_chunk,
                  "TFRecord, written by pwrite (--write-method): write each shard in aligned "
                  "chunks of this many bytes, a multiple of 4096 (2097152: 2 MiB folios in the "
                  "page cache, a faster first epoch from it; 0: record by record, less memory)")
      ->check(Integer<uint64_t>(0, uint64_t{1} << 30))
      ->capture_default_str();
  cmd->add_option("--write-method", a->write_method,
                  "TFRecord: how shards are written, the same bytes every way: map (copies into "
                  "a mapping of the file, which threads do side by side), write (pwrite, one at "
                  "a time per file), auto (map on ext4 and xfs where the host does not take free "
                  "memory back, write elsewhere)")
      ->check(CLI::IsMember({"auto", "write", "map"}))
      ->capture_default_str();
  cmd->add_flag("--shuffle", a->shuffle, "Shuffle the write order with --seed");
  cmd->add_option("--seed", a->seed, "Seed of --shuffle (recorded in the manifest)")
      ->check(Integer<uint64_t>());
  cmd->add_option("--threads", a->threads, "Decoding threads (default: all cores)")
      ->check(Integer<int>(0, kMaxThreads));
  cmd->add_flag("--no-orient", a->no_orient, "Ignore EXIF orientation (recorded)");
  cmd->add_option("--background", a->background,
                  "RRGGBB hex colour under alpha and around --fit pad")
      ->capture_default_str();
  cmd->add_option("--list", a->list, "List file of \"path label\" lines relative to SRC");
  cmd->add_option("--max-pixels", a->max_pixels, "Reject images with more pixels")
      ->check(Integer<uint64_t>(1, kMaxImagePixels))
      ->capture_default_str();
  cmd->add_option("--max-scans", a->max_scans, "Reject progressive JPEGs with more scans")
      ->check(Integer<int>(1))
      ->capture_default_str();
  cmd->add_option("--max-png-chunk", a->max_png_chunk,
                  "Reject PNGs whose kept ancillary chunks are larger (bytes)")
      ->check(Integer<uint64_t>())
      ->capture_default_str();
  cmd->add_option("--max-file-size", a->max_file, "Reject input files larger than this (bytes)")
      ->check(Integer<uint64_t>(1))
      ->capture_default_str();
  cmd->add_flag("--strict", a->strict, "Fail (exit 1) on the first rejected input");
  cmd->add_flag("--resume", a->resume,
                "Go on with an interrupted conversion into DST (same SRC and options); the "
                "result is byte-identical to an uninterrupted run");
  cmd->add_option("--max-rejects", a->max_rejects, "Abort (exit 1) past N rejected inputs")
      ->check(Integer<uint64_t>());
  cmd->add_flag("--overwrite", a->overwrite, "Replace a dataset DST already holds");
  cmd->add_flag("--quiet", a->quiet,
                "No progress and no per-reject lines (errors and the "
                "summary still print)");
  cmd->add_flag("--json", a->json, "Print the summary as JSON on stdout");
  cmd->add_flag("--stats", a->stats,
                "Also print where the time went: each stage's seconds (in --json: \"stages\")");
  auto* part = cmd->add_option("--part", a->part,
                               "Convert part I of N (0-based, e.g. 3/16) into DST/parts/, as one "
                               "task of a job array; join the parts with shardpack merge DST");
  cmd->add_flag("--mpi", a->mpi,
                "Run as the ranks of an MPI job (mpirun/srun): rank I converts part I of N, "
                "verifies it, and rank 0 merges once all parts are done")
      ->excludes(part);

  return [a] {
    ConvertOptions o;
    o.backend = a->format == "lmdb" ? Backend::kLmdb : Backend::kTfrecord;
    if (a->lmdb_schema == "caffe") {
      if (o.backend != Backend::kLmdb) {
        Print(stderr, "shardpack convert: --lmdb-schema caffe needs --format lmdb\n");
        return kExitUsage;
      }
      o.lmdb_schema = LmdbSchema::kCaffe;
    }
    o.input_format = a->input == "tfrecord"  ? InputFormat::kTfrecord
                     : a->input == "folders" ? InputFormat::kFolders
                                             : InputFormat::kAuto;
    if (!a->size.empty()) {
      if (!ParseSize(a->size, kMaxSide, &o.width, &o.height)) {
        Print(stderr,
              "shardpack convert: --size %s: expected WIDTHxHEIGHT, two integers "
              "from 1 to %d joined by 'x' (e.g. 256x256)\n",
              a->size, kMaxSide);
        return kExitUsage;
      }
      o.fit = *ParseFitMode(a->fit);  // checked by NameCheck
    } else if (a->max_side > 0) {
      o.max_side = a->max_side;
    } else if (a->keep) {
      o.keep = true;
    } else {
      Print(stderr,
            "shardpack convert: choose the output geometry: --size WxH, --max-side N "
            "or --keep\n");
      return kExitUsage;
    }
    o.filter = *ParseResizeFilter(a->filter);  // checked by NameCheck
    unsigned r, g, b;
    if (a->background.size() != 6 ||
        a->background.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos ||
        std::sscanf(a->background.c_str(), "%2x%2x%2x", &r, &g, &b) != 3) {
      Print(stderr,
            "shardpack convert: --background %s: expected RRGGBB, six hexadecimal "
            "digits (e.g. ffffff)\n",
            a->background);
      return kExitUsage;
    }
    o.background[0] = static_cast<uint8_t>(r);
    o.background[1] = static_cast<uint8_t>(g);
    o.background[2] = static_cast<uint8_t>(b);
    o.channels = a->channels;
    o.encoding = *ParseImageEncoding(a->encoding);  // checked by NameCheck
    o.jpeg_quality = a->quality;
    o.jpeg_subsampling = a->subsampling;
    o.png_compression = a->png_compression;
    o.mixed_max_ratio = a->mixed_ratio;
    o.max_shard_bytes = a->shard_size;
    o.write_chunk_bytes = a->write_chunk;
    o.write_method = a->write_method == "map"     ? WriteMethod::kMap
                     : a->write_method == "write" ? WriteMethod::kWrite
                                                  : WriteMethod::kAuto;
    o.max_shard_records = a->shard_records;
    o.shuffle = a->shuffle;
    o.seed = a->seed;
    o.num_threads = a->threads;
    o.apply_orientation = !a->no_orient;
    o.max_pixels = a->max_pixels;
    o.max_scans = a->max_scans;
    o.max_png_chunk_bytes = a->max_png_chunk;
    o.max_file_bytes = a->max_file;
    o.strict = a->strict;
    o.max_rejects = a->max_rejects;
    o.list_file = a->list;
    o.resume = a->resume;
    o.overwrite = a->overwrite;
    o.staging = a->staging;
    if (!a->quiet) o.progress = ProgressPrinter(::isatty(STDERR_FILENO) != 0);
    if (a->mpi) return RunMpi(*a, o);
    if (!a->part.empty()) {
      const size_t slash = a->part.find('/');
      auto number = [](std::string_view text, int* out) {
        auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
        return !text.empty() && ec == std::errc() && ptr == text.data() + text.size();
      };
      if (slash == std::string::npos ||
          !number(std::string_view(a->part).substr(0, slash), &o.part_index) ||
          !number(std::string_view(a->part).substr(slash + 1), &o.part_count) || o.part_count < 1 ||
          o.part_index < 0 || o.part_index >= o.part_count || o.part_count > kMaxParts) {
        Print(stderr, "shardpack convert: --part %s: expected I/N with 0 <= I < N <= %d\n", a->part,
              kMaxParts);
        return kExitUsage;
      }
    }
    return RunConvert(*a, o);
  };
}

namespace {

// The stages' seconds (ConvertStageSeconds) as convert --stats prints them: the pipeline's
// stages in thread-seconds, per image and as a share of the threads' time.
void PrintStages(const ConvertStageSeconds& t, uint64_t images) {
  const double capacity = t.threads * t.pipeline;
  Print(stdout, "  where the time went (%d threads; the pipeline %.2f s, %.2f thread-seconds):\n",
        t.threads, t.pipeline, capacity);
  for (const auto& [name, seconds, summed] : t.Listed()) {
    if (!summed) {
      Print(stdout, "    %-8s %8.3f s\n", name, seconds);
      continue;
    }
    Print(stdout, "    %-8s %8.3f thread-s %8.3f ms/image %5.1f%%\n", name, seconds,
          images > 0 ? seconds * 1e3 / images : 0.0, capacity > 0 ? 100 * seconds / capacity : 0.0);
  }
}

nlohmann::ordered_json StagesJson(const ConvertStageSeconds& t) {
  nlohmann::ordered_json j = {{"threads", t.threads}, {"pipeline", t.pipeline}};
  for (const auto& stage : t.Listed()) j[stage.name] = stage.seconds;
  return j;
}

// 1 for rejects past the limits and damaged inputs; 2 for the rest, and for a SRC or DST
// whose manifest cannot be read (an unreadable dataset, as every command says it).
int ConvertExitCode(const Status& s, const ConvertArgs& a) {
  if (s.code() != StatusCode::kCorruption) return kExitUsage;
  return HoldsUnreadableManifest(a.src) || HoldsUnreadableManifest(a.dst) ? kExitUsage
                                                                          : kExitFaults;
}

int RunConvert(const ConvertArgs& args, const ConvertOptions& o) {
  const ConvertArgs* a = &args;
  // What this run wrote: DST, or this part's directory in it.
  const std::string out =
      o.part_count > 1 ? PartDirectory(a->dst, o.part_index, o.part_count) : a->dst;
  auto summary = Convert(a->src, a->dst, o);
  if (!summary.ok()) {
    Print(stderr, "shardpack convert: %s\n", summary.status().message());
    return ConvertExitCode(summary.status(), *a);
  }
  const ConvertSummary& s = *summary;
  if (s.already_complete) {
    Print(stdout, "%s: already complete (the same inputs and options): nothing to do\n", out);
    return kExitOk;
  }
  if (a->resume && s.resumed_from > 0) {
    Print(stderr, "shardpack convert: resumed after %llu of %llu inputs\n",
          (unsigned long long)s.resumed_from, (unsigned long long)s.inputs);
  }
  if (!a->quiet) {
    for (const ConvertReject& r : s.rejects) {
      Print(stderr, "shardpack convert: %s: rejected: %s\n", r.path, r.reason);
    }
  }
  uint64_t bytes = 0;
  for (const auto& sh : s.manifest.shards) bytes += sh.data.bytes;
  if (a->json) {
    nlohmann::ordered_json j;
    j["source"] = a->src;
    j["dataset"] = out;
    j["inputs"] = s.inputs;
    j["written"] = s.written;
    j["rejected"] = s.rejected;
    j["hidden_ignored"] = s.hidden_ignored;
    j["shards"] = s.manifest.shards.size();
    j["bytes"] = bytes;
    j["seconds"] = s.seconds;
    j["stages"] = StagesJson(s.stages);
    j["write_method"] = s.write_method;
    if (!s.staging.empty()) {
      j["uploaded"] = {{"files", s.uploaded_files},
                       {"bytes", s.uploaded_bytes},
                       {"deleted_replaced", s.deleted_objects}};
    }
    nlohmann::ordered_json rejects = nlohmann::ordered_json::array();
    for (const auto& r : s.rejects) rejects.push_back({{"path", r.path}, {"reason", r.reason}});
    j["rejects"] = rejects;
    PrintJson(j);
  } else {
    const uint64_t done_now = s.inputs - s.resumed_from;
    Print(stdout, "%s: %llu inputs: %llu written, %llu rejected%s; %zu classes, %zu %s shards\n",
          out, (unsigned long long)s.inputs, (unsigned long long)s.written,
          (unsigned long long)s.rejected,
          s.hidden_ignored ? (", " + std::to_string(s.hidden_ignored) + " hidden entries ignored")
                           : "",
          s.manifest.classes.size(), s.manifest.shards.size(),
          std::string(BackendName(s.manifest.backend)));
    Print(stdout, "  %.1f MB read, %.1f MB written, %.1f s, %.0f images/s%s\n", s.bytes_in / 1e6,
          bytes / 1e6, s.seconds, s.seconds > 0 ? done_now / s.seconds : 0.0,
          s.resumed_from > 0 ? " (this run, after resuming)" : "");
    if (!s.staging.empty()) {
      Print(stdout, "  uploaded: %llu objects, %.1f MB (manifest.json last); staging %s removed\n",
            (unsigned long long)s.uploaded_files, s.uploaded_bytes / 1e6, s.staging);
      if (s.deleted_objects > 0) {
        Print(stdout,
              "  deleted: %llu objects of the replaced dataset that this one does not list\n",
              (unsigned long long)s.deleted_objects);
      }
    }
    if (a->stats) {
      PrintStages(s.stages, done_now);
      if (!s.write_method.empty()) {
        Print(stdout, "  shards written by: %s (--write-method %s)\n", s.write_method,
              a->write_method);
      }
    }
    if (!s.rejects.empty()) {
      Print(stdout, "  rejected, by reason (each listed in %s/rejects.tsv):\n", out);
      for (const auto& [reason, n] : RejectsByReason(s.rejects)) {
        Print(stdout, "  %8llu  %s\n", (unsigned long long)n, reason);
      }
    }
  }
  if (o.part_count > 1 && !a->mpi) {
    Print(stdout, "  part %d of %d; once all %d are done: shardpack merge %s\n", o.part_index,
          o.part_count, o.part_count, a->dst);
  }
  return kExitOk;
}

// convert --mpi: rank I of N converts part I/N and verifies it; a collective step tells
// every rank whether all parts are good; then rank 0 merges (without verifying again) and
// every rank exits with rank 0's code, so that mpirun and srun report one outcome.
int RunMpi(const ConvertArgs& a, ConvertOptions o) {
  auto mpi = MpiSession::Start();
  if (!mpi.ok()) {
    Print(stderr, "shardpack convert: --mpi: %s\n", mpi.status().message());
    return kExitUsage;
  }
  MpiSession& session = **mpi;
  const int rank = session.rank(), size = session.size();
  if (rank == 0 && o.progress != nullptr) {
    Print(stdout, "MPI: %d ranks, %s\n", size, session.library().c_str());
  }
  // Resuming a conversion that was merged already: nothing to do on any rank.
  const bool merged = ::access((a.dst + "/manifest.json").c_str(), F_OK) == 0 &&
                      ::access((a.dst + "/parts").c_str(), F_OK) != 0;
  if (a.resume && merged) {
    if (rank == 0) Print(stdout, "%s: already converted and merged\n", a.dst);
    return kExitOk;
  }
  int code = kExitOk;
  if (size > 1) {
    o.part_index = rank;
    o.part_count = size;
    if (rank != 0) o.progress = nullptr;  // one progress line: rank 0's part
    code = RunConvert(a, o);
    if (code == kExitOk) {
      // Verified where it was made, in parallel, while the files are in the page cache.
      VerifyOptions vo;
      vo.num_threads = o.num_threads;
      const std::string dir = PartDirectory(a.dst, rank, size);
      auto report = VerifyDataset(dir, vo);
      if (!report.ok()) {
        Print(stderr, "shardpack convert: %s: %s\n", dir, report.status().message());
        code = kExitUsage;
      } else if (!report->ok()) {
        for (const VerifyFault& f : report->faults) {
          Print(stderr, "shardpack convert: %s/%s\n", dir, FormatFault(f));
        }
        code = kExitFaults;
      }
    }
  } else {
    code = RunConvert(a, o);  // one rank: an ordinary conversion
    return code;
  }
  const int failed = session.CountFailed(code == kExitOk);
  if (rank == 0) {
    if (failed > 0) {
      Print(stderr,
            "shardpack convert: %d of %d parts failed (their ranks said why); nothing "
            "merged. Run again with --resume to redo only what is missing\n",
            failed, size);
      code = code == kExitOk ? kExitUsage : code;
    } else {
      MergeOptions mo;
      mo.verify = false;
      auto summary = Merge(a.dst, mo);
      if (!summary.ok()) {
        Print(stderr, "shardpack convert: merge: %s\n", summary.status().message());
        code = ExitCodeOf(summary.status());
      } else {
        Print(stdout, "%s: merged %d parts: %llu inputs: %llu written, %llu rejected; %zu shards\n",
              a.dst, summary->parts, (unsigned long long)summary->inputs,
              (unsigned long long)summary->written, (unsigned long long)summary->rejected,
              summary->manifest.shards.size());
      }
    }
  }
  return session.FromRoot(code);
}

}  // namespace

}  // namespace shardpack::cli
