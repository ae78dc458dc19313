// _shardpack.convert: shardpack::Convert with the options as a bound struct and an optional
// Python progress callback (shardpack.convert in Python builds the options from keywords).
#include <nanobind/stl/array.h>
#include <nanobind/stl/string.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <string>

#include "bindings.h"
#include "errors.h"
#include "shardpack/convert.h"

namespace nb = nanobind;

namespace shardpack::python {

namespace {

// The progress callback is called at most this often (and once at the end): each call
// takes the GIL from whatever Python thread holds it.
constexpr double kProgressInterval = 0.1;

nb::dict SummaryDict(const ConvertSummary& s) {
  nb::list rejects;
  for (const ConvertReject& r : s.rejects) rejects.append(nb::make_tuple(r.path, r.reason));
  uint64_t bytes = 0;
  for (const ShardEntry& e : s.manifest.shards) bytes += e.data.bytes;
  nb::dict d;
  d["inputs"] = s.inputs;
  d["written"] = s.written;
  d["rejected"] = s.rejected;
  d["hidden_ignored"] = s.hidden_ignored;
  d["shards"] = s.manifest.shards.size();
  d["bytes"] = bytes;
  d["bytes_in"] = s.bytes_in;
  d["seconds"] = s.seconds;
  d["resumed_from"] = s.resumed_from;
  d["already_complete"] = s.already_complete;
  d["staging"] = s.staging;
  d["uploaded_files"] = s.uploaded_files;
  d["uploaded_bytes"] = s.uploaded_bytes;
  d["deleted_objects"] = s.deleted_objects;
  // ConvertStageSeconds, as `convert --json` writes it.
  const ConvertStageSeconds& t = s.stages;
  nb::dict stages;
  stages["threads"] = t.threads;
  stages["pipeline"] = t.pipeline;
  for (const auto& stage : t.Listed()) stages[stage.name] = stage.seconds;
  d["stages"] = stages;
  d["write_method"] = s.write_method;
  d["rejects"] = rejects;
  d["manifest_json"] = SerializeManifest(s.manifest);
  return d;
}

}  // namespace

void BindConvert(nb::module_& m) {
  nb::enum_<Backend>(m, "Backend")
      .value("tfrecord", Backend::kTfrecord)
      .value("lmdb", Backend::kLmdb);
  nb::enum_<FitMode> fit(m, "FitMode");
  for (size_t i = 0; i < FitModeNames().size(); ++i) {
    fit.value(FitModeNames()[i].data(), static_cast<FitMode>(i));
  }
  m.def(
      "parse_fit_mode", [](const std::string& name) { return ValueOrRaise(ParseFitMode(name)); },
      nb::arg("name"), "shardpack::ParseFitMode: InvalidArgumentError for an unknown name.");

  nb::enum_<ImageEncoding>(m, "ImageEncoding")
      .value("raw", ImageEncoding::kRaw)
      .value("jpeg", ImageEncoding::kJpeg)
      .value("png", ImageEncoding::kPng)
      .value("mixed", ImageEncoding::kMixed);
  nb::enum_<WriteMethod>(m, "WriteMethod")
      .value("auto", WriteMethod::kAuto)
      .value("write", WriteMethod::kWrite)
      .value("map", WriteMethod::kMap);
  nb::enum_<LmdbSchema>(m, "LmdbSchema")
      .value("example", LmdbSchema::kExample)
      .value("caffe", LmdbSchema::kCaffe);
  nb::enum_<InputFormat>(m, "InputFormat")
      .value("auto", InputFormat::kAuto)
      .value("folders", InputFormat::kFolders)
      .value("tfrecord", InputFormat::kTfrecord);

  nb::class_<ConvertOptions>(m, "ConvertOptions", "shardpack::ConvertOptions (convert.h).")
      .def(nb::init<>())
      .def_rw("backend", &ConvertOptions::backend)
      .def_rw("height", &ConvertOptions::height)
      .def_rw("width", &ConvertOptions::width)
      .def_rw("fit", &ConvertOptions::fit)
      .def_rw("max_side", &ConvertOptions::max_side)
      .def_rw("keep", &ConvertOptions::keep)
      .def_rw("filter", &ConvertOptions::filter)
      .def_rw("channels", &ConvertOptions::channels)
      .def_rw("encoding", &ConvertOptions::encoding)
      .def_rw("jpeg_quality", &ConvertOptions::jpeg_quality)
      .def_rw("jpeg_subsampling", &ConvertOptions::jpeg_subsampling)
      .def_rw("png_compression", &ConvertOptions::png_compression)
      .def_rw("mixed_max_ratio", &ConvertOptions::mixed_max_ratio)
      .def_rw("max_shard_bytes", &ConvertOptions::max_shard_bytes)
      .def_rw("max_shard_records", &ConvertOptions::max_shard_records)
      .def_rw("write_chunk_bytes", &ConvertOptions::write_chunk_bytes)
      .def_rw("write_method", &ConvertOptions::write_method)
      .def_rw("shuffle", &ConvertOptions::shuffle)
      .def_rw("seed", &ConvertOptions::seed)
      .def_rw("num_threads", &ConvertOptions::num_threads)
      .def_rw("apply_orientation", &ConvertOptions::apply_orientation)
      .def_prop_rw(
          "background",
          [](const ConvertOptions& o) {
            return std::array<uint8_t, 3>{o.background[0], o.background[1], o.background[2]};
          },
          [](ConvertOptions& o, const std::array<uint8_t, 3>& rgb) {
            for (int i = 0; i < 3; ++i) o.background[i] = rgb[i];
          })
      .def_rw("max_pixels", &ConvertOptions::max_pixels)
      .def_rw("max_scans", &ConvertOptions::max_scans)
      .def_rw("max_file_bytes", &ConvertOptions::max_file_bytes)
      .def_rw("max_png_chunk_bytes", &ConvertOptions::max_png_chunk_bytes)
      .def_rw("strict", &ConvertOptions::strict)
      .def_rw("max_rejects", &ConvertOptions::max_rejects)
      .def_rw("resume", &ConvertOptions::resume)
      .def_rw("list_file", &ConvertOptions::list_file)
      .def_rw("overwrite", &ConvertOptions::overwrite)
      .def_rw("staging", &ConvertOptions::staging)
      .def_rw("input_format", &ConvertOptions::input_format)
      .def_rw("lmdb_schema", &ConvertOptions::lmdb_schema)
      .def_rw("part_index", &ConvertOptions::part_index)
      .def_rw("part_count", &ConvertOptions::part_count);

  m.def(
      "convert",
      [](const std::string& src, const std::string& dst, ConvertOptions options,
         nb::object progress) {
        if (!progress.is_none()) {
          auto last = std::make_shared<double>(-1);
          // Called on a converter thread without the GIL; a Python exception in the
          // callback is reported as unraisable and the conversion goes on. The callable is
          // held as a borrowed handle (the caller's argument outlives the call), so copies
          // of the std::function never touch a reference count without the GIL.
          nb::handle callback = progress;
          options.progress = [callback, last](const ConvertProgress& p) {
            if (p.done != p.total && p.seconds - *last < kProgressInterval) return;
            *last = p.seconds;
            nb::gil_scoped_acquire acquire;
            try {
              nb::dict d;
              d["done"] = p.done;
              d["total"] = p.total;
              d["rejected"] = p.rejected;
              d["bytes_in"] = p.bytes_in;
              d["bytes_out"] = p.bytes_out;
              d["seconds"] = p.seconds;
              callback(d);
            } catch (nb::python_error& e) {
              e.discard_as_unraisable("shardpack.convert progress callback");
            }
          };
        }
        StatusOr<ConvertSummary> summary = [&] {
          nb::gil_scoped_release release;
          return Convert(src, dst, options);
        }();
        return SummaryDict(ValueOrRaise(std::move(summary)));
      },
      nb::arg("src"), nb::arg("dst"), nb::arg("options"), nb::arg("progress") = nb::none(),
      "shardpack::Convert(src, dst, options); the summary as a dict. `progress(dict)` is "
      "called at most ten times a second and at the end.");

  m.def(
      "merge",
      [](const std::string& dst, bool verify, int threads) {
        MergeOptions o;
        o.verify = verify;
        o.num_threads = threads;
        StatusOr<MergeSummary> summary = [&] {
          nb::gil_scoped_release release;
          return Merge(dst, o);
        }();
        const MergeSummary& s = ValueOrRaise(std::move(summary));
        nb::list faults;
        for (const VerifyFault& f : s.faults) {
          faults.append(nb::make_tuple(f.file, f.record, f.offset, f.message, FormatFault(f)));
        }
        nb::dict d;
        d["parts"] = s.parts;
        d["inputs"] = s.inputs;
        d["written"] = s.written;
        d["rejected"] = s.rejected;
        d["already_merged"] = s.already_merged;
        d["faults"] = faults;
        d["seconds"] = s.seconds;
        d["manifest_json"] = s.ok() ? SerializeManifest(s.manifest) : std::string();
        return d;
      },
      nb::arg("dst"), nb::arg("verify"), nb::arg("threads"),
      "shardpack::Merge(dst, options); the summary as a dict.");
}

}  // namespace shardpack::python
