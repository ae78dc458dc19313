// _shardpack.Loader and _shardpack.Batch: the loader's ring handed to Python without copies.
//
// Lifetime. A Batch holds its ring slot (shardpack::Batch) until the Python object and every
// array made from it (DLPack capsules, NumPy arrays, torch tensors: each keeps the Batch
// object alive as its owner) are gone; then the slot is released and refilled. Every Batch
// also holds the loader's core (shared_ptr), so a loader dropped by Python while tensors of
// its batches live on is destroyed only after the last of them.
//
// Waiting. A thread blocked in C++ cannot run Python's signal handlers, so Next() waits
// with Loader::WaitReady in kSignalPoll slices, the GIL released, and runs the handlers
// between them (Ctrl-C raises KeyboardInterrupt there). A batch is taken from the loader
// only once it is ready, so an interrupted wait loses nothing: the batch comes with the
// next call.
#include <nanobind/ndarray.h>
#include <nanobind/stl/array.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "arrays.h"
#include "bindings.h"
#include "errors.h"
#include "shardpack/loader.h"

namespace nb = nanobind;

namespace shardpack::python {

namespace {

using namespace std::chrono_literals;

// How often a Python thread waiting for a batch wakes up to run signal handlers.
constexpr std::chrono::milliseconds kSignalPoll = 50ms;

// The loader, shared by its Python handle and by every batch handed out, so that it
// outlives the last of them.
class LoaderCore {
 public:
  explicit LoaderCore(std::unique_ptr<Loader> loader) : loader_(std::move(loader)) {}
  LoaderCore(const LoaderCore&) = delete;
  LoaderCore& operator=(const LoaderCore&) = delete;

  Loader& loader() { return *loader_; }

  // True while Next() waits for a batch (for tests that interrupt that wait).
  std::atomic<bool> waiting{false};

 private:
  std::unique_ptr<Loader> loader_;
};

// Runs `wait(timeout)` without the GIL until it returns true, running the signal handlers
// between tries; a handler's exception (KeyboardInterrupt) is raised. GIL held on entry.
template <typename Wait>
void WaitWithSignals(Wait wait) {
  while (true) {
    bool done;
    {
      nb::gil_scoped_release release;
      done = wait(kSignalPoll);
    }
    if (done) return;
    if (PyErr_CheckSignals() != 0) throw nb::python_error();
  }
}

// A batch handed to Python, shared by its Python object and by every array made from it;
// the slot is released when the last of them goes.
class BatchState {
 public:
  BatchState(std::shared_ptr<LoaderCore> core, Batch batch)
      : core_(std::move(core)),
        batch_(std::move(batch)),
        device_(core_->loader().options().device) {}
  ~BatchState() { batch_.Release(); }
  BatchState(const BatchState&) = delete;
  BatchState& operator=(const BatchState&) = delete;

  Batch& batch() { return batch_; }
  const Batch& batch() const { return batch_; }
  int device() const { return device_; }  // CUDA device of the images, -1: the host

 private:
  std::shared_ptr<LoaderCore> core_;  // declared first: outlives `batch_`
  Batch batch_;
  int device_;
};

// The Python Batch object. Arrays made from it hold the BatchState through a plain
// capsule, not this object: a tensor still alive at interpreter exit (in an autograd
// graph, a global) then keeps no bound instance alive, and nanobind has no leak to report.
class BatchHandle {
 public:
  explicit BatchHandle(std::shared_ptr<BatchState> state) : state_(std::move(state)) {}
  Batch& batch() { return state_->batch(); }
  const Batch& batch() const { return state_->batch(); }
  int device() const { return state_->device(); }
  const std::shared_ptr<BatchState>& state() const { return state_; }

