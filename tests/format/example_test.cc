#include "format/example.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

#include "example.pb.h"
#include "format/format.h"
#include "util/coding.h"
#include "util/crc32c.h"

namespace shardpack::format {
namespace {

std::string Payload(const SampleMeta& meta, const std::string& pixels, uint64_t offset,
                    uint32_t alignment) {
  std::string entries = EncodeFeatureEntries(meta, crc32c::Value(pixels));
  return EncodePayloadPrefix(entries, pixels.size(), offset, alignment) + pixels;
}

DecodedSample MustParse(const std::string& payload) {
  DecodedSample d;
  Status s = ParseSample(reinterpret_cast<const uint8_t*>(payload.data()), payload.size(), &d);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return d;
}

// Our encoder's bytes, read by libprotobuf: every feature with the right type and value.
TEST(ExampleTest, WriterOutputParsesWithLibprotobuf) {
  std::string pixels(2 * 3 * 3, '\0');
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<char>(i * 7);
  SampleMeta meta{2, 3, 3, 5, "cat", "dir/a.jpg"};
  std::string payload = Payload(meta, pixels, 12, 64);
  tf::Example ex;
  ASSERT_TRUE(ex.ParseFromString(payload));
  const auto& f = ex.features().feature();
  EXPECT_EQ(f.at("image/raw").bytes_list().value(0), pixels);
  EXPECT_EQ(f.at("image/height").int64_list().value(0), 2);
  EXPECT_EQ(f.at("image/width").int64_list().value(0), 3);
  EXPECT_EQ(f.at("image/channels").int64_list().value(0), 3);
  EXPECT_EQ(f.at("image/class/label").int64_list().value(0), 5);
  EXPECT_EQ(f.at("image/class/text").bytes_list().value(0), "cat");
  EXPECT_EQ(f.at("image/filename").bytes_list().value(0), "dir/a.jpg");
  EXPECT_EQ(f.at("image/format").bytes_list().value(0), "raw");
  EXPECT_EQ(f.at("image/raw/crc32c").int64_list().value(0),
            static_cast<int64_t>(crc32c::Value(pixels)));
  EXPECT_TRUE(f.contains("image/pad"));
  EXPECT_EQ(f.size(), 10);
}

TEST(ExampleTest, PixelsComeLastAndStartAlignedForEveryOffset) {
  std::string pixels(300, 'p');
  SampleMeta meta{10, 10, 3, 1, "a-class-name", "file.png"};
  for (uint64_t offset = 0; offset < 600; offset += 7) {
    for (uint32_t alignment : {1u, 64u, 4096u}) {
      std::string payload = Payload(meta, pixels, offset, alignment);
      DecodedSample d = MustParse(payload);
      uint64_t start =
          static_cast<uint64_t>(d.pixels - reinterpret_cast<const uint8_t*>(payload.data()));
      EXPECT_EQ(start + d.pixel_bytes, payload.size()) << "pixels are not last";
      EXPECT_EQ((offset + start) % alignment, 0u) << "offset " << offset << " align " << alignment;
    }
  }
}

TEST(ExampleTest, ZeroCopyViewPointsIntoThePayload) {
  std::string pixels(48, 'q');
  std::string payload = Payload({4, 4, 3, 0, "c", "f"}, pixels, 0, 64);
  DecodedSample d = MustParse(payload);
  const auto* base = reinterpret_cast<const uint8_t*>(payload.data());
  EXPECT_GE(d.pixels, base);
  EXPECT_LE(d.pixels + d.pixel_bytes, base + payload.size());
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(d.pixels), d.pixel_bytes), pixels);
  EXPECT_TRUE(d.has_pixel_crc);
  EXPECT_EQ(d.pixel_crc, crc32c::Value(pixels));
}

void SetInt(tf::Example* ex, const std::string& key, int64_t v) {
  (*ex->mutable_features()->mutable_feature())[key].mutable_int64_list()->add_value(v);
}
void SetBytes(tf::Example* ex, const std::string& key, const std::string& v) {
  (*ex->mutable_features()->mutable_feature())[key].mutable_bytes_list()->add_value(v);
}

