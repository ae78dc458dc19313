#include "image/png_decoder.h"

#include <png.h>

#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <new>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "image/orientation.h"

namespace shardpack::image {
namespace {

constexpr uint8_t kSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
constexpr size_t kMessageCapacity = 256;

// Everything libpng's callbacks and the guarded steps below share. It is trivially
// destructible and lives in DecodePngRaw's frame, which no longjmp crosses. The steps take
// their inputs from it and leave their results in it rather than in locals, whose values
// would be indeterminate after a longjmp unless volatile.
struct PngState {
  // Input cursor, advanced by ReadCallback.
  const uint8_t* data;
  size_t size;
  size_t offset;

  // Owned by PngReader.
  png_structp png;
  png_infop info;

  // Settings for the steps.
  png_uint_32 max_dimension;
  png_alloc_size_t chunk_malloc_max;
  png_uint_32 chunk_cache_max;
  bool gray_to_rgb;

  // Results of ReadInfoStep.
  png_uint_32 width;
  png_uint_32 height;
  int bit_depth;
  int color_type;
  int interlace;

  // Results of SetUpTransformsStep: the row layout png_read_image produces.
  size_t rowbytes;
  int channels;
  int out_bit_depth;

  // Input of ReadImageStep: one pointer per row into the caller's buffer.
  png_bytepp rows;

  // Error reporting.
  bool truncated;        // ReadCallback ran out of input
  bool user_limit_seen;  // libpng warned that IHDR exceeds png_set_user_limits
  char error[kMessageCapacity];
};
static_assert(std::is_trivially_destructible_v<PngState>);
static_assert(std::is_trivially_copyable_v<PngState>);

// libpng's error callback: keep the message, then unwind to RunGuarded's setjmp. It must
// not return.
[[noreturn]] void ErrorCallback(png_structp png, png_const_charp message) {
  auto* state = static_cast<PngState*>(png_get_error_ptr(png));
  std::snprintf(state->error, sizeof state->error, "%s", message);
  png_longjmp(png, 1);
}

// libpng's warning callback. Warnings are benign by libpng's own classification: ancillary
// chunk CRC errors (chunk dropped), benign errors such as "Too much image data", and the
// per-cause warnings that precede "Invalid IHDR data". The one we look at marks an IHDR over
// png_set_user_limits, so that the error that follows is reported as a limit, not as
// corrupt data. Truncation and critical-chunk CRC errors never come here: they are errors.
void WarningCallback(png_structp png, png_const_charp message) {
  auto* state = static_cast<PngState*>(png_get_error_ptr(png));
  if (std::strstr(message, "exceeds user limit") != nullptr) state->user_limit_seen = true;
}

// libpng's read callback over the bounds-checked cursor. Running out of input is an error,
// never a short read: libpng would otherwise decode garbage.
void ReadCallback(png_structp png, png_bytep out, size_t length) {
  auto* state = static_cast<PngState*>(png_get_io_ptr(png));
  if (length > state->size - state->offset) {
    char message[kMessageCapacity];
    std::snprintf(message, sizeof message,
                  "truncated PNG: needed %zu bytes at byte offset %zu, the input has %zu", length,
                  state->offset, state->size);
    state->truncated = true;
    png_error(png, message);
  }
  std::memcpy(out, state->data + state->offset, length);
  state->offset += length;
}

// The steps: plain C-style functions with only trivially destructible locals, run by
// RunGuarded. Every libpng call that can raise an error is in one of them.

void ReadInfoStep(PngState* s) {
  png_set_user_limits(s->png, s->max_dimension, s->max_dimension);
  png_set_chunk_malloc_max(s->png, s->chunk_malloc_max);
  png_set_chunk_cache_max(s->png, s->chunk_cache_max);
  // libpng's default, pinned: a critical chunk's CRC error fails, an ancillary chunk's drops
  // that chunk. Benign errors are left as libpng's read default has them (warnings);
  // png_set_benign_errors(png, 1) would also turn our own API misuse into warnings.
  png_set_crc_action(s->png, PNG_CRC_ERROR_QUIT, PNG_CRC_WARN_DISCARD);
  // Skip every chunk except IHDR, PLTE, tRNS, IDAT and IEND (num_chunks < 0), then let eXIf
  // back in. gAMA and friends are deliberately ignored: samples are used as stored.
  png_set_keep_unknown_chunks(s->png, PNG_HANDLE_CHUNK_NEVER, nullptr, -1);
  static const png_byte kExif[] = {'e', 'X', 'I', 'f', '\0'};
  png_set_keep_unknown_chunks(s->png, PNG_HANDLE_CHUNK_AS_DEFAULT, kExif, 1);
  png_read_info(s->png, s->info);
  png_get_IHDR(s->png, s->info, &s->width, &s->height, &s->bit_depth, &s->color_type, &s->interlace,
               nullptr, nullptr);
}

void SetUpTransformsStep(PngState* s) {
  // Palette to RGB, gray below 8 bits to 8 bits, tRNS to an alpha channel.
  png_set_expand(s->png);
  if (s->bit_depth == 16) png_set_scale_16(s->png);
  if (s->gray_to_rgb) png_set_gray_to_rgb(s->png);
  png_set_interlace_handling(s->png);
  png_read_update_info(s->png, s->info);
  s->rowbytes = png_get_rowbytes(s->png, s->info);
  s->channels = png_get_channels(s->png, s->info);
  s->out_bit_depth = png_get_bit_depth(s->png, s->info);
}

// Reads up to IEND, so that truncated or missing trailing chunks are errors; eXIf after the
// image data lands in the same info struct.
void ReadImageStep(PngState* s) {
  png_read_image(s->png, s->rows);
  png_read_end(s->png, s->info);
}

// The only setjmp. Nothing in this frame changes after it, and every frame between here and
// ErrorCallback's longjmp is libpng's, a callback's or a step's: none holds an object with a
// non-trivial destructor. Returns false when libpng reported an error (in s->error).
bool RunGuarded(PngState* s, void (*step)(PngState*)) {
  if (setjmp(png_jmpbuf(s->png)) != 0) return false;
  step(s);
  return true;
}

// Owns the libpng read and info structs for one decode; destroys them on every path.
class PngReader {
 public:
  PngReader(const uint8_t* data, size_t size) {
    state_.data = data;
    state_.size = size;
    state_.png =
        png_create_read_struct(PNG_LIBPNG_VER_STRING, &state_, ErrorCallback, WarningCallback);
    if (state_.png == nullptr) return;
    state_.info = png_create_info_struct(state_.png);
    png_set_read_fn(state_.png, &state_, ReadCallback);
  }
  ~PngReader() {
    if (state_.png != nullptr) png_destroy_read_struct(&state_.png, &state_.info, nullptr);
  }
  // libpng holds pointers to state_.
  PngReader(const PngReader&) = delete;
  PngReader& operator=(const PngReader&) = delete;

