#include "image/jpeg_decoder.h"

#include <algorithm>
#include <climits>
#include <csetjmp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <new>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

// jpeglib.h needs size_t and FILE declared before it.
#include <jpeglib.h>

#include <jerror.h>

#include "image/jpeg_memory.h"
#include "image/orientation.h"

namespace shardpack::image {
namespace {

// libjpeg's message code names ("JWRN_JPEG_EOF"), indexed by J_MESSAGE_CODE, built from
// jerror.h's own list the way jerror.c builds the message texts.
#define JMESSAGE(code, string) #code,
constexpr const char* kMessageNames[] = {
#include <jerror.h>
};
#undef JMESSAGE
static_assert(std::size(kMessageNames) == JMSG_LASTMSGCODE);

const char* MessageName(int code) {
  if (code < 0 || static_cast<size_t>(code) >= std::size(kMessageNames)) return "JMSG_UNKNOWN";
  return kMessageNames[code];
}

// Why a guarded step stopped early.
enum class Failure : int {
  kNone = 0,
  kLibjpeg,       // libjpeg's error_exit, or a warning (emit_message level -1)
  kTooManyScans,  // the progress monitor saw input_scan_number > max_scans
  kInternal,      // libjpeg produced something other than what was configured
};

// Everything libjpeg touches during a decode. Plain C data, no constructors or
// destructors, so that a longjmp over the frames that use it skips nothing; it is kept
// with its libjpeg decompressor from one decode to the next (KeptSessions) and lent to
// a JpegDecompressor, which outlives every guarded step.
struct Session {
  jpeg_decompress_struct cinfo;
  jpeg_error_mgr err;
  jpeg_progress_mgr progress;
  std::jmp_buf jump;
  bool armed;  // a RunGuarded frame is live: longjmp is allowed
  bool ready;  // cinfo is created and set up (CreateStep), and may decode again

  const uint8_t* data;
  size_t size;
  int max_scans;
  long max_memory;

  // Outcome of the last step.
  Failure failure;
  int msg_code;
  bool warning;
  size_t offset;  // input byte offset of libjpeg's source manager at the failure
  int scan;       // input_scan_number at the failure
  unsigned row;   // output_scanline at the failure
  char message[JMSG_LENGTH_MAX];