 private:
  std::shared_ptr<BatchState> state_;
};

nb::dlpack::dtype DlpackType(OutputType t) {
  switch (t) {
    case OutputType::kUint8:
      return nb::dtype<uint8_t>();
    case OutputType::kFloat32:
      return nb::dtype<float>();
    case OutputType::kFloat16:
      return {static_cast<uint8_t>(nb::dlpack::dtype_code::Float), 16, 1};
  }
  return nb::dtype<uint8_t>();
}

// The images of the batch in `self` (a BatchHandle) as an array that keeps the batch
// alive (through a capsule holding its BatchState), on the device (GPU path) or in the
// host slot, never copied. The slot holds uint8 samples HWC and normalised floats CHW;
// `nchw` chooses the shape the array shows, N x C x H x W or N x H x W x C, whatever the
// memory holds: where they differ the strides say so (uint8 shown NCHW is what PyTorch
// calls channels_last).
nb::ndarray<nb::array_api> Images(nb::handle self, bool nchw) {
  BatchHandle& h = nb::cast<BatchHandle&>(self);
  const Batch& b = h.batch();
  const size_t n = static_cast<size_t>(b.size());
  const size_t height = static_cast<size_t>(b.height());
  const size_t width = static_cast<size_t>(b.width());
  const size_t channels = static_cast<size_t>(b.channels());
  const bool memory_chw = b.type() != OutputType::kUint8;
  // Element strides of the memory, per axis: n, c, h, w.
  const int64_t hw = static_cast<int64_t>(height * width);
  const int64_t sample = static_cast<int64_t>(channels) * hw;
  const int64_t sc = memory_chw ? hw : 1;
  const int64_t sh =
      memory_chw ? static_cast<int64_t>(width) : static_cast<int64_t>(width * channels);
  const int64_t sw = memory_chw ? 1 : static_cast<int64_t>(channels);
  const size_t shape[4] = {n, nchw ? channels : height, nchw ? height : width,
                           nchw ? width : channels};
  const int64_t strides[4] = {sample, nchw ? sc : sh, nchw ? sh : sw, nchw ? sw : sc};
  const bool gpu = h.device() >= 0;
  void* data = gpu ? b.device_data() : const_cast<void*>(b.host_data());
  auto* keep = new std::shared_ptr<BatchState>(h.state());
  nb::capsule owner(keep,
                    [](void* p) noexcept { delete static_cast<std::shared_ptr<BatchState>*>(p); });
  return nb::ndarray<nb::array_api>(data, 4, shape, owner, strides, DlpackType(b.type()),
                                    gpu ? nb::device::cuda::value : nb::device::cpu::value,
                                    gpu ? h.device() : 0);
}

class LoaderHandle {
 public:
  LoaderHandle(const DatasetHandle& dataset, const LoaderOptions& options,
               const std::string& state_text) {
    std::optional<LoaderState> state;
    if (!state_text.empty()) state = ValueOrRaise(LoaderState::Parse(state_text));
    StatusOr<std::unique_ptr<Loader>> loader = [&] {
      nb::gil_scoped_release release;
      return Loader::Create(dataset.dataset, options, state ? &*state : nullptr);
    }();
    core_ = std::make_shared<LoaderCore>(ValueOrRaise(std::move(loader)));
  }

  // The next batch of the epoch; StopIteration at its end.
  std::unique_ptr<BatchHandle> Next() {
    Loader& loader = core_->loader();
    core_->waiting = true;
    try {
      WaitWithSignals([&](auto timeout) { return loader.WaitReady(timeout); });
    } catch (...) {
      core_->waiting = false;
      throw;
    }
    core_->waiting = false;
    // A signal that came while waiting, as the batch became ready, is raised now, before
    // the batch is taken: raised by Python after this returns, it would lose the batch.
    if (PyErr_CheckSignals() != 0) throw nb::python_error();
    // Ready: Next() returns at once (a batch, the epoch's end, or an error).
    StatusOr<Batch> batch = loader.Next();
    if (!batch.ok()) {
      if (batch.status().code() == StatusCode::kOutOfRange) throw nb::stop_iteration();
      RaiseStatus(batch.status());
    }
    return std::make_unique<BatchHandle>(
        std::make_shared<BatchState>(core_, std::move(batch).value()));
  }

  void StartEpoch(uint64_t epoch) { RaiseIfError(core_->loader().StartEpoch(epoch)); }

  std::string State() { return core_->loader().state().ToString(); }

  LoaderStats Stats() { return core_->loader().stats(); }

  uint64_t BatchesPerEpoch() const { return core_->loader().batches_per_epoch(); }

  nb::ndarray<nb::numpy, uint64_t, nb::ndim<1>> EpochOrder(uint64_t epoch) const {
    std::vector<uint64_t> order = core_->loader().EpochOrder(epoch);
    return CopyToNumpy(std::span<const uint64_t>(order));
  }

  bool waiting() const { return core_->waiting.load(); }

