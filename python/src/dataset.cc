// _shardpack.Dataset: random access to a dataset's samples, for tests and tools that
// check what the loader delivers (shardpack.Dataset in Python).
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <tuple>

#include "bindings.h"
#include "errors.h"
#include "shardpack/manifest.h"
#include "shardpack/remote.h"

namespace nb = nanobind;

namespace shardpack::python {

namespace {

// A sample's pixels as a read-only H x W x C uint8 array. TFRecord: a view into the shard,
// mapped copy-on-write (DatasetOptions::copy_on_write), so that a write through another
// framework's view of it (torch.from_numpy ignores the read-only flag) changes a private
// page, never the file, and cannot crash; `owner` (the Python Dataset) is kept alive by
// the view. LMDB maps are read-only whatever is asked: those pixels are a copy.
using PixelView = nb::ndarray<nb::numpy, const uint8_t, nb::ndim<3>>;

std::tuple<PixelView, int64_t, std::string, std::string> GetSample(nb::handle self, uint64_t index,
                                                                   bool verify_crc) {
  const DatasetHandle& h = nb::cast<const DatasetHandle&>(self);
  SampleView view;
  Status status;
  {
    nb::gil_scoped_release release;
    status = h.dataset->Get(index, &view, verify_crc);
  }
  RaiseIfError(status);
  const size_t shape[3] = {static_cast<size_t>(view.height), static_cast<size_t>(view.width),
                           static_cast<size_t>(view.channels)};
  if (view.encoding != ImageEncoding::kRaw) {
    // An encoded image: decoded into an array of its own.
    const size_t bytes = shape[0] * shape[1] * shape[2];
    auto* pixels = new uint8_t[bytes];
    nb::capsule owner(pixels, [](void* p) noexcept { delete[] static_cast<uint8_t*>(p); });
    {
      nb::gil_scoped_release release;
      status = h.dataset->GetPixels(index, {pixels, bytes}, &view);
    }
    RaiseIfError(status);
    return {PixelView(pixels, {shape[0], shape[1], shape[2]}, owner), view.label,
            std::string(view.class_text), std::string(view.filename)};
  }
  if (h.dataset->manifest().backend == Backend::kLmdb) {
    auto* copy = new uint8_t[view.pixels.size()];
    std::memcpy(copy, view.pixels.data(), view.pixels.size());
    nb::capsule owner(copy, [](void* p) noexcept { delete[] static_cast<uint8_t*>(p); });
    RaiseIfError(h.dataset->CheckIntact(index));  // the copy read the file's bytes
    return {PixelView(copy, {shape[0], shape[1], shape[2]}, owner), view.label,
            std::string(view.class_text), std::string(view.filename)};
  }
  PixelView pixels(view.pixels.data(), {shape[0], shape[1], shape[2]}, self);
  return {pixels, view.label, std::string(view.class_text), std::string(view.filename)};
}

}  // namespace

void BindDataset(nb::module_& m) {
  nb::class_<DatasetHandle>(m, "Dataset",
                            "An open dataset (shardpack::Dataset). Thread-safe; shared with "
                            "the loaders made from it.")
      .def(
          "__init__",
          [](DatasetHandle* self, const std::string& dir, bool verify_crc) {
            DatasetOptions options;
            options.verify_crc = verify_crc;
            options.copy_on_write = true;  // see PixelView
            StatusOr<std::unique_ptr<Dataset>> ds = [&] {
              nb::gil_scoped_release release;
              return Dataset::Open(dir, options);
            }();
            new (self) DatasetHandle{std::shared_ptr<const Dataset>(ValueOrRaise(std::move(ds)))};
          },
          nb::arg("dir"), nb::arg("verify_crc") = true)
      .def("__len__", [](const DatasetHandle& h) { return h.dataset->size(); })
      .def_prop_ro("dir", [](const DatasetHandle& h) { return h.dataset->dir(); })
      .def_prop_ro(
          "manifest_json",
          [](const DatasetHandle& h) { return SerializeManifest(h.dataset->manifest()); },
          "The manifest, serialized as in manifest.json.")
      .def("get", &GetSample, nb::arg("index"), nb::arg("verify_crc") = true,
           "(pixels, label, class_text, filename) of sample `index`; pixels is a read-only "
           "HWC uint8 view into the shard that keeps the dataset alive.")
      .def(
          "check_intact",
          [](const DatasetHandle& h, uint64_t index) {
            RaiseIfError(h.dataset->CheckIntact(index));
          },
          nb::arg("index"),
          "Raises ShardpackIOError naming the file if the shard of sample `index` shrank while "
          "open "
          "(reads of its view found zeros, not the file's bytes).")
      .def(
          "locate",
          [](const DatasetHandle& h, uint64_t index) {
            SampleLocation loc = ValueOrRaise(h.dataset->Locate(index));
            return std::make_tuple(h.dataset->manifest().shards[loc.shard].data.file, loc.record,
                                   loc.offset);
          },
          nb::arg("index"), "(shard file, record, byte offset) of sample `index`.");

  m.def(
      "read_manifest_json",
      [](const std::string& dir) {
        StatusOr<Manifest> manifest = [&] {
          nb::gil_scoped_release release;
          return LoadManifest(dir);
        }();
        return SerializeManifest(ValueOrRaise(std::move(manifest)));
      },
      nb::arg("dir"),
      "DIR/manifest.json (fetched when DIR is an http(s) URL), checked and serialized again.");
}

}  // namespace shardpack::python