  // Decode step parameters, set by the C++ layer before the step.
  J_COLOR_SPACE out_space;  // what libjpeg produces
  int out_channels;         // what the Image holds: 1 or 3
  bool cmyk;                // libjpeg produces CMYK; converted here row by row
  bool adobe_inverted;      // CMYK is Adobe (Photoshop) inverted
  unsigned scale_denom;
  bool block_smoothing;  // libjpeg's do_block_smoothing (its default, TRUE, but for a
                         // stream without some AC scans: WithoutDcOnlyAcScans)
  // The part decoded: libjpeg's output columns [crop_x, crop_x + crop_width) (set to the
  // iMCU-aligned ones by jpeg_crop_scanline) and rows [row_begin, row_end). Of those,
  // rows [keep_y0, keep_y1) are stored in `pixels`, all crop_width columns of them, of
  // which columns [keep_x0, keep_x1) are the ones asked for.
  JDIMENSION crop_x, crop_width, row_begin, row_end;
  JDIMENSION keep_x0, keep_x1, keep_y0, keep_y1;
  uint8_t* pixels;  // (keep_y1 - keep_y0) * crop_width * out_channels bytes
  // kBatchRows rows of crop_width pixels as libjpeg gives them (4 bytes each when cmyk,
  // else out_channels), for the rows not read straight into `pixels`.
  uint8_t* spare_rows;
};
static_assert(std::is_trivially_destructible_v<Session>);

Session* SessionOf(j_common_ptr cinfo) { return static_cast<Session*>(cinfo->client_data); }

// Records where the decoder stood; called only from libjpeg callbacks.
void NoteFailure(Session* s, Failure failure) {
  s->failure = failure;
  const jpeg_source_mgr* src = s->cinfo.src;
  s->offset = s->size;
  if (src != nullptr && src->bytes_in_buffer <= s->size) s->offset = s->size - src->bytes_in_buffer;
  s->scan = s->cinfo.input_scan_number;
  s->row = s->cinfo.output_scanline;
}

[[noreturn]] void Jump(Session* s) {
  // Every libjpeg call runs inside RunGuarded; a call outside one is a bug here, and
  // returning to libjpeg from error_exit is not allowed.
  if (!s->armed) std::abort();
  s->armed = false;
  std::longjmp(s->jump, 1);
}

// libjpeg's error_exit: must not return.
void ErrorExit(j_common_ptr cinfo) {
  Session* s = SessionOf(cinfo);
  NoteFailure(s, Failure::kLibjpeg);
  s->msg_code = cinfo->err->msg_code;
  s->warning = false;
  (*cinfo->err->format_message)(cinfo, s->message);
  Jump(s);
}

// Warnings (msg_level < 0) are fatal, as djpeg -strict makes them: libjpeg reports a
// truncated file or a corrupt entropy segment only as a warning and fills the rest of
// the image with grey. Trace messages (msg_level >= 0) are dropped.
void EmitMessage(j_common_ptr cinfo, int msg_level) {
  if (msg_level >= 0) return;
  Session* s = SessionOf(cinfo);
  NoteFailure(s, Failure::kLibjpeg);
  s->msg_code = cinfo->err->msg_code;
  s->warning = true;
  (*cinfo->err->format_message)(cinfo, s->message);
  Jump(s);
}

void OutputMessage(j_common_ptr) {}

// The scan limit of djpeg -maxscans (0: none): a progressive JPEG can hold thousands of
// tiny scans, each of which costs a pass over the whole coefficient buffer (LJT-01-003).
void ProgressMonitor(j_common_ptr cinfo) {
  Session* s = SessionOf(cinfo);
  if (s->max_scans > 0 && s->cinfo.input_scan_number > s->max_scans) {
    NoteFailure(s, Failure::kTooManyScans);
    Jump(s);
  }
}

// The only setjmp of the JPEG decoder. Runs one step of libjpeg calls; returns false
// when libjpeg (or a callback above) jumped out, with the reason in the session.
// Neither this frame nor any step has a local that is modified after setjmp or that has
// a non-trivial destructor; all state lives in *s.
bool RunGuarded(Session* s, void (*step)(Session*)) {
  s->failure = Failure::kNone;
  s->armed = true;
  if (setjmp(s->jump) != 0) return false;
  step(s);
  s->armed = false;
  return s->failure == Failure::kNone;
}

// The steps. Each runs inside RunGuarded and holds only trivially destructible locals.

// Readies the decompressor for s->data: creates it the first time, and otherwise takes
// it back to what a new one would be for this stream.
void CreateStep(Session* s) {
  auto* common = reinterpret_cast<j_common_ptr>(&s->cinfo);
  if (!s->ready) {
    jpeg_create_decompress(&s->cinfo);
    // jpeg_create_decompress zeroes everything but err and client_data.
    s->cinfo.progress = &s->progress;
    // Arenas kept from one image to the next: no heap allocation per decode once a
    // decompressor has seen an image of the size (jpeg_memory.h).
    InstallJpegArenaMemory(common);
    jpeg_mem_src(&s->cinfo, s->data, static_cast<unsigned long>(s->size));
    jpeg_save_markers(&s->cinfo, JPEG_APP0 + 1, 0xffff);
    MarkJpegArenaSetUp(common);
    s->ready = true;
  } else {
    // libjpeg keeps the quantisation and Huffman tables of the last image (an abbreviated
    // stream may use them); a stream without its own tables must fail here as it does in
    // a new decompressor, not decode with another image's.
    for (auto*& table : s->cinfo.quant_tbl_ptrs) table = nullptr;
    for (auto*& table : s->cinfo.dc_huff_tbl_ptrs) table = nullptr;
    for (auto*& table : s->cinfo.ac_huff_tbl_ptrs) table = nullptr;
    ResetJpegArenaTables(common);
    // What a failure report reads (NoteFailure, FailureStatus) and libjpeg sets only once
    // the decode gets there: zero in a new decompressor, the last image's here.
    s->cinfo.output_width = 0;
    s->cinfo.output_height = 0;
    s->cinfo.output_scanline = 0;
    jpeg_mem_src(&s->cinfo, s->data, static_cast<unsigned long>(s->size));
  }
  s->cinfo.mem->max_memory_to_use = s->max_memory;
}

void HeaderStep(Session* s) {
  // require_image = TRUE: a tables-only stream is an error, not JPEG_HEADER_TABLES_ONLY.
  jpeg_read_header(&s->cinfo, TRUE);
}

void ConfigureStep(Session* s) {
  s->cinfo.out_color_space = s->out_space;
  s->cinfo.scale_num = 1;
  s->cinfo.scale_denom = s->scale_denom;
  s->cinfo.do_block_smoothing = s->block_smoothing ? TRUE : FALSE;
  jpeg_calc_output_dimensions(&s->cinfo);
}

// Starts the decompression and positions it at row_begin of columns crop_x..: everything
// before the first row is read. Sets crop_x and crop_width to what libjpeg decodes.
void StartStep(Session* s) {
  jpeg_decompress_struct* cinfo = &s->cinfo;
  const JDIMENSION width = cinfo->output_width;
  const JDIMENSION height = cinfo->output_height;
  jpeg_start_decompress(cinfo);
  const int components = s->cmyk ? 4 : s->out_channels;
  if (cinfo->output_width != width || cinfo->output_height != height ||
      cinfo->output_components != components) {
    s->failure = Failure::kInternal;
    return;
  }
  if (s->crop_x > 0 || s->crop_width < width) {
    // Moves crop_x down to an iMCU boundary and widens crop_width to keep the end.
    jpeg_crop_scanline(cinfo, &s->crop_x, &s->crop_width);
  }
  if (s->row_begin > 0 && jpeg_skip_scanlines(cinfo, s->row_begin) != s->row_begin) {
    s->failure = Failure::kInternal;
  }
}

// Rows read per jpeg_read_scanlines call (ReadStep), and the bytes of one spare row.
constexpr JDIMENSION kBatchRows = 16;
size_t SpareRowBytes(JDIMENSION crop_width, bool cmyk, int out_channels) {
  return static_cast<size_t>(crop_width) * (cmyk ? 4 : out_channels);
}

// One decoded CMYK row (crop_width pixels of 4 bytes, as libjpeg gives them) to
// out_channels bytes per pixel at `out`.
void ConvertCmykRow(const Session* s, const uint8_t* row, uint8_t* out) {
  for (JDIMENSION x = 0; x < s->crop_width; ++x, out += s->out_channels) {
    const uint8_t* ink = row + 4 * static_cast<size_t>(x);
    const unsigned c = ink[0], m = ink[1], y = ink[2], k = ink[3];
    // Adobe (Photoshop) CMYK is stored inverted: 255 means no ink.
    unsigned r, g, b;
    if (s->adobe_inverted) {
      r = (c * k + 127) / 255;
      g = (m * k + 127) / 255;
      b = (y * k + 127) / 255;
    } else {
      r = ((255 - c) * (255 - k) + 127) / 255;
      g = ((255 - m) * (255 - k) + 127) / 255;
      b = ((255 - y) * (255 - k) + 127) / 255;
    }
    if (s->out_channels == 3) {
      out[0] = static_cast<uint8_t>(r);
      out[1] = static_cast<uint8_t>(g);
      out[2] = static_cast<uint8_t>(b);
    } else {
      out[0] = Luma601(r, g, b);
    }
  }
}

// Reads rows row_begin..row_end, keeps the kept part, skips the rest of the image and
// finishes, so that the whole entropy-coded data is read and checked. Up to kBatchRows
// rows per jpeg_read_scanlines call: one row per call cost 2-3% of a conversion in
// libjpeg's per-call overhead (same bytes either way).
void ReadStep(Session* s) {
  jpeg_decompress_struct* cinfo = &s->cinfo;
  const JDIMENSION height = cinfo->output_height;
  // Kept rows go straight into the pixels, whole (the caller's window starts keep_x0 -
  // crop_x in: cutting the columns out was a copy of every row, 1.7% of a conversion),
  // unless they need converting (CMYK).
  const size_t stride = static_cast<size_t>(s->crop_width) * s->out_channels;
  const size_t spare_stride = SpareRowBytes(s->crop_width, s->cmyk, s->out_channels);
  while (cinfo->output_scanline < s->row_end) {
    const JDIMENSION y0 = cinfo->output_scanline;
    const JDIMENSION n = std::min<JDIMENSION>(kBatchRows, s->row_end - y0);
    JSAMPROW rows[kBatchRows];
    for (JDIMENSION i = 0; i < n; ++i) {
      const JDIMENSION y = y0 + i;
      const bool keep = y >= s->keep_y0 && y < s->keep_y1;
      rows[i] = !s->cmyk && keep ? s->pixels + static_cast<size_t>(y - s->keep_y0) * stride
                                 : s->spare_rows + i * spare_stride;
    }
    const JDIMENSION got = jpeg_read_scanlines(cinfo, rows, n);
    if (got == 0) {
      // Only a suspending data source returns 0 lines; the memory source never does.
      s->failure = Failure::kInternal;
      return;
    }
    if (!s->cmyk) continue;
    for (JDIMENSION i = 0; i < got; ++i) {
      const JDIMENSION y = y0 + i;
      if (y < s->keep_y0 || y >= s->keep_y1) continue;
      ConvertCmykRow(s, rows[i], s->pixels + static_cast<size_t>(y - s->keep_y0) * stride);
    }
  }
  // Skipping to the very end would mark the input finished without reading it (libjpeg-
  // turbo's shortcut), so a file cut short after the region would pass: skip all but the
  // last row, which entropy-decodes the skipped iMCU rows, and read the last one.
  if (cinfo->output_scanline + 1 < height) {
    const JDIMENSION rest = height - 1 - cinfo->output_scanline;
    if (jpeg_skip_scanlines(cinfo, rest) != rest) {
      s->failure = Failure::kInternal;
      return;
    }
  }
  if (cinfo->output_scanline < height) {
    JSAMPROW row = s->spare_rows;
    if (jpeg_read_scanlines(cinfo, &row, 1) != 1) {
      s->failure = Failure::kInternal;
      return;
    }
  }
  jpeg_finish_decompress(cinfo);
}

void DestroyStep(Session* s) { jpeg_destroy_decompress(&s->cinfo); }

// Returns the decompressor to its idle state after a decode, finished or failed (as
// libjpeg allows after an error), freeing the image's pool.
void AbortStep(Session* s) { jpeg_abort_decompress(&s->cinfo); }

// A new Session, its decompressor not yet created; nullptr when out of memory.
Session* NewSession() {
  auto* s = static_cast<Session*>(std::calloc(1, sizeof(Session)));
  if (s == nullptr) return nullptr;
  // Zeroed: jpeg_destroy_decompress is then safe even when CreateStep never ran or failed.
  s->cinfo.err = jpeg_std_error(&s->err);
  s->err.error_exit = ErrorExit;
  s->err.emit_message = EmitMessage;
  s->err.output_message = OutputMessage;
  s->progress.progress_monitor = ProgressMonitor;
  s->cinfo.client_data = s;
  return s;
}

// Destroys the decompressor through a guarded step, so that no libjpeg call ever runs
// without a live setjmp, and frees the Session.
void DeleteSession(Session* s) {
  if (s == nullptr) return;
  RunGuarded(s, DestroyStep);
  std::free(s);
}

// The idle decompressors of this thread: one decompressor per thread, reused by its
// decodes; a second for the decode of a reduced progressive stream that runs inside
// another (DecodeJpegInto).
struct KeptSessions {
  Session* idle[2] = {nullptr, nullptr};
  ~KeptSessions() {
    for (Session* s : idle) DeleteSession(s);
  }
  Session* Take() {
    for (Session*& s : idle) {
      if (s != nullptr) return std::exchange(s, nullptr);
    }
    return NewSession();
  }
  // Keeps `s` for the next decode if it can decode again and there is room.
  void Give(Session* s) {
    if (s->ready && RunGuarded(s, AbortStep)) {
      for (Session*& slot : idle) {
        if (slot == nullptr) {
          slot = s;
          return;
        }
      }
    }
    DeleteSession(s);
  }
};
thread_local KeptSessions t_kept_sessions;

// Lends this thread's decompressor and its Session to one decode, set for `data` and
// the limits; Run(CreateStep) readies it.
class JpegDecompressor {
 public:
  JpegDecompressor(const uint8_t* data, size_t size, const DecodeLimits& limits)
      : s_(t_kept_sessions.Take()) {
    if (s_ == nullptr) return;
    Session& s = *s_;
    s.data = data;
    s.size = size;
    s.block_smoothing = true;
    s.max_scans = limits.max_scans;
    s.max_memory = limits.max_memory_bytes > static_cast<uint64_t>(LONG_MAX)
                       ? LONG_MAX
                       : static_cast<long>(limits.max_memory_bytes);
    s.failure = Failure::kNone;
    s.msg_code = 0;
    s.warning = false;
    s.offset = 0;
    s.scan = 0;
    s.row = 0;
    s.message[0] = '\0';
    s.out_space = JCS_UNKNOWN;
    s.out_channels = 0;
    s.cmyk = false;
    s.adobe_inverted = false;
    s.scale_denom = 1;
    s.crop_x = s.crop_width = s.row_begin = s.row_end = 0;
    s.keep_x0 = s.keep_x1 = s.keep_y0 = s.keep_y1 = 0;
    s.pixels = nullptr;
    s.spare_rows = nullptr;
  }
  ~JpegDecompressor() {
    if (s_ != nullptr) t_kept_sessions.Give(s_);
  }
  JpegDecompressor(const JpegDecompressor&) = delete;
  JpegDecompressor& operator=(const JpegDecompressor&) = delete;