  bool Created() const { return state_.png != nullptr && state_.info != nullptr; }
  PngState* State() { return &state_; }

 private:
  PngState state_{};
};

uint32_t LoadBigEndian32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

Status CheckSignature(const uint8_t* data, size_t size) {
  if (size == 0) return CorruptionError("not a PNG file: the input is empty");
  if (size < sizeof kSignature) {
    if (std::memcmp(data, kSignature, size) == 0) {
      return CorruptionError("truncated PNG: " + std::to_string(size) +
                             " bytes, shorter than the 8-byte PNG signature");
    }
    return CorruptionError("not a PNG file: no PNG signature");
  }
  if (std::memcmp(data, kSignature, sizeof kSignature) != 0) {
    return CorruptionError("not a PNG file: no PNG signature");
  }
  return Status::Ok();
}

// Walks the chunk headers up to IEND before libpng sees the data. libpng 1.6.39 reports a
// chunk longer than png_set_chunk_malloc_max only as a benign error (a warning), then
// allocates an eXIf chunk's declared length before reading it: a few bytes could make it
// reserve 2 GiB. eXIf is the only ancillary chunk kept in memory (all others are skipped),
// so it is the one held to png_chunk_malloc_max here; and any chunk whose declared length
// runs past the input is reported as truncation before libpng allocates anything for it.
Status CheckChunkLengths(const uint8_t* data, size_t size, const DecodeLimits& limits) {
  constexpr uint32_t kMaxLength = 0x7fffffff;  // PNG's 2^31 - 1; libpng reports more
  for (size_t at = sizeof kSignature; size - at >= 8;) {
    const uint32_t length = LoadBigEndian32(data + at);
    if (length > kMaxLength) return Status::Ok();
    const uint8_t* type = data + at + 4;
    const auto name = [type] { return std::string(reinterpret_cast<const char*>(type), 4); };
    if (uint64_t{length} + 4 > size - at - 8) {
      return CorruptionError("truncated PNG: chunk '" + name() + "' at byte offset " +
                             std::to_string(at) + " declares " + std::to_string(length) +
                             " bytes, the input has " + std::to_string(size));
    }
    if (std::memcmp(type, "eXIf", 4) == 0 && limits.png_chunk_malloc_max != 0 &&
        length > limits.png_chunk_malloc_max) {
      return ResourceExhaustedError("PNG chunk 'eXIf' at byte offset " + std::to_string(at) +
                                    " of " + std::to_string(length) +
                                    " bytes exceeds png_chunk_malloc_max " +
                                    std::to_string(limits.png_chunk_malloc_max));
    }
    if (std::memcmp(type, "IEND", 4) == 0) break;
    at += size_t{12} + length;
  }
  return Status::Ok();
}

// Turns the error libpng reported into a Status.
Status LibpngError(const PngState& s, const DecodeLimits& limits) {
  if (s.truncated) return CorruptionError(s.error);
  const std::string where =
      " (at byte offset " + std::to_string(s.offset) + " of " + std::to_string(s.size) + ")";
  if (s.user_limit_seen && s.size >= 24) {  // IHDR, the first chunk, is complete
    return ResourceExhaustedError("PNG IHDR: " + std::to_string(LoadBigEndian32(s.data + 16)) +
                                  "x" + std::to_string(LoadBigEndian32(s.data + 20)) +
                                  " exceeds max_dimension " + std::to_string(limits.max_dimension) +
                                  " (libpng: " + s.error + ")");
  }
  // A libpng built with benign errors as errors, or a release that makes this one an error:
  // CheckChunkLengths has already reported any chunk longer than the input, so this is a
  // limit, not garbage.
  if (std::strstr(s.error, "chunk data is too large") != nullptr) {
    return ResourceExhaustedError("PNG chunk over png_chunk_malloc_max " +
                                  std::to_string(limits.png_chunk_malloc_max) +
                                  ": libpng: " + s.error + where);
  }
  return CorruptionError(std::string("libpng: ") + s.error + where);
}

Status CheckDimensions(const PngState& s, const DecodeLimits& limits) {
  const std::string size = std::to_string(s.width) + "x" + std::to_string(s.height);
  if (s.width > static_cast<uint64_t>(limits.max_dimension) ||
      s.height > static_cast<uint64_t>(limits.max_dimension)) {
    return ResourceExhaustedError("PNG IHDR: " + size + " exceeds max_dimension " +
                                  std::to_string(limits.max_dimension));
  }
  const uint64_t pixels = uint64_t{s.width} * s.height;
  if (pixels > limits.max_pixels) {
    return ResourceExhaustedError("PNG IHDR: " + size + " is " + std::to_string(pixels) +
                                  " pixels, over max_pixels " + std::to_string(limits.max_pixels));
  }
  return Status::Ok();
}

uint8_t Composite(uint32_t c, uint32_t a, uint32_t background) {
  return static_cast<uint8_t>((c * a + background * (255 - a) + 127) / 255);
}

// Converts `count` pixels of in_channels (1 gray, 2 gray+alpha, 3 RGB, 4 RGBA) to
// out_channels (1 or 3) in place. Pixel i is read before it is written and its output never
// reaches past its input because out_channels <= in_channels.
void ConvertInPlace(uint8_t* p, size_t count, int in_channels, int out_channels,
                    const uint8_t background[3]) {
  const uint32_t bg_r = background[0], bg_g = background[1], bg_b = background[2];
  const uint32_t bg_luma = Luma601(bg_r, bg_g, bg_b);
  const uint8_t* in = p;
  uint8_t* out = p;
  if (out_channels == 3) {
    if (in_channels != 4) return;  // RGB already
    for (size_t i = 0; i < count; ++i, in += 4, out += 3) {
      const uint32_t r = in[0], g = in[1], b = in[2], a = in[3];
      out[0] = Composite(r, a, bg_r);
      out[1] = Composite(g, a, bg_g);
      out[2] = Composite(b, a, bg_b);
    }
    return;
  }
  switch (in_channels) {
    case 2:
      for (size_t i = 0; i < count; ++i, in += 2, ++out) {
        const uint32_t g = in[0], a = in[1];
        *out = Composite(g, a, bg_luma);
      }
      break;
    case 3:
      for (size_t i = 0; i < count; ++i, in += 3, ++out) *out = Luma601(in[0], in[1], in[2]);
      break;
    case 4:
      for (size_t i = 0; i < count; ++i, in += 4, ++out) {
        const uint32_t r = in[0], g = in[1], b = in[2], a = in[3];
        *out = Luma601(Composite(r, a, bg_r), Composite(g, a, bg_g), Composite(b, a, bg_b));
      }
      break;
    default:  // gray already
      break;
  }
}

}  // namespace

namespace {

// Where DecodeInto puts the pixels: exactly height x width x options.channels at `dst`
// (DecodePngExact), or, with dst null, an Image of whatever size the file has.
struct Destination {
  int height = 0;
  int width = 0;
  uint8_t* dst = nullptr;
};

// The arguments DecodeInto refuses before it looks at the data.
Status CheckArguments(const uint8_t* data, size_t size, const DecodeOptions& options) {
  if (options.channels != 1 && options.channels != 3) {
    return InvalidArgumentError("PNG decode: channels must be 1 or 3, not " +
                                std::to_string(options.channels));
  }
  if (options.limits.max_dimension <= 0) {
    return InvalidArgumentError("PNG decode: max_dimension must be positive, not " +
                                std::to_string(options.limits.max_dimension));
  }
  if (data == nullptr && size != 0) return InvalidArgumentError("PNG decode: null data");
  return Status::Ok();
}

// With `to.dst` set, the size in the header (ReadInfoStep done) must be the one the
// caller's record gives.
Status CheckHeaderSize(const PngState& s, const Destination& to) {
  if (to.dst == nullptr || (s.height == static_cast<png_uint_32>(to.height) &&
                            s.width == static_cast<png_uint_32>(to.width))) {
    return Status::Ok();
  }
  return CorruptionError("PNG: " + std::to_string(s.height) + "x" + std::to_string(s.width) +
                         " in its header, the record says " + std::to_string(to.height) + "x" +
                         std::to_string(to.width));
}

// The rows SetUpTransformsStep set up are what ConvertInPlace expects: gray (+ alpha) or
// RGB (+ alpha), 8 bits, packed.
Status CheckRowLayout(const PngState& s) {
  const int color_channels = (s.color_type & PNG_COLOR_MASK_COLOR) != 0 || s.gray_to_rgb ? 3 : 1;
  if (s.out_bit_depth == 8 && (s.channels == color_channels || s.channels == color_channels + 1) &&
      s.rowbytes == size_t{s.width} * s.channels) {
    return Status::Ok();
  }
  return InternalError("libpng: unexpected row layout: " + std::to_string(s.channels) +
                       " channels of " + std::to_string(s.out_bit_depth) + " bits, " +
                       std::to_string(s.rowbytes) + " bytes per row of " + std::to_string(s.width) +
                       " pixels");
}

// The orientation in the eXIf chunk, if the file has one (ReadImageStep done).
void ReadExifOrientation(const PngState& s, int* exif_orientation) {
  if (exif_orientation == nullptr) return;
  png_uint_32 exif_size = 0;
  png_bytep exif = nullptr;
  if (png_get_eXIf_1(s.png, s.info, &exif_size, &exif) != 0) {
    *exif_orientation = TiffOrientation(exif, exif_size);
  }
}

// `image`'s pixels, as libpng decoded them, converted to options.channels: copied to
// `to.dst` when set (and an empty Image returned), else returned as the Image.
StatusOr<Image> FinishConverted(const PngState& s, const DecodeOptions& options, Image image,
                                const Destination& to) {
  const size_t pixel_count = size_t{s.width} * s.height;
  ConvertInPlace(image.pixels.data(), pixel_count, s.channels, options.channels,
                 options.background);
  image.pixels.resize(pixel_count * options.channels);
  if (to.dst != nullptr) {
    std::memcpy(to.dst, image.pixels.data(), image.pixels.size());
    return Image{};
  }
  image.width = static_cast<int>(s.width);
  image.height = static_cast<int>(s.height);
  image.channels = options.channels;
  return image;
}

// The decode behind DecodePngRaw and DecodePngExact. With `to.dst` set, the pixels go
// there and the returned Image is empty.
StatusOr<Image> DecodeInto(const uint8_t* data, size_t size, const DecodeOptions& options,
                           int* exif_orientation, const Destination& to) {
  if (exif_orientation != nullptr) *exif_orientation = 1;
  const DecodeLimits& limits = options.limits;
  SHARDPACK_RETURN_IF_ERROR(CheckArguments(data, size, options));
  SHARDPACK_RETURN_IF_ERROR(CheckSignature(data, size));
  SHARDPACK_RETURN_IF_ERROR(CheckChunkLengths(data, size, limits));

  PngReader reader(data, size);
  if (!reader.Created()) return InternalError("libpng: cannot create the read structures");
  PngState* s = reader.State();
  s->max_dimension = static_cast<png_uint_32>(limits.max_dimension);
  s->chunk_malloc_max = static_cast<png_alloc_size_t>(limits.png_chunk_malloc_max);
  s->chunk_cache_max = limits.png_chunk_cache_max;

  // Header phase: IHDR and the chunks before the image data; no pixel memory yet.
  if (!RunGuarded(s, ReadInfoStep)) return LibpngError(*s, limits);
  SHARDPACK_RETURN_IF_ERROR(CheckHeaderSize(*s, to));
  SHARDPACK_RETURN_IF_ERROR(CheckDimensions(*s, limits));
  s->gray_to_rgb = options.channels == 3 && (s->color_type & PNG_COLOR_MASK_COLOR) == 0;
  if (!RunGuarded(s, SetUpTransformsStep)) return LibpngError(*s, limits);
  SHARDPACK_RETURN_IF_ERROR(CheckRowLayout(*s));
  const uint64_t buffer_bytes = uint64_t{s->rowbytes} * s->height;
  // Rows that need no conversion go straight to the destination.
  const bool direct = to.dst != nullptr && s->channels == options.channels;
  if (!direct && buffer_bytes > limits.max_memory_bytes) {
    return ResourceExhaustedError("PNG " + std::to_string(s->width) + "x" +
                                  std::to_string(s->height) + ": the decode buffer of " +
                                  std::to_string(buffer_bytes) + " bytes exceeds " +
                                  "max_memory_bytes " + std::to_string(limits.max_memory_bytes));
  }

  // All pixel memory is allocated here, outside any guarded step.
  Image image;
  std::vector<png_bytep> rows;
  try {
    if (!direct) image.pixels.resize(buffer_bytes);
    rows.resize(s->height);
  } catch (const std::bad_alloc&) {
    return ResourceExhaustedError("PNG: cannot allocate " + std::to_string(buffer_bytes) +
                                  " bytes for the decode buffer");
  }
  uint8_t* buffer = direct ? to.dst : image.pixels.data();
  for (png_uint_32 y = 0; y < s->height; ++y) rows[y] = buffer + y * s->rowbytes;
  s->rows = rows.data();

  // Decode phase: the image data, then the chunks up to IEND.
  if (!RunGuarded(s, ReadImageStep)) return LibpngError(*s, limits);
  ReadExifOrientation(*s, exif_orientation);
  if (direct) return Image{};
  return FinishConverted(*s, options, std::move(image), to);
}

}  // namespace

StatusOr<Image> DecodePngRaw(const uint8_t* data, size_t size, const DecodeOptions& options,
                             int* exif_orientation) {
  return DecodeInto(data, size, options, exif_orientation, {});
}

Status DecodePngExact(const uint8_t* data, size_t size, const DecodeOptions& options, int height,
                      int width, uint8_t* dst) {
  if (dst == nullptr || height <= 0 || width <= 0) {
    return InvalidArgumentError("PNG exact decode: no destination, or a size " +
                                std::to_string(height) + "x" + std::to_string(width));
  }
  return DecodeInto(data, size, options, nullptr, {height, width, dst}).status();
}

StatusOr<Image> DecodePng(const uint8_t* data, size_t size, const DecodeOptions& options) {
  int orientation = 1;
  SHARDPACK_ASSIGN_OR_RETURN(Image image, DecodePngRaw(data, size, options, &orientation));
  if (!options.apply_orientation) return image;
  return ApplyOrientation(std::move(image), orientation);
}

}  // namespace shardpack::image