 private:
  std::shared_ptr<LoaderCore> core_;
};

// Python's DLPack stream argument -> cudaStream_t: 1 (or None) is the legacy default
// stream, 2 the per-thread default stream, any other value the stream itself.
void* StreamFromDlpack(intptr_t stream) {
  if (stream == 1 || stream == 0) return nullptr;
  return reinterpret_cast<void*>(stream);
}

// A Python enum of an option enum, its members named as the C++ table names them.
template <typename E>
void BindEnum(nb::module_& m, const char* name) {
  nb::enum_<E> e(m, name);
  const std::span<const std::string_view> names = EnumNames<E>();
  for (size_t i = 0; i < names.size(); ++i) e.value(names[i].data(), static_cast<E>(i));
}

}  // namespace

void BindLoader(nb::module_& m) {
  // The names are the C++ tables' (EnumNames, loader.h).
  BindEnum<ShuffleMode>(m, "ShuffleMode");
  BindEnum<Tail>(m, "Tail");
  BindEnum<Transform>(m, "Transform");
  BindEnum<IoPath>(m, "IoPath");
  BindEnum<HugePages>(m, "HugePages");
  BindEnum<OnCorrupt>(m, "OnCorrupt");
  BindEnum<OutputType>(m, "OutputType");
  // The names are the C++ list's (resize_filter.h); parse_resize_filter also takes the
  // aliases the CLI takes.
  nb::enum_<ResizeFilter> filter(m, "ResizeFilter");
  for (size_t i = 0; i < ResizeFilterNames().size(); ++i) {
    filter.value(ResizeFilterNames()[i].data(), static_cast<ResizeFilter>(i));
  }
  m.def(
      "parse_resize_filter",
      [](const std::string& name) { return ValueOrRaise(ParseResizeFilter(name)); },
      nb::arg("name"), "shardpack::ParseResizeFilter: InvalidArgumentError for an unknown name.");

  nb::class_<LoaderOptions>(m, "LoaderOptions", "shardpack::LoaderOptions (loader.h).")
      .def(nb::init<>())
      .def_rw("batch_size", &LoaderOptions::batch_size)
      .def_rw("shuffle", &LoaderOptions::shuffle)
      .def_rw("block_size", &LoaderOptions::block_size)
      .def_rw("block_window", &LoaderOptions::block_window)
      .def_rw("seed", &LoaderOptions::seed)
      .def_rw("num_threads", &LoaderOptions::num_threads)
      .def_rw("prefetch", &LoaderOptions::prefetch)
      .def_rw("read_ahead_bytes", &LoaderOptions::read_ahead_bytes)
      .def_rw("io", &LoaderOptions::io)
      .def_rw("huge_pages", &LoaderOptions::huge_pages)
      .def_rw("io_depth", &LoaderOptions::io_depth)
      .def_rw("io_buffer_bytes", &LoaderOptions::io_buffer_bytes)
      .def_rw("max_memory_bytes", &LoaderOptions::max_memory_bytes)
      .def_rw("tail", &LoaderOptions::tail)
      .def_rw("rank", &LoaderOptions::rank)
      .def_rw("world_size", &LoaderOptions::world_size)
      .def_rw("device", &LoaderOptions::device)
      .def_rw("verify_crc", &LoaderOptions::verify_crc)
      .def_rw("on_corrupt", &LoaderOptions::on_corrupt)
      .def_rw("output_height", &LoaderOptions::output_height)
      .def_rw("output_width", &LoaderOptions::output_width)
      .def_rw("transform", &LoaderOptions::transform)
      .def_rw("random_flip", &LoaderOptions::random_flip)
      .def_rw("resize_shorter", &LoaderOptions::resize_shorter)
      .def_rw("rrc_scale_min", &LoaderOptions::rrc_scale_min)
      .def_rw("rrc_scale_max", &LoaderOptions::rrc_scale_max)
      .def_rw("rrc_ratio_min", &LoaderOptions::rrc_ratio_min)
      .def_rw("rrc_ratio_max", &LoaderOptions::rrc_ratio_max)
      .def_rw("filter", &LoaderOptions::filter)
      .def_rw("decode_scaled", &LoaderOptions::decode_scaled)
      .def_rw("output_type", &LoaderOptions::output_type)
      .def_rw("mean", &LoaderOptions::mean)
      .def_rw("std", &LoaderOptions::std);

  nb::class_<LoaderStats>(m, "LoaderStats",
                          "shardpack::LoaderStats: counters since the loader was made.")
      .def_ro("batches", &LoaderStats::batches)
      .def_ro("samples", &LoaderStats::samples)
      .def_ro("bytes", &LoaderStats::bytes, "Pixel bytes copied into the ring.")
      .def_ro("skipped_corrupt", &LoaderStats::skipped_corrupt)
      .def_ro("seconds", &LoaderStats::seconds, "Seconds since the loader was made.")
      .def_ro("wait_seconds", &LoaderStats::wait_seconds,
              "Seconds the consumer waited for batches.")
      .def_ro("mean_ready_batches", &LoaderStats::mean_ready_batches)
      .def_ro("io", &LoaderStats::io, "The I/O path and why it was chosen.")
      .def_ro("bytes_read", &LoaderStats::bytes_read,
              "Read-ahead path: bytes read from storage (mapped path: 0).")
      .def_ro("batches_from_page_cache", &LoaderStats::batches_from_page_cache,
              "Read-ahead path: batches found in the page cache whole and read from there.")
      .def_ro("bytes_found_missing", &LoaderStats::bytes_found_missing,
              "Mapped path: bytes found outside the page cache after a wait for the disk, "
              "and read ahead at once.")
      .def("__str__", &LoaderStats::ToString);

  nb::class_<BatchHandle>(m, "Batch",
                          "One batch, holding its ring slot until this object and every array "
                          "made from it are gone.")
      .def("images", &Images, nb::arg("nchw") = true,
           "The images as an array (DLPack and buffer protocol) that keeps this batch alive, "
           "shaped N x C x H x W (nchw) or N x H x W x C, strided over the slot's memory "
           "(uint8 HWC, normalised floats CHW); never a copy.")
      .def(
          "labels", [](const BatchHandle& h) { return CopyToNumpy(h.batch().labels()); },
          "The labels, int64, as a new array (a copy: holding it holds no slot).")
      .def(
          "indices", [](const BatchHandle& h) { return CopyToNumpy(h.batch().indices()); },
          "The global sample indices, uint64, as a new array.")
      .def(
          "wait_on",
          [](BatchHandle& h, intptr_t stream) {
            RaiseIfError(h.batch().WaitOn(StreamFromDlpack(stream)));
          },
          nb::arg("stream"),
          "GPU path: makes `stream` (a cudaStream_t as an int; DLPack's 1: the legacy default "
          "stream) wait for the batch, without blocking the host; the slot's reuse will wait "
          "for the work queued on it. No-op on the host path.")
      .def_prop_ro("epoch", [](const BatchHandle& h) { return h.batch().epoch(); })
      .def_prop_ro("index", [](const BatchHandle& h) { return h.batch().index(); })
      .def_prop_ro("size", [](const BatchHandle& h) { return h.batch().size(); })
      .def_prop_ro("valid", [](const BatchHandle& h) { return h.batch().valid(); })
      .def_prop_ro("device", &BatchHandle::device)
      .def_prop_ro(
          "data_address",
          [](const BatchHandle& h) {
            const void* p = h.device() >= 0 ? h.batch().device_data() : h.batch().host_data();
            return reinterpret_cast<uintptr_t>(p);
          },
          "Address of the images in the ring slot (device memory on the GPU path).")
      .def_prop_ro("host_bytes", [](const BatchHandle& h) { return h.batch().host_bytes(); });

  nb::class_<LoaderHandle>(m, "Loader", "shardpack::Loader (see loader.cc for how it waits).")
      .def(nb::init<const DatasetHandle&, const LoaderOptions&, const std::string&>(),
           nb::arg("dataset"), nb::arg("options"), nb::arg("state") = "")
      .def("next", &LoaderHandle::Next,
           "The next batch of the epoch; StopIteration at its end. Waits with the GIL released; "
           "Ctrl-C raises KeyboardInterrupt and the batch comes with the next call.")
      .def("start_epoch", &LoaderHandle::StartEpoch, nb::arg("epoch"))
      .def("state", &LoaderHandle::State, "LoaderState::ToString() of the next batch to come.")
      .def("stats", &LoaderHandle::Stats)
      .def_prop_ro("batches_per_epoch", &LoaderHandle::BatchesPerEpoch)
      .def("epoch_order", &LoaderHandle::EpochOrder, nb::arg("epoch"),
           "Loader::EpochOrder: the global sample indices of `epoch` for this rank, in order.")
      .def_prop_ro("waiting", &LoaderHandle::waiting,
                   "True while next() waits for a batch to be made.");

  m.def(
      "parse_loader_state",
      [](const std::string& text) {
        LoaderState s = ValueOrRaise(LoaderState::Parse(text));
        nb::dict d;
        d["epoch"] = s.epoch;
        d["next_batch"] = s.next_batch;
        d["seed"] = s.seed;
        d["num_samples"] = s.num_samples;
        d["rank"] = s.rank;
        d["world_size"] = s.world_size;
        d["batch_size"] = s.batch_size;
        d["shuffle"] = s.shuffle;
        d["version"] = s.version;
        if (s.version >= 2) {
          d["tail"] = s.tail;
          d["block_size"] = s.block_size;
          d["block_window"] = s.block_window;
          d["shard_layout"] = s.shard_layout;
        }
        return d;
      },
      nb::arg("text"), "LoaderState::Parse, as a dict.");

  m.def(
      "loader_state_at",
      [](const std::string& text, uint64_t epoch, uint64_t next_batch) {
        LoaderState s = ValueOrRaise(LoaderState::Parse(text));
        s.epoch = epoch;
        s.next_batch = next_batch;
        return s.ToString();
      },
      nb::arg("text"), nb::arg("epoch"), nb::arg("next_batch"),
      "The state `text` moved to batch `next_batch` of `epoch` (what the order depends on "
      "kept).");

  m.def(
      "rank_from_environment",
      [] {
        DistributedRank r = ValueOrRaise(RankFromEnvironment());
        return nb::make_tuple(r.rank, r.world_size, r.source);
      },
      "RankFromEnvironment (loader.h): (rank, world_size, source) from torchrun's, Open "
      "MPI's, PMI's or Slurm's variables.");
}

}  // namespace shardpack::python
