// Per-sample transforms of the loader: one stored sample (HWC uint8) in, one sample of
// the batch's output shape out, with the crop and flip drawn from a per-sample key.
//
//   auto t = SampleTransformer::Create(options, manifest.image);        // StatusOr
//   TransformScratch scratch;                                          // one per thread
//   Status s = t->Apply(pixels, h, w, c, SampleKey(seed, epoch, index), out, &scratch);
//
// The transforms (LoaderOptions::transform; S is the shorter side before the crop):
//
//   kNone               the sample as stored (fixed-size datasets only).
//   kCenterCrop         torchvision's eval recipe Resize(S) + CenterCrop(out_h, out_w):
//                       S = resize_shorter, or round(max(out_h, out_w) * 8 / 7) when 0
//                       (256 for 224). The shorter sample side is scaled to S and the
//                       longer one to floor(S * longer / shorter), as torchvision does; the
//                       window starts at round-half-even((scaled - out) / 2) on each axis.
//                       That window's source region is then resampled straight to the
//                       output size in one pass, like Fit::kCrop, instead of resizing the
//                       whole image and cropping: every output pixel has the same filter
//                       centre and scale as in resize-then-crop, so the two agree except
//                       for the single-precision box and, where both axes resample, the
//                       order of the two passes (8-bit rounding between them): within +-1.
//                       Where the scaled image is smaller than the output on a side
//                       (resize_shorter below the output side, or an output much longer
//                       than the sample's aspect), that axis takes the whole source and
//                       is stretched to the output side; torchvision would pad with zeros.
//   kRandomResizedCrop  torchvision's RandomResizedCrop.get_params, then a resample of
//                       that whole-pixel box to the output size. With area = H * W, up to
//                       ten tries of
//                         target = area * U(scale_min, scale_max),
//                         aspect = exp(U(log ratio_min, log ratio_max)),
//                         w = round(sqrt(target * aspect)), h = round(sqrt(target / aspect))
//                       (round half to even, as Python's round), accepting the first with
//                       0 < w <= W and 0 < h <= H, then top = uniform in [0, H - h] and
//                       left = uniform in [0, W - w]. If no try fits: the whole image with
//                       its aspect clamped to [ratio_min, ratio_max] (the other side
//                       round(side / ratio_min) or round(side * ratio_max), at least 1),
//                       centred at floor((H - h) / 2), floor((W - w) / 2). Draws are in
//                       double precision (torchvision draws in float32), so the same
//                       algorithm, not the same bit stream as PyTorch's generator.
//   kRandomCrop         a uniform out_h x out_w window, top in [0, H - out_h] and left in
//                       [0, W - out_w] (fixed-size datasets only): a copy, no resampling.
//   random_flip         the output is mirrored left-right with probability 1/2.
//
// Resampling is image::ResizeRegionInto with LoaderOptions::filter (Pillow's arithmetic,
// ResizeFilter::kX is ResizeFilter::kX). A box that is a whole-pixel window of the
// output's size is copied, not resampled, whatever the filter.
//
// Randomness. Everything random comes from the key alone, never from thread, time or
// order. The crop draws are, in the order written above, those of Random(key) (random.h:
// each U(...) and each uniform integer is one UniformDouble or Below); the flip is bit 63
// of the first draw of Random(Mix64(key ^ kFlipStream)), so it is independent of the crop
// and of how many draws the crop took.
//
// Thread-safety: a SampleTransformer is immutable after Create; Apply and Plan may run
// concurrently on any number of threads, each with its own TransformScratch.
#ifndef SHARDPACK_READ_TRANSFORM_H_
#define SHARDPACK_READ_TRANSFORM_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "image/resize.h"
#include "shardpack/loader.h"
#include "shardpack/manifest.h"
#include "shardpack/status.h"

