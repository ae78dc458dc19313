#include "read/sample_step.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "format/shard_reader.h"
#include "image/image.h"
#include "read/dataset_access.h"
#include "shardpack/limits.h"

namespace shardpack::read {

SampleStep::SampleStep(const Dataset* dataset, const LoaderOptions& options,
                       SampleTransformer transformer, const HostNormalizer* normalizer)
    : dataset_(dataset),
      verify_crc_(options.verify_crc),
      decode_scaled_(options.decode_scaled),
      seed_(options.seed),
      num_classes_(dataset->manifest().classes.size()),
      transformer_(std::move(transformer)),
      normalizer_(normalizer) {
  sample_bytes_ = static_cast<size_t>(transformer_.out_height()) *
                  static_cast<size_t>(transformer_.out_width()) *
                  static_cast<size_t>(transformer_.channels());
  const ImageSpec& spec = dataset->manifest().image;
  max_height_ = spec.fixed() ? spec.height : spec.max_side;
  max_width_ = spec.fixed() ? spec.width : spec.max_side;
  // An encoded image is decoded whole before a transform; no image has more pixels than
  // the format's largest (format/example.cc refuses the record).
  if (spec.encoding != ImageEncoding::kRaw && !transformer_.pass_through()) {
    decoded_bytes_ =
        std::min<size_t>(static_cast<size_t>(max_height_) * static_cast<size_t>(max_width_),
                         kMaxImagePixels) *
        static_cast<size_t>(spec.channels);
  }
}

uint64_t SampleStep::ScratchBytes() const {
  return transformer_.ReserveBytes(max_height_, max_width_) + decoded_bytes_;
}

void SampleStep::Reserve(SampleScratch* scratch) const {
  transformer_.Reserve(max_height_, max_width_, &scratch->transform);
  scratch->decoded.resize(decoded_bytes_);
}

void SampleStep::WarmDecoder(SampleScratch* scratch) const {
  if (dataset_->manifest().image.encoding == ImageEncoding::kRaw) return;
  const uint64_t tries = std::min<uint64_t>(dataset_->size(), 8);
  for (uint64_t index = 0; index < tries; ++index) {
    SampleView view;
    if (!dataset_->Get(index, &view, /*verify_crc=*/false).ok() ||
        view.encoding == ImageEncoding::kRaw) {
      continue;
    }
    const size_t bytes = static_cast<size_t>(view.height) * static_cast<size_t>(view.width) *
                         static_cast<size_t>(view.channels);
    std::vector<uint8_t> own;
    uint8_t* dst = scratch->decoded.data();
    if (scratch->decoded.size() < bytes) {
      own.resize(bytes);
      dst = own.data();
    }
    format::DecodeSampleInto(view, 1, dst).IgnoreError();
    return;
  }
}

// A shard that shrank while mapped reads zeros instead of crashing (io/mapped_range.h):
// the check after the copy turns that into an IOError naming the file, whatever else the
// zeros caused.
Status SampleStep::Run(const SampleSource& source, const SampleTarget& target,
                       SampleScratch* scratch) const {
  SHARDPACK_ASSIGN_OR_RETURN(const DatasetAccess::ShardRecord at,
                             DatasetAccess(*dataset_).Find(source.index));
  Status s = Place(source, at, target, scratch);
  Status intact = at.shard->CheckIntact(at.record);
  return intact.ok() ? s : intact;
}

Status SampleStep::Place(const SampleSource& source, const DatasetAccess::ShardRecord& at,
                         const SampleTarget& target, SampleScratch* scratch) const {
  // Without a transform the pixels go to the batch as they are: the shard reader copies
  // them there while checking their checksum, one pass over them instead of two (an
  // encoded image: decodes it there). Unless the host normalises the sample next, nothing
  // reads it again soon (the GPU copy, or the consumer, a batch later): the copy's stores
  // then go around the caches, fenced by the caller once per chunk (the header).
  format::CopyTarget copy;
  if (transformer_.pass_through()) {
    copy = {target.pixels, sample_bytes_,
            normalizer_ != nullptr ? crc32c::CopyStores::kCached
                                   : crc32c::CopyStores::kStreamingUnfenced};
  }
  SampleView view;
  if (source.reads != nullptr) {
    SHARDPACK_RETURN_IF_ERROR(source.reads->Sample(source.position, verify_crc_, &view, &copy));
  } else {
    SHARDPACK_RETURN_IF_ERROR(at.shard->Get(at.record, verify_crc_, &view, &copy));
  }
  // A label is an index into the class list for whoever consumes the batch (a one-hot
  // encoding, a loss): one outside it is the record's fault, not the consumer's.
  if (view.label < 0 || static_cast<uint64_t>(view.label) >= num_classes_) {
    return CorruptionError(Where(source.index) + ": label " + std::to_string(view.label) +
                           " is outside the " + std::to_string(num_classes_) +
                           " classes of the manifest");
  }
  *target.label = view.label;
  if (transformer_.pass_through()) {
    const size_t view_bytes = static_cast<size_t>(view.height) * static_cast<size_t>(view.width) *
                              static_cast<size_t>(view.channels);
    if (view_bytes != sample_bytes_ || view.height != transformer_.out_height() ||
        view.width != transformer_.out_width()) {
      return ShapeFault(source.index, view, "");
    }
    if (!copy.copied) std::memcpy(target.pixels, view.pixels.data(), sample_bytes_);
  } else {
    SHARDPACK_RETURN_IF_ERROR(Transform(view, source, target.pixels, scratch));
  }
  if (normalizer_ != nullptr) {
    normalizer_->Run(target.pixels, 1, transformer_.out_height(), transformer_.out_width(),
                     transformer_.channels(), target.normalized);
  }
  return Status::Ok();
}

Status SampleStep::Transform(const SampleView& view, const SampleSource& source, uint8_t* dst,
                             SampleScratch* scratch) const {
  const uint64_t key = SampleKey(seed_, source.epoch, source.index);
  Status s;
  if (view.encoding == ImageEncoding::kRaw) {
    s = transformer_.Apply(view.pixels.data(), view.height, view.width, view.channels, key, dst,
                           &scratch->transform);
  } else {
    s = TransformEncoded(view, key, dst, scratch);
    if (s.code() == StatusCode::kCorruption)
      return Status(s.code(), Where(source.index) + ": " + s.message());
  }
  return s.ok() ? s : ShapeFault(source.index, view, s.message());
}

// The transform plans the sample's crop, and the DCT scale at which a JPEG it shrinks
// twice or more may be decoded (LoaderOptions::decode_scaled). A file that does not decode
// is the record's Corruption; any other error is the transform's, about the shape.
Status SampleStep::TransformEncoded(const SampleView& view, uint64_t key, uint8_t* dst,
                                    SampleScratch* scratch) const {
  SHARDPACK_ASSIGN_OR_RETURN(
      const SamplePlan plan,
      transformer_.PlanDecode(view.height, view.width, key,
                              decode_scaled_ && view.encoding == ImageEncoding::kJpeg));
  const int height = image::ScaledSide(view.height, plan.denominator);
  const int width = image::ScaledSide(view.width, plan.denominator);
  const size_t bytes =
      static_cast<size_t>(height) * static_cast<size_t>(width) * static_cast<size_t>(view.channels);
  if (scratch->decoded.size() < bytes) scratch->decoded.resize(bytes);
  SHARDPACK_RETURN_IF_ERROR(
      format::DecodeSampleInto(view, plan.denominator, scratch->decoded.data()));
  return transformer_.ApplyPlan(scratch->decoded.data(), height, width, view.channels, plan, dst,
                                &scratch->transform);
}

std::string SampleStep::Where(uint64_t index) const {
  auto loc = dataset_->Locate(index);
  if (!loc.ok()) return dataset_->dir();
  return DatasetAccess(*dataset_).shard(loc->shard).Where(loc->record);
}

Status SampleStep::ShapeFault(uint64_t index, const SampleView& view,
                              const std::string& why) const {
  const std::string what = why.empty() ? "sample is " + std::to_string(view.height) + "x" +
                                             std::to_string(view.width) + "x" +
                                             std::to_string(view.channels) + ", the loader needs " +
                                             std::to_string(transformer_.out_height()) + "x" +
                                             std::to_string(transformer_.out_width()) + "x" +
                                             std::to_string(transformer_.channels())
                                       : why;
  return CorruptionError(Where(index) + ": " + what);
}

}  // namespace shardpack::read