// The view must agree with a full libprotobuf parse for Examples written by others.
void ExpectAgreesWithFullParse(const std::string& payload) {
  tf::Example ex;
  ASSERT_TRUE(ex.ParseFromString(payload));
  const auto& f = ex.features().feature();
  DecodedSample d = MustParse(payload);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(d.pixels), d.pixel_bytes),
            f.at("image/raw").bytes_list().value(0));
  EXPECT_EQ(d.height, f.at("image/height").int64_list().value(0));
  EXPECT_EQ(d.width, f.at("image/width").int64_list().value(0));
  EXPECT_EQ(d.channels, f.at("image/channels").int64_list().value(0));
  EXPECT_EQ(d.label, f.at("image/class/label").int64_list().value(0));
  if (f.contains("image/class/text")) {
    EXPECT_EQ(d.class_text, f.at("image/class/text").bytes_list().value(0));
  }
}

TEST(ExampleTest, ViewAgreesWithFullParseForOtherFieldOrdersAndExtraFeatures) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 50; ++trial) {
    tf::Example ex;
    int h = 1 + trial % 5, w = 2 + trial % 3, c = trial % 2 ? 3 : 1;
    std::string raw(static_cast<size_t>(h * w * c), '\0');
    for (auto& b : raw) b = static_cast<char>(rng());
    // Features inserted in a trial-dependent order, plus unrelated ones.
    std::vector<std::function<void()>> setters = {
        [&] { SetBytes(&ex, "image/raw", raw); },
        [&] { SetInt(&ex, "image/height", h); },
        [&] { SetInt(&ex, "image/width", w); },
        [&] { SetInt(&ex, "image/channels", c); },
        [&] { SetInt(&ex, "image/class/label", trial); },
        [&] { SetBytes(&ex, "image/class/text", "t" + std::to_string(trial)); },
        [&] { SetBytes(&ex, "image/encoded_other", std::string(trial * 3, 'e')); },
        [&] {
          auto& fl = (*ex.mutable_features()->mutable_feature())["image/object/bbox/xmin"];
          fl.mutable_float_list()->add_value(0.25f);
          fl.mutable_float_list()->add_value(0.5f);
        },
        [&] { SetInt(&ex, "image/other/ints", -trial); },
    };
    std::shuffle(setters.begin(), setters.end(), rng);
    for (auto& s : setters) s();
    std::string payload;
    ASSERT_TRUE(ex.SerializeToString(&payload));
    ExpectAgreesWithFullParse(payload);
  }
}

// Hand-built wire bytes that libprotobuf accepts but a naive parser might not: unpacked
// int64 values, an unknown top-level field, a repeated key where the last entry wins.
TEST(ExampleTest, ViewAcceptsUnpackedIntsUnknownFieldsAndLastDuplicateKeyWins) {
  auto len_field = [](int field, const std::string& body) {
    std::string out(1, static_cast<char>((field << 3) | 2));
    PutVarint64(&out, body.size());
    return out + body;
  };
  auto entry = [&](const std::string& key, const std::string& feature) {
    return len_field(1, len_field(1, key) + len_field(2, feature));
  };
  auto unpacked_int = [&](int64_t v) {
    std::string list(1, '\x08');  // Int64List.value, wire type varint
    PutVarint64(&list, static_cast<uint64_t>(v));
    return len_field(3, list);
  };
  auto bytes = [&](const std::string& v) { return len_field(1, len_field(1, v)); };
  std::string features =
      entry("image/height", unpacked_int(1)) + entry("image/width", unpacked_int(2)) +
      entry("image/channels", unpacked_int(1)) + entry("image/class/label", unpacked_int(9)) +
      entry("image/raw", bytes("zz")) + entry("image/class/label", unpacked_int(4)) +  // wins
      entry("image/raw", bytes("ab"));                                                 // wins
  std::string unknown = std::string("\x10\x96\x01", 3);  // field 2, varint 150
  std::string payload = unknown + len_field(1, features);
  ExpectAgreesWithFullParse(payload);
  DecodedSample d = MustParse(payload);
  EXPECT_EQ(d.label, 4);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(d.pixels), 2), "ab");
}

TEST(ExampleTest, MissingRequiredFeatureIsNamed) {
  tf::Example ex;
  SetBytes(&ex, "image/raw", "abc");
  SetInt(&ex, "image/height", 1);
  SetInt(&ex, "image/width", 1);
  SetInt(&ex, "image/class/label", 0);
  std::string payload = ex.SerializeAsString();
  DecodedSample d;
  Status s = ParseSample(reinterpret_cast<const uint8_t*>(payload.data()), payload.size(), &d);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
  EXPECT_NE(s.message().find("image/channels: expected one int64 value, found no such feature"),
            std::string::npos)
      << s.message();
}