namespace shardpack::read {

// Tag of the flip's stream (ASCII "flip").
inline constexpr uint64_t kFlipStream = 0x666c6970;
// Tag of SampleKey's (seed, epoch) stream (ASCII "xform"), apart from the sampler's tags.
inline constexpr uint64_t kTransformStream = 0x78666f726d;

// The key of sample `index`'s transform in `epoch`: Mix64(MixKey(seed, epoch,
// kTransformStream) ^ index). Within one (seed, epoch), distinct indices get distinct keys.
uint64_t SampleKey(uint64_t seed, uint64_t epoch, uint64_t index);

// What Apply does to one sample: the source region that becomes the output, in source
// pixels ([x0, x1) x [y0, y1); whole pixels except for kCenterCrop), and the mirror; for
// an encoded sample, the DCT scale it is decoded at (PlanDecode).
struct SamplePlan {
  float x0 = 0.0f;
  float y0 = 0.0f;
  float x1 = 0.0f;
  float y1 = 0.0f;
  bool flip = false;
  // The sample's pixels are decoded at 1/denominator of the stored size (1, 2, 4 or 8):
  // ApplyPlan then scales the box itself (ScalePlan).
  int denominator = 1;
};

// Per-thread working memory of Apply. Its buffers only grow: once a thread has
// transformed its largest sample, Apply allocates nothing. Move-only; one thread at a
// time; an empty scratch allocates nothing.
class TransformScratch {
 public:
  TransformScratch() = default;
  TransformScratch(TransformScratch&&) noexcept = default;
  TransformScratch& operator=(TransformScratch&&) noexcept = default;

  // Heap bytes held now.
  size_t capacity_bytes() const { return resize_.capacity_bytes(); }

 private:
  friend class SampleTransformer;
  image::ResizeScratch resize_;
};

// `plan`, made for a sample, for the same sample decoded at 1/denominator by DCT scaling
// (scaled_height x scaled_width, ScaledSide of the stored sides): the box divided by the
// denominator, so that it covers the same part of the picture (a scaled pixel covers
// denominator x denominator stored ones), clamped to the scaled sides (a last, partial
// block). The result's own denominator is 1.
SamplePlan ScalePlan(const SamplePlan& plan, int denominator, int scaled_height, int scaled_width);

class SampleTransformer {
 public:
  // An empty transformer (0x0x0 output): Apply and Plan fail with FailedPrecondition.
  // Assign one from Create.
  SampleTransformer() = default;

  // Resolves the output shape (LoaderOptions::output_height / output_width; 0 takes the
  // fixed dataset's side) and checks the transform options against the dataset's spec.
  // Reads transform, random_flip, filter, output_height, output_width, and resize_shorter
  // (kCenterCrop) or rrc_* (kRandomResizedCrop) only; options a transform does not use
  // are not checked. InvalidArgument, naming the option and its value, for:
  //   - a spec whose channels are not 1 or 3;
  //   - a negative output side, a side left 0 on a variable-size dataset, a side above
  //     kMaxImageSide;
  //   - kNone on a variable-size dataset, or with an output shape not the stored one;
  //   - kRandomCrop on a variable-size dataset, or larger than the stored shape;
  //   - kCenterCrop with a negative resize_shorter;
  //   - kRandomResizedCrop with rrc_scale_min > rrc_scale_max, a scale outside (0, 1],
  //     rrc_ratio_min <= 0, rrc_ratio_min > rrc_ratio_max, or a non-finite value;
  //   - an unknown Transform or ResizeFilter value.
  static StatusOr<SampleTransformer> Create(const LoaderOptions& options, const ImageSpec& spec);

  int out_height() const { return out_height_; }
  int out_width() const { return out_width_; }
  int channels() const { return channels_; }
  // kNone without flip: Apply would copy; the caller may copy the stored pixels into the
  // batch itself (after checking the sample's shape).
  bool pass_through() const { return transform_ == Transform::kNone && !flip_; }

  // Grows `scratch` to what Apply needs for any sample of at most max_height x
  // max_width, so that Apply allocates nothing from the first sample on. Non-positive
  // bounds (a dataset that promises none) reserve nothing: the scratch then grows with
  // the largest sample seen.
  void Reserve(int max_height, int max_width, TransformScratch* scratch) const;
  // What Reserve allocates in an empty scratch, at most, without allocating.
  size_t ReserveBytes(int max_height, int max_width) const;