  // Runs `step`; a non-OK Status describes why it stopped.
  Status Run(void (*step)(Session*)) {
    if (s_ == nullptr) return ResourceExhaustedError("JPEG: cannot allocate a decompressor");
    if (RunGuarded(s_, step)) return Status::Ok();
    return FailureStatus();
  }
  // Valid after Run(CreateStep) succeeded.
  Session& Get() { return *s_; }

 private:
  Status FailureStatus() const;

  Session* s_;
};

Status JpegDecompressor::FailureStatus() const {
  const Session& s = *s_;
  // libjpeg's entropy decoders advance the source position once per MCU, so the offset
  // can lag the byte that failed by up to one MCU.
  std::string where = " near byte offset " + std::to_string(s.offset);
  if (s.scan > 0) where += ", scan " + std::to_string(s.scan);
  if (s.cinfo.output_height > 0 && s.row > 0) {
    where +=
        ", output row " + std::to_string(s.row) + " of " + std::to_string(s.cinfo.output_height);
  }
  switch (s.failure) {
    case Failure::kTooManyScans:
      return ResourceExhaustedError("JPEG: more than max_scans = " + std::to_string(s.max_scans) +
                                    " scans" + where);
    case Failure::kInternal:
      return InternalError("JPEG: libjpeg returned output other than configured" + where);
    case Failure::kNone:
    case Failure::kLibjpeg:
      break;
  }
  std::string message = std::string("JPEG: ") + s.message + " (" + MessageName(s.msg_code) +
                        (s.warning ? ", a libjpeg warning treated as an error)" : ")") + where;
  switch (s.msg_code) {
    case JERR_NO_BACKING_STORE:
      // libjpeg's working memory would exceed max_memory_to_use.
      return ResourceExhaustedError(
          message + " (over max_memory_bytes = " + std::to_string(s.max_memory) + ")");
    case JERR_OUT_OF_MEMORY:
    case JERR_IMAGE_TOO_BIG:
    case JERR_WIDTH_OVERFLOW:
      return ResourceExhaustedError(message);
    case JERR_NO_SOI:
    case JERR_BAD_PRECISION:
    case JERR_SOF_UNSUPPORTED:
    case JERR_NOT_COMPILED:
    case JERR_CONVERSION_NOTIMPL:
      return NotSupportedError(message);
    default:
      return CorruptionError(message);
  }
}

int OrientationFromMarkers(const jpeg_decompress_struct& cinfo) {
  for (jpeg_saved_marker_ptr m = cinfo.marker_list; m != nullptr; m = m->next) {
    if (m->marker != JPEG_APP0 + 1) continue;
    static constexpr uint8_t kExif[] = {'E', 'x', 'i', 'f', 0, 0};
    if (m->data_length < sizeof kExif || std::memcmp(m->data, kExif, sizeof kExif) != 0) {
      continue;  // XMP and other APP1 payloads
    }
    return ParseExifOrientation(m->data, m->data_length);
  }
  return 1;
}

Status CheckOptions(const DecodeOptions& options) {
  if (options.channels != 1 && options.channels != 3) {
    return InvalidArgumentError("JPEG: channels must be 1 or 3, got " +
                                std::to_string(options.channels));
  }
  if (options.min_height < 0 || options.min_width < 0) {
    return InvalidArgumentError("JPEG: negative minimum size " +
                                std::to_string(options.min_height) + "x" +
                                std::to_string(options.min_width));
  }
  return Status::Ok();
}

Status CheckLimits(const jpeg_decompress_struct& cinfo, const DecodeLimits& limits) {
  const uint64_t width = cinfo.image_width, height = cinfo.image_height;
  const std::string size = std::to_string(width) + "x" + std::to_string(height);
  if (width > static_cast<uint64_t>(limits.max_dimension) ||
      height > static_cast<uint64_t>(limits.max_dimension)) {
    return ResourceExhaustedError("JPEG: image " + size + " has a side over max_dimension = " +
                                  std::to_string(limits.max_dimension));
  }
  if (width * height > limits.max_pixels) {
    return ResourceExhaustedError(
        "JPEG: image " + size + " has " + std::to_string(width * height) +
        " pixels, over max_pixels = " + std::to_string(limits.max_pixels));
  }
  return Status::Ok();
}

// Picks what libjpeg should output for the source colour space.
Status ChooseColour(const jpeg_decompress_struct& cinfo, int channels, Session* s) {
  s->out_channels = channels;
  s->cmyk = false;
  s->adobe_inverted = false;
  switch (cinfo.jpeg_color_space) {
    case JCS_GRAYSCALE:
    case JCS_YCbCr:
    case JCS_RGB:
      // libjpeg-turbo converts each of these to RGB and to gray itself.
      s->out_space = channels == 3 ? JCS_RGB : JCS_GRAYSCALE;
      return Status::Ok();
    case JCS_CMYK:
    case JCS_YCCK:
      // libjpeg turns YCCK into CMYK; CMYK to RGB is done here (libjpeg has no such
      // conversion), inverted when an Adobe APP14 marker says the file is Adobe's.
      s->out_space = JCS_CMYK;
      s->cmyk = true;
      s->adobe_inverted = cinfo.saw_Adobe_marker;
      return Status::Ok();
    default:
      return NotSupportedError("JPEG: unsupported colour space (J_COLOR_SPACE " +
                               std::to_string(cinfo.jpeg_color_space) + ") with " +
                               std::to_string(cinfo.num_components) + " components");
  }
}

}  // namespace

int ParseExifOrientation(const uint8_t* app1, size_t size) {
  static constexpr uint8_t kExif[] = {'E', 'x', 'i', 'f', 0, 0};
  if (app1 == nullptr || size < sizeof kExif + 8 || std::memcmp(app1, kExif, sizeof kExif) != 0) {
    return 1;
  }
  return TiffOrientation(app1 + sizeof kExif, size - sizeof kExif);
}

int ChooseJpegScaleDenominator(int width, int height, bool transpose, int min_height,
                               int min_width) {
  if (min_height <= 0 && min_width <= 0) return 1;
  if (transpose) std::swap(width, height);
  for (int denom : {8, 4, 2}) {
    // libjpeg rounds scaled sizes up (jdiv_round_up in jpeg_calc_output_dimensions).
    const int w = (width + denom - 1) / denom;
    const int h = (height + denom - 1) / denom;
    if (h >= min_height && w >= min_width) return denom;
  }
  return 1;
}

namespace {

// Whether libjpeg, as configured in `cinfo` (after jpeg_calc_output_dimensions), makes
// component `c` from its DC coefficient alone: an inverse DCT of 1x1 (DCT scaling at 1/8
// of a component at full sampling).
bool DecodedFromDcAlone(const jpeg_component_info& c) {
#if JPEG_LIB_VERSION >= 70
  return c.DCT_h_scaled_size == 1 && c.DCT_v_scaled_size == 1;
#else
  return c.DCT_scaled_size == 1;
#endif
}

// Which scans WithoutDcOnlyAcScans drops, and its count of the scans it has seen.
struct ScanFilter {
  bool dc_only[256] = {};  // by component id: libjpeg makes the component from its DC alone
  int max_scans = 0;       // more scans than this (if positive): give up
  int scans = 0;
};

// Marks in `filter` the components libjpeg makes from their DC alone; whether there is any.
bool MarkDcOnlyComponents(const jpeg_decompress_struct& cinfo, ScanFilter* filter) {
  bool any = false;
  for (int i = 0; i < cinfo.num_components; ++i) {
    const jpeg_component_info& c = cinfo.comp_info[i];
    filter->dc_only[c.component_id & 0xff] = DecodedFromDcAlone(c);
    any = any || filter->dc_only[c.component_id & 0xff];
  }
  return any;
}

// Markers that cannot begin a segment between SOI and EOI: a stuffed 0x00, a second SOI,
// a restart marker outside entropy-coded data.
inline bool IsMisplacedMarker(uint8_t marker) {
  return marker == 0x00 || marker == 0xD8 || (marker >= 0xD0 && marker <= 0xD7);
}

// Whether data[i] (i + 1 < size) starts a marker that ends entropy-coded data: 0xFF
// followed by neither a stuffed 0x00 nor a restart marker.
inline bool EndsEntropyData(const uint8_t* data, size_t i) {
  return data[i] == 0xFF && data[i + 1] != 0x00 && !(data[i + 1] >= 0xD0 && data[i + 1] <= 0xD7);
}

// The SOS segment whose length field is at data + p (`length` bytes, checked to lie in
// the data): Ns, Ns x (Cs, Td/Ta), Ss, Se, Ah/Al, then the scan's data. Sets *end past the
// scan's data, *keep false for a scan `filter` drops; false when the segment is malformed,
// the scan is one past filter->max_scans, or no marker follows the data.
bool ReadScan(const uint8_t* data, size_t size, size_t p, size_t length, ScanFilter* filter,
              size_t* end, bool* keep) {
  if (length < 3) return false;
  const size_t ns = data[p + 2];
  if (ns == 0 || length != 6 + 2 * ns) return false;
  if (filter->max_scans > 0 && ++filter->scans > filter->max_scans) return false;
  const uint8_t ss = data[p + 3 + 2 * ns];
  const uint8_t se = data[p + 4 + 2 * ns];
  const uint8_t ah_al = data[p + 5 + 2 * ns];
  // Dropped: an AC scan (one component, as progressive AC scans are) of a DC-only
  // component. A scan whose parameters are out of range is kept, for libjpeg to refuse.
  const bool well_formed =
      ns == 1 && ss <= se && se <= 63 && (ah_al >> 4) <= 13 && (ah_al & 15) <= 13;
  *keep = ss == 0 || !well_formed || !filter->dc_only[data[p + 3]];
  // The entropy-coded data runs to the next marker.
  for (*end = p + length;; ++*end) {
    if (size - *end < 2) return false;
    if (EndsEntropyData(data, *end)) return true;
  }
}

// A progressive JPEG (`cinfo` configured, header read) without the AC scans of the
// components that libjpeg makes from their DC alone: the same pixels from a fraction of
// the entropy decoding (at 1/8, the AC scans of the luma are most of a progressive file's
// bytes and of its decode time). Every other marker segment and scan is kept as it is.
// Empty when there is nothing to drop, when the file has more than `max_scans` scans (if
// positive), or when the markers do not parse from SOI to EOI (a truncated or malformed
// file): the caller then decodes the whole file, which fails as it would have.
std::string WithoutDcOnlyAcScans(const uint8_t* data, size_t size,
                                 const jpeg_decompress_struct& cinfo, int max_scans) {
  ScanFilter filter;
  filter.max_scans = max_scans;
  if (!MarkDcOnlyComponents(cinfo, &filter)) return {};
  if (size < 4 || data[0] != 0xFF || data[1] != 0xD8) return {};
  std::string out(reinterpret_cast<const char*>(data), 2);
  bool dropped = false;
  size_t p = 2;
  while (p < size) {
    if (data[p] != 0xFF) return {};
    const size_t start = p;
    while (p < size && data[p] == 0xFF) ++p;  // fill bytes
    if (p >= size) return {};
    const uint8_t marker = data[p++];
    if (marker == 0xD9) {  // EOI
      if (!dropped) return {};
      out.append("\xFF\xD9", 2);
      return out;
    }
    if (IsMisplacedMarker(marker)) return {};
    if (size - p < 2) return {};
    const size_t length = (static_cast<size_t>(data[p]) << 8) | data[p + 1];
    if (length < 2 || size - p < length) return {};
    size_t end = p + length;
    bool keep = true;
    if (marker == 0xDA &&  // SOS
        !ReadScan(data, size, p, length, &filter, &end, &keep)) {
      return {};
    }
    if (keep) {
      out.append(reinterpret_cast<const char*>(data + start), end - start);
    } else {
      dropped = true;
    }
    p = end;
  }
  return {};
}

// DecodeJpegRaw, decoding only `needed` of the image (not null) when the image is stored
// upright; *window gets the pixels and where they sit. `whole_stream`: false for the
// stream WithoutDcOnlyAcScans made (decoded without block smoothing, never reduced again).
Status DecodeJpegInto(const uint8_t* data, size_t size, const DecodeOptions& options,
                      const NeededRegion* needed, bool* region_applied, int* exif_orientation,
                      ImageWindow* window, bool whole_stream = true) {
  if (region_applied != nullptr) *region_applied = false;
  if (exif_orientation != nullptr) *exif_orientation = 1;
  SHARDPACK_RETURN_IF_ERROR(CheckOptions(options));
  if (data == nullptr || size == 0) return CorruptionError("JPEG: empty input (0 bytes)");
  if (size < 2 || data[0] != 0xFF || data[1] != 0xD8) {
    char start[48];
    if (size >= 2) {
      std::snprintf(start, sizeof start, "0x%02x 0x%02x", data[0], data[1]);
    } else {
      std::snprintf(start, sizeof start, "0x%02x (1 byte)", data[0]);
    }
    return NotSupportedError(std::string("JPEG: not a JPEG file: starts with ") + start +
                             ", expected the SOI marker 0xff 0xd8");
  }

  JpegDecompressor decompressor(data, size, options.limits);
  SHARDPACK_RETURN_IF_ERROR(decompressor.Run(CreateStep));
  Session& s = decompressor.Get();
  SHARDPACK_RETURN_IF_ERROR(decompressor.Run(HeaderStep));
  const int orientation = OrientationFromMarkers(s.cinfo);
  if (exif_orientation != nullptr) *exif_orientation = orientation;
  SHARDPACK_RETURN_IF_ERROR(CheckLimits(s.cinfo, options.limits));
  SHARDPACK_RETURN_IF_ERROR(ChooseColour(s.cinfo, options.channels, &s));
  const bool transpose = options.apply_orientation && orientation >= 5;
  s.scale_denom = static_cast<unsigned>(ChooseJpegScaleDenominator(
      static_cast<int>(s.cinfo.image_width), static_cast<int>(s.cinfo.image_height), transpose,
      options.min_height, options.min_width));
  s.block_smoothing = whole_stream;
  SHARDPACK_RETURN_IF_ERROR(decompressor.Run(ConfigureStep));
  // A progressive JPEG at 1/8 (what a large photo resized to a small output gets): its
  // full-sampling components come from their DC alone, so their AC scans, most of the
  // file, need not be decoded. The pixels are the whole stream's (tested); what is lost is
  // the check of those scans' entropy-coded data, which cannot change these pixels. Any
  // failure: the whole stream, whose error names offsets in the file itself.
  if (whole_stream && s.cinfo.progressive_mode && s.scale_denom == 8) {
    const std::string reduced = WithoutDcOnlyAcScans(data, size, s.cinfo, options.limits.max_scans);
    if (!reduced.empty() &&
        DecodeJpegInto(reinterpret_cast<const uint8_t*>(reduced.data()), reduced.size(), options,
                       needed, region_applied, exif_orientation, window,
                       /*whole_stream=*/false)
            .ok()) {
      return Status::Ok();
    }
    if (exif_orientation != nullptr) *exif_orientation = orientation;
  }

  const int width = static_cast<int>(s.cinfo.output_width);
  const int height = static_cast<int>(s.cinfo.output_height);
  // Stored upright: the region in output coordinates is the region to decode.
  // Only an upright sequential JPEG is decoded in part. A progressive one is smoothed
  // across blocks while its scans are incomplete (libjpeg's block smoothing reads the
  // neighbouring blocks), so a cropped decode differs from the whole one well inside the
  // edge (found by the fuzzer): it is decoded whole and cut by the caller.
  const bool upright = !options.apply_orientation || orientation == 1;
  const bool windowed = needed != nullptr && *needed && upright && !s.cinfo.progressive_mode;
  if (region_applied != nullptr) *region_applied = windowed;
  const Region keep =
      windowed ? ClampRegion((*needed)(height, width), height, width) : Region{0, 0, width, height};
  // A cropped decode's first and last column and row can differ from the whole decode's
  // (fancy upsampling sees no neighbour there): decode one more where the image goes on.
  const Region decode = {std::max(keep.x0 - 1, 0), std::max(keep.y0 - 1, 0),
                         std::min(keep.x1 + 1, width), std::min(keep.y1 + 1, height)};
  s.crop_x = static_cast<JDIMENSION>(decode.x0);
  s.crop_width = static_cast<JDIMENSION>(decode.x1 - decode.x0);
  s.row_begin = static_cast<JDIMENSION>(decode.y0);
  s.row_end = static_cast<JDIMENSION>(decode.y1);
  s.keep_x0 = static_cast<JDIMENSION>(keep.x0);
  s.keep_x1 = static_cast<JDIMENSION>(keep.x1);
  s.keep_y0 = static_cast<JDIMENSION>(keep.y0);
  s.keep_y1 = static_cast<JDIMENSION>(keep.y1);
  SHARDPACK_RETURN_IF_ERROR(decompressor.Run(StartStep));
  if (s.crop_x > s.keep_x0 || s.crop_x + s.crop_width < s.keep_x1) {
    return InternalError("JPEG: jpeg_crop_scanline returned columns [" + std::to_string(s.crop_x) +
                         ", " + std::to_string(s.crop_x + s.crop_width) + ") for [" +
                         std::to_string(s.keep_x0) + ", " + std::to_string(s.keep_x1) + ")");
  }

  Image& image = window->image;
  image.width = static_cast<int>(s.crop_width);
  image.height = keep.y1 - keep.y0;
  image.channels = options.channels;
  std::vector<uint8_t> spare_rows;
  try {
    image.pixels.resize(static_cast<size_t>(image.height) * image.width * image.channels);
    spare_rows.resize(SpareRowBytes(s.crop_width, s.cmyk, s.out_channels) * kBatchRows);
  } catch (const std::bad_alloc&) {
    return ResourceExhaustedError("JPEG: cannot allocate " + std::to_string(image.width) + "x" +
                                  std::to_string(image.height) + "x" +
                                  std::to_string(image.channels) + " output pixels");
  }
  s.pixels = image.pixels.data();
  s.spare_rows = spare_rows.data();
  SHARDPACK_RETURN_IF_ERROR(decompressor.Run(ReadStep));
  window->x0 = keep.x0 - static_cast<int>(s.crop_x);
  window->y0 = 0;
  window->height = keep.y1 - keep.y0;
  window->width = keep.x1 - keep.x0;
  window->left = keep.x0;
  window->top = keep.y0;
  window->full_height = height;
  window->full_width = width;
  return Status::Ok();
}

}  // namespace

Status DecodeJpegExact(const uint8_t* data, size_t size, int height, int width, int channels,
                       int scale_denom, uint8_t* dst) {
  DecodeOptions options;
  options.channels = channels;
  options.apply_orientation = false;
  SHARDPACK_RETURN_IF_ERROR(CheckOptions(options));
  if (scale_denom != 1 && scale_denom != 2 && scale_denom != 4 && scale_denom != 8) {
    return InvalidArgumentError("JPEG: scale denominator " + std::to_string(scale_denom) +
                                " is not 1, 2, 4 or 8");
  }
  if (data == nullptr || size < 2 || data[0] != 0xFF || data[1] != 0xD8) {
    return CorruptionError("JPEG: not a JPEG file (no SOI marker)");
  }
  JpegDecompressor decompressor(data, size, options.limits);
  SHARDPACK_RETURN_IF_ERROR(decompressor.Run(CreateStep));
  Session& s = decompressor.Get();
  SHARDPACK_RETURN_IF_ERROR(decompressor.Run(HeaderStep));
  if (s.cinfo.image_width != static_cast<JDIMENSION>(width) ||
      s.cinfo.image_height != static_cast<JDIMENSION>(height)) {
    return CorruptionError("JPEG: " + std::to_string(s.cinfo.image_height) + "x" +
                           std::to_string(s.cinfo.image_width) +
                           " in its header, the record says " + std::to_string(height) + "x" +
                           std::to_string(width));
  }
  SHARDPACK_RETURN_IF_ERROR(ChooseColour(s.cinfo, channels, &s));
  s.scale_denom = scale_denom;
  SHARDPACK_RETURN_IF_ERROR(decompressor.Run(ConfigureStep));
  const JDIMENSION out_width = s.cinfo.output_width;
  const JDIMENSION out_height = s.cinfo.output_height;
  if (out_width != static_cast<JDIMENSION>(ScaledSide(width, scale_denom)) ||
      out_height != static_cast<JDIMENSION>(ScaledSide(height, scale_denom))) {
    return InternalError("JPEG: libjpeg scales " + std::to_string(height) + "x" +
                         std::to_string(width) + " by 1/" + std::to_string(scale_denom) + " to " +
                         std::to_string(out_height) + "x" + std::to_string(out_width));
  }
  s.crop_x = 0;
  s.crop_width = out_width;
  s.row_begin = 0;
  s.row_end = out_height;
  s.keep_x0 = 0;
  s.keep_x1 = out_width;
  s.keep_y0 = 0;
  s.keep_y1 = out_height;
  SHARDPACK_RETURN_IF_ERROR(decompressor.Run(StartStep));
  // Every row is read straight into `dst` except CMYK ones, converted from spare rows.
  std::vector<uint8_t> spare_rows;
  if (s.cmyk) spare_rows.resize(SpareRowBytes(s.crop_width, true, channels) * kBatchRows);
  s.pixels = dst;
  s.spare_rows = spare_rows.data();
  return decompressor.Run(ReadStep);
}

StatusOr<Image> DecodeJpegRaw(const uint8_t* data, size_t size, const DecodeOptions& options,
                              int* exif_orientation) {
  ImageWindow window;
  SHARDPACK_RETURN_IF_ERROR(
      DecodeJpegInto(data, size, options, nullptr, nullptr, exif_orientation, &window));
  return std::move(window.image);
}

StatusOr<ImageWindow> DecodeJpegWindow(const uint8_t* data, size_t size,
                                       const DecodeOptions& options, const NeededRegion& needed) {
  ImageWindow window;
  SHARDPACK_RETURN_IF_ERROR(DecodeJpegWindow(data, size, options, needed, &window));
  return window;
}

Status DecodeJpegWindow(const uint8_t* data, size_t size, const DecodeOptions& options,
                        const NeededRegion& needed, ImageWindow* window) {
  int orientation = 1;
  bool region_applied = false;
  SHARDPACK_RETURN_IF_ERROR(
      DecodeJpegInto(data, size, options, &needed, &region_applied, &orientation, window));
  if (region_applied) return Status::Ok();
  // Decoded whole (rotated: the region is in upright coordinates; or progressive): orient
  // when asked, then cut.
  if (options.apply_orientation && orientation != 1) {
    window->image = ApplyOrientation(std::move(window->image), orientation);
  }
  *window = CutWindow(std::move(window->image), needed);
  return Status::Ok();
}

StatusOr<Image> DecodeJpeg(const uint8_t* data, size_t size, const DecodeOptions& options) {
  int orientation = 1;
  SHARDPACK_ASSIGN_OR_RETURN(Image image, DecodeJpegRaw(data, size, options, &orientation));
  if (!options.apply_orientation || orientation == 1) return image;
  return ApplyOrientation(std::move(image), orientation);
}

}  // namespace shardpack::image