TEST(ExampleTest, PixelByteCountMustMatchTheShape) {
  std::string payload = Payload({2, 2, 3, 0, "c", "f"}, std::string(11, 'x'), 0, 1);
  DecodedSample d;
  Status s = ParseSample(reinterpret_cast<const uint8_t*>(payload.data()), payload.size(), &d);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("image/raw: 11 bytes, expected 12 (2x2x3)"), std::string::npos)
      << s.message();
}

TEST(ExampleTest, TruncatedOrGarbagePayloadIsCorruptionNeverACrash) {
  std::string payload = Payload({3, 3, 3, 1, "c", "f"}, std::string(27, 'x'), 0, 64);
  for (size_t cut = 0; cut < payload.size(); ++cut) {
    DecodedSample d;
    Status s = ParseSample(reinterpret_cast<const uint8_t*>(payload.data()), cut, &d);
    EXPECT_FALSE(s.ok()) << "cut " << cut;
  }
  std::mt19937 rng(5);
  for (int trial = 0; trial < 2000; ++trial) {
    std::string junk(static_cast<size_t>(rng() % 64), '\0');
    for (auto& b : junk) b = static_cast<char>(rng());
    DecodedSample d;
    ParseSample(reinterpret_cast<const uint8_t*>(junk.data()), junk.size(), &d).IgnoreError();
  }
}

bool SameFeature(const FeatureRef& a, const FeatureRef& b) {
  return a.kind == b.kind && a.count == b.count && a.int64 == b.int64 &&
         a.bytes.data() == b.bytes.data() && a.bytes.size() == b.bytes.size();
}

// Both halves of ParseExampleView on one payload: where the canonical one accepts it, the
// general one must too, with the same view; returns whether the canonical one accepted.
bool ExpectHalvesAgree(const std::string& payload) {
  const auto* b = reinterpret_cast<const uint8_t*>(payload.data());
  ExampleView fast, general;
  const bool canonical = ParseCanonicalExampleView(b, payload.size(), &fast);
  const Status s = ParseGeneralExampleView(b, payload.size(), &general);
  if (!canonical) return false;
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(fast.num_features, general.num_features);
  const FeatureRef ExampleView::*fields[] = {
      &ExampleView::raw,        &ExampleView::raw_crc,    &ExampleView::height,
      &ExampleView::width,      &ExampleView::channels,   &ExampleView::label,
      &ExampleView::class_text, &ExampleView::filename,   &ExampleView::format,
      &ExampleView::encoded,    &ExampleView::colorspace, &ExampleView::encoded_crc};
  for (const auto field : fields) EXPECT_TRUE(SameFeature(fast.*field, general.*field));
  return true;
}

TEST(ExampleTest, WriterOutputTakesTheCanonicalParse) {
  const std::string long_class(300, 'k');
  const std::string long_name(200, 'n');
  const SampleMeta metas[] = {SampleMeta{4, 4, 3, 0, "c", "f"},
                              SampleMeta{32, 32, 3, 999999, long_class, long_name},
                              SampleMeta{1, 1, 1, -5, "", ""}};
  for (const SampleMeta& meta : metas) {
    const std::string pixels(static_cast<size_t>(meta.height * meta.width * meta.channels), 'p');
    for (const uint32_t alignment : {1u, 64u, 4096u}) {
      EXPECT_TRUE(ExpectHalvesAgree(Payload(meta, pixels, 12, alignment)));
    }
  }
}

TEST(ExampleTest, CanonicalAndGeneralParsesAgreeOnEveryMutation) {
  const std::string base =
      Payload({5, 7, 3, 300, "class", "file.png"}, std::string(105, 'x'), 0, 64);
  std::mt19937 rng(11);
  int accepted = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    std::string p = base;
    switch (rng() % 4) {
      case 0:  // a byte changed
        p[rng() % p.size()] = static_cast<char>(rng());
        break;
      case 1:  // cut short
        p.resize(rng() % p.size());
        break;
      case 2:  // a byte inserted
        p.insert(p.begin() + static_cast<std::ptrdiff_t>(rng() % p.size()),
                 static_cast<char>(rng()));
        break;
      default:  // a bit flipped in the first 80 bytes (tags, lengths, keys)
        p[rng() % 80] ^= static_cast<char>(1 << (rng() % 8));
        break;
    }
    if (ExpectHalvesAgree(p)) ++accepted;
    if (HasFailure()) break;
  }
  EXPECT_GT(accepted, 1000);  // the canonical parse was exercised, not only refused
}

}  // namespace
}  // namespace shardpack::format