  // The region and mirror Apply(…, key, …) uses for a height x width sample. Same errors
  // as Apply for the shape; no pixels are read.
  StatusOr<SamplePlan> Plan(int height, int width, uint64_t key) const;

  // Plan's, for a sample to be decoded from a compressed file (a JPEG, where
  // `dct_scaling`), with the denominator it may be decoded at: ShrinkDenominator's where
  // `dct_scaling`, else 1. Decode at 1/plan.denominator (image::DecodeExactScaled), then
  // ApplyPlan.
  StatusOr<SamplePlan> PlanDecode(int height, int width, uint64_t key, bool dct_scaling) const;

  // Writes the transformed sample, out_height() x out_width() x channels() uint8 HWC rows
  // without padding, to `out`, which must not overlap `pixels` (height x width x channels
  // bytes, HWC, no padding). InvalidArgument (out untouched) when a pointer is null, a
  // side is not positive, channels differ from the spec's, or, for kNone, the sample is
  // not the output shape, or, for kRandomCrop, smaller than it. Messages describe the
  // sample ("sample of 3x4x1 (height x width x channels): ...") so that a caller can
  // prefix where it came from. FailedPrecondition on an empty transformer.
  Status Apply(const uint8_t* pixels, int height, int width, int channels, uint64_t key,
               uint8_t* out, TransformScratch* scratch) const;

  // As Apply, with the plan given instead of drawn from a key: Plan's or PlanDecode's for
  // this sample, or ScalePlan's of it. `pixels` is the sample at 1/plan.denominator of its
  // stored size (height x width are the decoded sides); the box is scaled to them here.
  // The (scaled) box must lie within the sample (InvalidArgument otherwise, as
  // ResizeRegionInto).
  Status ApplyPlan(const uint8_t* pixels, int height, int width, int channels,
                   const SamplePlan& plan, uint8_t* out, TransformScratch* scratch) const;

  // The DCT scale denominator (1, 2, 4 or 8) at which a JPEG may be decoded for `plan`
  // without the resample enlarging anything: the largest d whose box divided by d is
  // still at least out_height() x out_width(). 1 when the box is less than twice the
  // output on an axis (always for kNone and kRandomCrop).
  int ShrinkDenominator(const SamplePlan& plan) const;

 private:
  // Create's steps: the output shape (options' sides, 0 taking the fixed dataset's); for
  // kNone and kRandomCrop, that the stored size holds the window; kRandomResizedCrop's
  // ranges. InvalidArgument as Create says, `name` being the transform's.
  Status SetOutputSize(const LoaderOptions& options, const ImageSpec& spec);
  Status CheckStoredWindow(const std::string& name, const ImageSpec& spec) const;
  Status SetRandomResizedCrop(const LoaderOptions& options, const std::string& name);

  // Apply's and ApplyPlan's argument checks, and their common work.
  Status CheckInputs(const uint8_t* pixels, int height, int width, int channels, const uint8_t* out,
                     const TransformScratch* scratch) const;
  Status Resample(const uint8_t* pixels, int height, int width, int channels,
                  const SamplePlan& plan, uint8_t* out, TransformScratch* scratch) const;

  Transform transform_ = Transform::kNone;
  ResizeFilter filter_ = ResizeFilter::kBilinear;
  bool flip_ = false;
  int out_height_ = 0;
  int out_width_ = 0;
  int channels_ = 0;
  int shorter_side_ = 0;  // kCenterCrop's S
  double scale_min_ = 0.0;
  double scale_max_ = 0.0;
  double log_ratio_min_ = 0.0;
  double log_ratio_max_ = 0.0;
  double ratio_min_ = 0.0;
  double ratio_max_ = 0.0;
};

}  // namespace shardpack::read

#endif  // SHARDPACK_READ_TRANSFORM_H_
