#include "read/transform.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "image/image.h"
#include "image/resize.h"
#include "read/random.h"

namespace shardpack::read {
namespace {

// The name users type (Python's transform=, docs/LOADER.md), not the C++ enumerator.
std::string TransformName(Transform t) {
  const auto i = static_cast<size_t>(t);
  if (i < EnumNames<Transform>().size()) return "\"" + std::string(EnumName(t)) + "\"";
  return "Transform(" + std::to_string(static_cast<int>(t)) + ")";
}

std::string SizeText(int64_t height, int64_t width) {
  return std::to_string(height) + "x" + std::to_string(width);
}

std::string SampleText(int height, int width, int channels) {
  return "sample of " + SizeText(height, width) + "x" + std::to_string(channels) +
         " (height x width x channels)";
}

// Python's round(): to nearest, halves to even. Written out rather than std::nearbyint so
// that it does not depend on the floating-point environment.
int64_t RoundHalfEven(double x) {
  const double r = std::floor(x);
  const double diff = x - r;
  int64_t n = static_cast<int64_t>(r);
  if (diff > 0.5 || (diff == 0.5 && (n & 1) != 0)) ++n;
  return n;
}

// torchvision's CenterCrop offset, int(round((scaled - out) / 2.0)), for scaled >= out.
int64_t CenterOffset(int64_t scaled, int out) {
  const int64_t d = scaled - out;
  return d / 2 + ((d & 1) != 0 && ((d / 2) & 1) != 0 ? 1 : 0);
}

// One axis of kCenterCrop: the source interval of the centred `out`-pixel window of this
// axis scaled from `side` to `scaled` pixels; the whole axis if the window does not fit.
void CenterAxis(int side, int64_t scaled, int out, float* begin, float* end) {
  if (scaled < out) {
    *begin = 0.0f;
    *end = static_cast<float>(side);
    return;
  }
  const int64_t first = CenterOffset(scaled, out);
  *begin = static_cast<float>(static_cast<double>(first) * side / scaled);
  *end = static_cast<float>(static_cast<double>(first + out) * side / scaled);
}

SamplePlan WholePixelBox(int64_t top, int64_t left, int64_t height, int64_t width) {
  SamplePlan plan;
  plan.x0 = static_cast<float>(left);
  plan.y0 = static_cast<float>(top);
  plan.x1 = static_cast<float>(left + width);
  plan.y1 = static_cast<float>(top + height);
  return plan;
}

// Mirrors each row of an image in place.
void FlipRows(uint8_t* pixels, int height, int width, int channels) {
  for (int y = 0; y < height; ++y) {
    uint8_t* row = pixels + static_cast<size_t>(y) * width * channels;
    if (channels == 1) {
      std::reverse(row, row + width);
      continue;
    }
    uint8_t* a = row;
    uint8_t* b = row + static_cast<size_t>(width - 1) * 3;
    for (; a < b; a += 3, b -= 3) {
      std::swap(a[0], b[0]);
      std::swap(a[1], b[1]);
      std::swap(a[2], b[2]);
    }
  }
}

}  // namespace

uint64_t SampleKey(uint64_t seed, uint64_t epoch, uint64_t index) {
  return Mix64(MixKey(seed, epoch, kTransformStream) ^ index);
}

StatusOr<SampleTransformer> SampleTransformer::Create(const LoaderOptions& options,
                                                      const ImageSpec& spec) {
  const Transform t = options.transform;
  const std::string name = "transform " + TransformName(t);
  if (spec.channels != 1 && spec.channels != 3) {
    return InvalidArgumentError("transform: the dataset has " + std::to_string(spec.channels) +
                                " channels, expected 1 or 3");
  }
  SampleTransformer st;
  st.transform_ = t;
  st.flip_ = options.random_flip;
  st.channels_ = spec.channels;

  if (Status s = CheckResizeFilter(options.filter, "transform: filter"); !s.ok()) return s;
  // Everything but the pass-through resamples (a flip alone too): a bad
  // SHARDPACK_RESIZE_KERNELS is refused here, not found as a fault in every sample.
  if (!st.pass_through()) SHARDPACK_RETURN_IF_ERROR(image::ResizeKernelsStatus());
  st.filter_ = options.filter;

  SHARDPACK_RETURN_IF_ERROR(st.SetOutputSize(options, spec));
  switch (t) {
    case Transform::kNone:
    case Transform::kRandomCrop:
      SHARDPACK_RETURN_IF_ERROR(st.CheckStoredWindow(name, spec));
      break;
    case Transform::kCenterCrop:
      if (options.resize_shorter < 0) {
        return InvalidArgumentError("transform: " + name + ": resize_shorter " +
                                    std::to_string(options.resize_shorter) +
                                    " must not be negative (0: 8/7 of the output side)");
      }
      // round(m * 8 / 7) in integers: m * 8 / 7 is never a half.
      st.shorter_side_ =
          options.resize_shorter > 0
              ? options.resize_shorter
              : static_cast<int>((int64_t{std::max(st.out_height_, st.out_width_)} * 8 + 3) / 7);
      break;
    case Transform::kRandomResizedCrop:
      SHARDPACK_RETURN_IF_ERROR(st.SetRandomResizedCrop(options, name));
      break;
    default:
      return InvalidArgumentError("transform: unknown transform " +
                                  std::to_string(static_cast<int>(t)));
  }
  return st;
}

Status SampleTransformer::SetOutputSize(const LoaderOptions& options, const ImageSpec& spec) {
  int out_h = options.output_height;
  int out_w = options.output_width;
  const std::string requested = "output_height x output_width " + SizeText(out_h, out_w);
  if (out_h < 0 || out_w < 0) {
    return InvalidArgumentError("transform: " + requested + " must not be negative (0: the " +
                                "dataset's fixed side)");
  }
  if (out_h == 0 || out_w == 0) {
    if (!spec.fixed()) {
      return InvalidArgumentError("transform: " + requested +
                                  ": a variable-size dataset needs both output sides set");
    }
    if (out_h == 0) out_h = spec.height;
    if (out_w == 0) out_w = spec.width;
  }
  if (out_h > kMaxImageSide || out_w > kMaxImageSide) {
    return InvalidArgumentError("transform: output size " + SizeText(out_h, out_w) + " exceeds " +
                                std::to_string(kMaxImageSide) + " on a side");
  }
  out_height_ = out_h;
  out_width_ = out_w;
  return Status::Ok();
}

Status SampleTransformer::CheckStoredWindow(const std::string& name, const ImageSpec& spec) const {
  const std::string out = SizeText(out_height_, out_width_);
  if (transform_ == Transform::kNone) {
    if (!spec.fixed()) {
      return InvalidArgumentError(
          "transform: " + name + " needs a fixed-size dataset; this one has variable sizes " +
          "(use \"center_crop\" or \"random_resized_crop\" with an output size)");
    }
    if (out_height_ != spec.height || out_width_ != spec.width) {
      return InvalidArgumentError("transform: " + name + " keeps the stored size " +
                                  SizeText(spec.height, spec.width) + ", but the output size is " +
                                  out);
    }
    return Status::Ok();
  }
  if (!spec.fixed()) {
    return InvalidArgumentError("transform: " + name +
                                " needs a fixed-size dataset; this one has variable sizes");
  }
  if (out_height_ > spec.height || out_width_ > spec.width) {
    return InvalidArgumentError("transform: " + name + " window " + out +
                                " is larger than the stored size " +
                                SizeText(spec.height, spec.width));
  }
  return Status::Ok();
}

Status SampleTransformer::SetRandomResizedCrop(const LoaderOptions& options,
                                               const std::string& name) {
  const double smin = options.rrc_scale_min;
  const double smax = options.rrc_scale_max;
  const double rmin = options.rrc_ratio_min;
  const double rmax = options.rrc_ratio_max;
  const std::string scale =
      "rrc_scale [" + std::to_string(smin) + ", " + std::to_string(smax) + "]";
  const std::string ratio =
      "rrc_ratio [" + std::to_string(rmin) + ", " + std::to_string(rmax) + "]";
  // Written so that NaN fails every test.
  if (!(smin <= smax)) {
    return InvalidArgumentError("transform: " + name + ": " + scale + " has min > max");
  }
  if (!(smin > 0.0 && smax <= 1.0)) {
    return InvalidArgumentError("transform: " + name + ": " + scale + " must lie in (0, 1]");
  }
  if (!(rmin > 0.0)) {
    return InvalidArgumentError("transform: " + name + ": " + ratio + " must be positive");
  }
  if (!(rmin <= rmax) || !std::isfinite(rmax)) {
    return InvalidArgumentError("transform: " + name + ": " + ratio +
                                " has min > max or is not finite");
  }
  scale_min_ = smin;
  scale_max_ = smax;
  ratio_min_ = rmin;
  ratio_max_ = rmax;
  log_ratio_min_ = std::log(rmin);
  log_ratio_max_ = std::log(rmax);
  return Status::Ok();
}

StatusOr<SamplePlan> SampleTransformer::Plan(int height, int width, uint64_t key) const {
  if (channels_ == 0) {
    return FailedPreconditionError("transform: empty SampleTransformer (not made by Create)");
  }
  if (height <= 0 || width <= 0) {
    return InvalidArgumentError(SampleText(height, width, channels_) + ": sides must be positive");
  }
  SamplePlan plan;
  switch (transform_) {
    case Transform::kNone:
      if (height != out_height_ || width != out_width_) {
        return InvalidArgumentError(SampleText(height, width, channels_) + ": expected " +
                                    SizeText(out_height_, out_width_) + " (transform \"none\")");
      }
      plan = WholePixelBox(0, 0, height, width);
      break;
    case Transform::kRandomCrop: {
      if (height < out_height_ || width < out_width_) {
        return InvalidArgumentError(SampleText(height, width, channels_) + ": smaller than the " +
                                    SizeText(out_height_, out_width_) +
                                    " window (transform \"random_crop\")");
      }
      Random rng(key);
      const int64_t top = static_cast<int64_t>(rng.Below(height - out_height_ + 1));
      const int64_t left = static_cast<int64_t>(rng.Below(width - out_width_ + 1));
      plan = WholePixelBox(top, left, out_height_, out_width_);
      break;
    }
    case Transform::kCenterCrop: {
      // torchvision's Resize(S): the shorter side becomes S, the longer one
      // int(S * longer / shorter), i.e. the floor.
      const int64_t s = shorter_side_;
      int64_t scaled_h = s;
      int64_t scaled_w = s;
      if (height <= width) {
        scaled_w = s * width / height;
      } else {
        scaled_h = s * height / width;
      }
      CenterAxis(height, scaled_h, out_height_, &plan.y0, &plan.y1);
      CenterAxis(width, scaled_w, out_width_, &plan.x0, &plan.x1);
      break;
    }
    case Transform::kRandomResizedCrop: {
      Random rng(key);
      const double area = static_cast<double>(height) * width;
      bool found = false;
      for (int attempt = 0; attempt < 10 && !found; ++attempt) {
        const double target_area = area * rng.UniformDouble(scale_min_, scale_max_);
        const double aspect = std::exp(rng.UniformDouble(log_ratio_min_, log_ratio_max_));
        const int64_t w = RoundHalfEven(std::sqrt(target_area * aspect));
        const int64_t h = RoundHalfEven(std::sqrt(target_area / aspect));
        if (w > 0 && w <= width && h > 0 && h <= height) {
          const int64_t top = static_cast<int64_t>(rng.Below(height - h + 1));
          const int64_t left = static_cast<int64_t>(rng.Below(width - w + 1));
          plan = WholePixelBox(top, left, h, w);
          found = true;
        }
      }
      if (!found) {
        // torchvision's fallback: the whole image, its aspect clamped to the ratio range.
        const double in_ratio = static_cast<double>(width) / height;
        int64_t w = width;
        int64_t h = height;
        if (in_ratio < ratio_min_) {
          h = std::clamp<int64_t>(RoundHalfEven(width / ratio_min_), 1, height);
        } else if (in_ratio > ratio_max_) {
          w = std::clamp<int64_t>(RoundHalfEven(height * ratio_max_), 1, width);
        }
        plan = WholePixelBox((height - h) / 2, (width - w) / 2, h, w);
      }
      break;
    }
  }
  if (flip_) plan.flip = (Random(Mix64(key ^ kFlipStream)).Next64() >> 63) != 0;
  return plan;
}

void SampleTransformer::Reserve(int max_height, int max_width, TransformScratch* scratch) const {
  if (scratch == nullptr || pass_through()) return;
  scratch->resize_.Reserve(max_height, max_width, out_height_, out_width_, channels_, filter_);
}

size_t SampleTransformer::ReserveBytes(int max_height, int max_width) const {
  if (pass_through()) return 0;
  return image::ResizeScratch::ReserveBytes(max_height, max_width, out_height_, out_width_,
                                            channels_, filter_);
}

Status SampleTransformer::CheckInputs(const uint8_t* pixels, int height, int width, int channels,
                                      const uint8_t* out, const TransformScratch* scratch) const {
  if (channels_ == 0) {
    return FailedPreconditionError("transform: empty SampleTransformer (not made by Create)");
  }
  if (pixels == nullptr || out == nullptr || scratch == nullptr) {
    return InvalidArgumentError("transform: null pixels, output or scratch");
  }
  if (channels != channels_) {
    return InvalidArgumentError(SampleText(height, width, channels) + ": expected " +
                                std::to_string(channels_) + " channels");
  }
  return Status::Ok();
}

Status SampleTransformer::Apply(const uint8_t* pixels, int height, int width, int channels,
                                uint64_t key, uint8_t* out, TransformScratch* scratch) const {
  SHARDPACK_RETURN_IF_ERROR(CheckInputs(pixels, height, width, channels, out, scratch));
  SHARDPACK_ASSIGN_OR_RETURN(const SamplePlan plan, Plan(height, width, key));
  return Resample(pixels, height, width, channels, plan, out, scratch);
}

Status SampleTransformer::ApplyPlan(const uint8_t* pixels, int height, int width, int channels,
                                    const SamplePlan& plan, uint8_t* out,
                                    TransformScratch* scratch) const {
  SHARDPACK_RETURN_IF_ERROR(CheckInputs(pixels, height, width, channels, out, scratch));
  if (plan.denominator == 1) return Resample(pixels, height, width, channels, plan, out, scratch);
  return Resample(pixels, height, width, channels, ScalePlan(plan, plan.denominator, height, width),
                  out, scratch);
}

StatusOr<SamplePlan> SampleTransformer::PlanDecode(int height, int width, uint64_t key,
                                                   bool dct_scaling) const {
  SHARDPACK_ASSIGN_OR_RETURN(SamplePlan plan, Plan(height, width, key));
  if (dct_scaling) plan.denominator = ShrinkDenominator(plan);
  return plan;
}

Status SampleTransformer::Resample(const uint8_t* pixels, int height, int width, int channels,
                                   const SamplePlan& plan, uint8_t* out,
                                   TransformScratch* scratch) const {
  SHARDPACK_RETURN_IF_ERROR(image::ResizeRegionInto(
      pixels, height, width, channels, static_cast<size_t>(width) * channels, plan.x0, plan.y0,
      plan.x1, plan.y1, out_height_, out_width_, filter_, out,
      static_cast<size_t>(out_width_) * channels, &scratch->resize_));
  if (plan.flip) FlipRows(out, out_height_, out_width_, channels);
  return Status::Ok();
}

int SampleTransformer::ShrinkDenominator(const SamplePlan& plan) const {
  if (pass_through()) return 1;
  for (int d = 8; d > 1; d /= 2) {
    if ((plan.y1 - plan.y0) / d >= out_height_ && (plan.x1 - plan.x0) / d >= out_width_) return d;
  }
  return 1;
}

SamplePlan ScalePlan(const SamplePlan& plan, int denominator, int scaled_height, int scaled_width) {
  const float d = static_cast<float>(denominator);
  SamplePlan scaled = plan;
  scaled.denominator = 1;
  scaled.x0 = plan.x0 / d;
  scaled.x1 = std::min(plan.x1 / d, static_cast<float>(scaled_width));
  scaled.y0 = plan.y0 / d;
  scaled.y1 = std::min(plan.y1 / d, static_cast<float>(scaled_height));
  return scaled;
}

}  // namespace shardpack::read
