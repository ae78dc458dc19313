#include "convert/record_input.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

#include "format/example.h"
#include "format/format.h"
#include "format/record.h"
#include "image/image.h"
#include "util/crc32c.h"

namespace shardpack::convert {
namespace {

// Reads [offset, offset + size) of `path`.
Status ReadRange(const std::string& path, uint64_t offset, uint64_t size,
                 std::vector<uint8_t>* out) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError("open", errno);
  out->resize(size);
  uint64_t got = 0;
  while (got < size) {
    const ssize_t r = ::pread(fd, out->data() + got, size - got, static_cast<off_t>(offset + got));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      const int err = errno;
      ::close(fd);
      return ErrnoError("read", err);
    }
    if (r == 0) break;
    got += static_cast<uint64_t>(r);
  }
  ::close(fd);
  if (got != size) {
    return IOError("the file ends " + std::to_string(size - got) +
                   " bytes into the record: it shrank after the scan");
  }
  return Status::Ok();
}

// Raw HWC pixels as an Image of `channels` channels: gray is replicated; RGB becomes
// ITU-R BT.601 luma with libjpeg's fixed-point weights and rounding.
image::Image PixelsToImage(const format::DecodedSample& d, int channels) {
  image::Image im;
  im.height = static_cast<int>(d.height);
  im.width = static_cast<int>(d.width);
  im.channels = channels;
  const uint64_t n = static_cast<uint64_t>(d.height) * static_cast<uint64_t>(d.width);
  if (d.channels == channels) {
    im.pixels.assign(d.pixels, d.pixels + d.pixel_bytes);
    return im;
  }
  im.pixels.resize(n * static_cast<uint64_t>(channels));
  if (channels == 3) {  // gray -> RGB
    for (uint64_t i = 0; i < n; ++i) {
      im.pixels[3 * i] = im.pixels[3 * i + 1] = im.pixels[3 * i + 2] = d.pixels[i];
    }
  } else {  // RGB -> gray
    for (uint64_t i = 0; i < n; ++i) {
      im.pixels[i] = image::Luma601(d.pixels[3 * i], d.pixels[3 * i + 1], d.pixels[3 * i + 2]);
    }
  }
  return im;
}

}  // namespace

StatusOr<RecordImage> DecodeRecordInput(const InputFile& input, uint64_t max_payload_bytes,
                                        const image::DecodeOptions& decode) {
  const uint64_t length = input.framed_size - format::kRecordOverhead;
  if (length > max_payload_bytes) {
    return ResourceExhaustedError("record of " + std::to_string(length) +
                                  " bytes exceeds the limit of " +
                                  std::to_string(max_payload_bytes));
  }
  std::vector<uint8_t> bytes;
  SHARDPACK_RETURN_IF_ERROR(ReadRange(input.path, input.offset, input.framed_size, &bytes));
  format::RecordView r;
  SHARDPACK_RETURN_IF_ERROR(format::ReadRecordAt(bytes.data(), bytes.size(), 0, length,
                                                 /*check_payload_crc=*/true, &r));
  if (r.framed_size() != input.framed_size) {
    return CorruptionError("the record is now " + std::to_string(r.framed_size()) +
                           " bytes; the scan found " + std::to_string(input.framed_size));
  }
  format::ExampleView view;
  SHARDPACK_RETURN_IF_ERROR(format::ParseExampleView(r.payload, r.length, &view));
  auto kind = format::ClassifyExample(view);
  if (!kind.ok()) return kind.status();
  RecordImage out;
  out.bytes_in = input.framed_size;
  if (*kind == format::PayloadKind::kEncoded) {
    format::EncodedSample e;
    SHARDPACK_RETURN_IF_ERROR(format::DecodeEncodedSample(view, &e));
    auto decoded =
        image::Decode(reinterpret_cast<const uint8_t*>(e.encoded.data()), e.encoded.size(), decode);
    if (!decoded.ok()) return decoded.status().WithPrefix("image/encoded");
    out.image = std::move(decoded).value();
    out.filename = std::string(e.filename);
    return out;
  }
  format::DecodedSample d;
  SHARDPACK_RETURN_IF_ERROR(format::DecodeSample(view, &d));
  if (d.has_pixel_crc) {
    const uint32_t actual = crc32c::Value(d.pixels, d.pixel_bytes);
    if (actual != d.pixel_crc) {
      return CorruptionError("pixel checksum " + format::Hex32(actual) + ", expected " +
                             format::Hex32(d.pixel_crc));
    }
  }
  if (static_cast<uint64_t>(d.height) * static_cast<uint64_t>(d.width) > decode.limits.max_pixels) {
    return ResourceExhaustedError("image/raw of " + std::to_string(d.height) + "x" +
                                  std::to_string(d.width) + " pixels exceeds the limit of " +
                                  std::to_string(decode.limits.max_pixels));
  }
  out.image = PixelsToImage(d, decode.channels);
  out.filename = std::string(d.filename);
  return out;
}

}  // namespace shardpack::convert
