#include "cuda/cuda.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "read/normalize.h"
#include "test_util.h"

namespace shardpack::cuda {
namespace {

using read::NormalizeParams;
using read::NormalizeType;

// GPU tests run on device 0 and skip where there is none (no driver, no device, or a
// build without CUDA).
#define SKIP_WITHOUT_DEVICE() \
  if (DeviceCount() == 0) GTEST_SKIP() << "no CUDA device"

template <typename T>
T ValueOrDie(StatusOr<T> result) {
  EXPECT_TRUE(result.ok()) << result.status().ToString();
  return std::move(result).value();
}

// ---- Everywhere ----

TEST(CudaTest, WithoutDeviceEveryCallIsUnavailable) {
  if (DeviceCount() > 0) GTEST_SKIP() << "a CUDA device is present";
  // Where the library has CUDA the message says so in words and names what is missing (the
  // driver's library, or the device); without it, the build is named.
  const std::string expected = BuiltWithCuda() ? "no CUDA device" : "built without CUDA";
  const Status checks[] = {
      CheckDevice(0),
      SetDevice(0),
      Stream::Create(0).status(),
      Event::Create(0).status(),
      Event::CreateTimed(0).status(),
      DeviceBuffer::Allocate(0, 64).status(),
      PinnedBuffer::Allocate(64).status(),
      SpinAsync(nullptr, 1000),
  };
  for (const Status& status : checks) {
    EXPECT_EQ(status.code(), StatusCode::kUnavailable) << status.ToString();
    EXPECT_NE(status.message().find(expected), std::string::npos) << status.ToString();
  }
}

TEST(CudaTest, WithoutDeviceCheckDeviceNamesTheDevice) {
  if (DeviceCount() > 0) GTEST_SKIP() << "a CUDA device is present";
  const Status status = CheckDevice(0);
  EXPECT_EQ(status.code(), StatusCode::kUnavailable);
  EXPECT_EQ(status.message().rfind("CUDA device 0: ", 0), 0u) << status.ToString();
}

TEST(CudaTest, BuildWithoutCudaHasNoDevice) {
  if (BuiltWithCuda()) GTEST_SKIP() << "built with CUDA";
  EXPECT_EQ(DeviceCount(), 0);
  const Status status = NormalizeAsync(nullptr, 1, 1, 1, 3, NormalizeParams(),
                                       NormalizeType::kFloat32, nullptr, nullptr);
  EXPECT_EQ(status.code(), StatusCode::kUnavailable);
  EXPECT_NE(status.message().find("built without CUDA"), std::string::npos) << status.ToString();
}

TEST(CudaTest, WithoutDriverTheLibraryIsNamed) {
  if (!BuiltWithCuda()) GTEST_SKIP() << "built without CUDA";
  if (DeviceCount() > 0) GTEST_SKIP() << "a CUDA device is present";
  // No NVIDIA driver on this machine: the library that was looked for is named; with a
  // driver and no device, the driver's own error.
  const Status status = SetDevice(0);
  const std::string& message = status.message();
  EXPECT_TRUE(message.find("libcuda.so.1") != std::string::npos ||
              message.find("cuInit: CUDA_ERROR_") != std::string::npos)
      << status.ToString();
}

// Run by the ctest entry CudaDriverTest.TheToolkitsStubDriver (tests/CMakeLists.txt), with
// the toolkit's stub as libcuda.so.1 on LD_LIBRARY_PATH: every function of the driver table
// is found (a missing one would be named instead), cuInit is called and its answer named.
TEST(CudaDriverTest, StubDriverIsFoundWholeAndNamedAsTheStub) {
  if (std::getenv("SHARDPACK_TEST_CUDA_STUB") == nullptr) {
    GTEST_SKIP() << "run by the ctest entry CudaDriverTest.TheToolkitsStubDriver";
  }
  EXPECT_EQ(DeviceCount(), 0);
  const Status status = CheckDevice(0);
  EXPECT_EQ(status.code(), StatusCode::kUnavailable);
  EXPECT_EQ(status.message().rfind("CUDA device 0: no CUDA device: the libcuda.so.1 found is "
                                   "the CUDA toolkit's stub, not an NVIDIA driver (cuInit: "
                                   "CUDA_ERROR_STUB_LIBRARY",
                                   0),
            0u)
      << status.ToString();
  EXPECT_EQ(PinnedBuffer::Allocate(64).status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(SpinAsync(nullptr, 1000).code(), StatusCode::kUnavailable);
}

TEST(CudaTest, DeviceThatDoesNotExistIsUnavailable) {
  const Status status = CheckDevice(9999);
  EXPECT_EQ(status.code(), StatusCode::kUnavailable);
  EXPECT_NE(status.message().find("CUDA device 9999"), std::string::npos) << status.ToString();
}

TEST(CudaTest, NegativeDeviceIsUnavailable) {
  EXPECT_EQ(CheckDevice(-1).code(), StatusCode::kUnavailable);
}

TEST(CudaTest, EmptyObjectsHoldNothing) {
  const Stream stream;
  const Event event;
  const PinnedBuffer pinned;
  const DeviceBuffer device;
  EXPECT_EQ(stream.get(), nullptr);
  EXPECT_EQ(event.get(), nullptr);
  EXPECT_EQ(pinned.data(), nullptr);
  EXPECT_EQ(pinned.size(), 0u);
  EXPECT_EQ(device.data(), nullptr);
  EXPECT_EQ(device.size(), 0u);
}

TEST(CudaTest, ZeroBytePinnedBufferIsInvalid) {
  if (!BuiltWithCuda()) GTEST_SKIP() << "built without CUDA";
  EXPECT_EQ(PinnedBuffer::Allocate(0).status().code(), StatusCode::kInvalidArgument);
}

TEST(CudaTest, NormalizeRejectsTwoChannels) {
  if (!BuiltWithCuda()) GTEST_SKIP() << "built without CUDA";
  const Status status = NormalizeAsync(nullptr, 1, 1, 1, 2, NormalizeParams(),
                                       NormalizeType::kFloat32, nullptr, nullptr);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("channels must be 1 or 3"), std::string::npos);
}

// ---- On a device ----

TEST(CudaDeviceTest, DeviceZeroIsUsable) {
  SKIP_WITHOUT_DEVICE();
  ASSERT_OK(CheckDevice(0));
}

TEST(CudaDeviceTest, DeviceThatDoesNotExistNamesTheCudaError) {
  SKIP_WITHOUT_DEVICE();
  const Status status = CheckDevice(9999);
  EXPECT_EQ(status.code(), StatusCode::kUnavailable);
  EXPECT_NE(status.message().find("cuDeviceGet: CUDA_ERROR_INVALID_DEVICE"), std::string::npos)
      << status.ToString();
}

TEST(CudaDeviceTest, PinnedBytesRoundTripThroughTheDevice) {
  SKIP_WITHOUT_DEVICE();
  constexpr size_t kBytes = 1 << 20;
  Stream stream = ValueOrDie(Stream::Create(0));
  Event done = ValueOrDie(Event::Create(0));
  PinnedBuffer in = ValueOrDie(PinnedBuffer::Allocate(kBytes));
  PinnedBuffer out = ValueOrDie(PinnedBuffer::Allocate(kBytes));
  DeviceBuffer device = ValueOrDie(DeviceBuffer::Allocate(0, kBytes));
  ASSERT_NE(stream.get(), nullptr);
  ASSERT_EQ(in.size(), kBytes);
  ASSERT_EQ(device.size(), kBytes);
  EXPECT_EQ(device.device(), 0);
  auto* bytes = static_cast<uint8_t*>(in.data());
  for (size_t i = 0; i < kBytes; ++i) bytes[i] = static_cast<uint8_t>(i * 131 + 7);
  std::memset(out.data(), 0, kBytes);

  ASSERT_OK(CopyToDeviceAsync(device.data(), in.data(), kBytes, stream.get()));
  ASSERT_OK(CopyToHostAsync(out.data(), device.data(), kBytes, stream.get()));
  ASSERT_OK(done.Record(stream.get()));
  ASSERT_OK(done.Synchronize());
  EXPECT_TRUE(ValueOrDie(done.Done()));
  EXPECT_EQ(std::memcmp(in.data(), out.data(), kBytes), 0);
}

TEST(CudaDeviceTest, StreamWaitsForAnEventOfAnotherStream) {
  SKIP_WITHOUT_DEVICE();
  constexpr size_t kBytes = 4096;
  Stream producer = ValueOrDie(Stream::Create(0));
  Stream consumer = ValueOrDie(Stream::Create(0));
  Event produced = ValueOrDie(Event::Create(0));
  Event consumed = ValueOrDie(Event::Create(0));
  PinnedBuffer in = ValueOrDie(PinnedBuffer::Allocate(kBytes));
  PinnedBuffer out = ValueOrDie(PinnedBuffer::Allocate(kBytes));
  DeviceBuffer device = ValueOrDie(DeviceBuffer::Allocate(0, kBytes));
  std::memset(in.data(), 0x5A, kBytes);
  std::memset(out.data(), 0, kBytes);

  // The producer is held up by 20 ms of spinning before its copy; the consumer's copy back
  // must still see the producer's bytes.
  ASSERT_OK(SpinAsync(producer.get(), 20'000'000));
  ASSERT_OK(CopyToDeviceAsync(device.data(), in.data(), kBytes, producer.get()));
  ASSERT_OK(produced.Record(producer.get()));
  ASSERT_OK(StreamWaitEvent(consumer.get(), produced.get()));
  ASSERT_OK(CopyToHostAsync(out.data(), device.data(), kBytes, consumer.get()));
  ASSERT_OK(consumed.Record(consumer.get()));
  ASSERT_OK(StreamSynchronize(consumer.get()));
  EXPECT_TRUE(ValueOrDie(produced.Done()));
  EXPECT_TRUE(ValueOrDie(consumed.Done()));
  EXPECT_EQ(std::memcmp(in.data(), out.data(), kBytes), 0);
}

TEST(CudaDeviceTest, SpinOccupiesItsStreamForAtLeastTheTimeAsked) {
  SKIP_WITHOUT_DEVICE();
  Stream stream = ValueOrDie(Stream::Create(0));
  Event start = ValueOrDie(Event::CreateTimed(0));
  Event end = ValueOrDie(Event::CreateTimed(0));
  ASSERT_OK(start.Record(stream.get()));
  ASSERT_OK(SpinAsync(stream.get(), 2'000'000));
  ASSERT_OK(end.Record(stream.get()));
  ASSERT_OK(end.Synchronize());
  EXPECT_GE(ValueOrDie(ElapsedMs(start, end)), 1.9f);
}

TEST(CudaDeviceTest, ElapsedTimeNeedsTimedEvents) {
  SKIP_WITHOUT_DEVICE();
  Stream stream = ValueOrDie(Stream::Create(0));
  Event start = ValueOrDie(Event::Create(0));
  Event end = ValueOrDie(Event::Create(0));
  ASSERT_OK(start.Record(stream.get()));
  ASSERT_OK(end.Record(stream.get()));
  ASSERT_OK(end.Synchronize());
  const StatusOr<float> ms = ElapsedMs(start, end);
  EXPECT_EQ(ms.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(ms.status().message().find("cuEventElapsedTime: CUDA_ERROR_"), std::string::npos)
      << ms.status().ToString();
}

TEST(CudaDeviceTest, HugeDeviceBufferIsResourceExhausted) {
  SKIP_WITHOUT_DEVICE();
  const auto buffer = DeviceBuffer::Allocate(0, size_t{1} << 52);
  EXPECT_EQ(buffer.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(buffer.status().message().find("cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY"),
            std::string::npos)
      << buffer.status().ToString();
}

TEST(CudaDeviceTest, MovedBufferOwnsTheMemory) {
  SKIP_WITHOUT_DEVICE();
  DeviceBuffer a = ValueOrDie(DeviceBuffer::Allocate(0, 256));
  void* data = a.data();
  DeviceBuffer b = std::move(a);
  EXPECT_EQ(a.data(), nullptr);  // NOLINT(bugprone-use-after-move): the moved-from state
  EXPECT_EQ(b.data(), data);
  EXPECT_EQ(b.size(), 256u);
}

// NormalizeAsync against read::HostNormalizer, bit for bit, on random pixels (every byte
// value appears) with parameters that reach float16's subnormals and overflow too.
struct NormalizeCase {
  NormalizeType type;
  int channels;
};

class NormalizeAsyncTest : public ::testing::TestWithParam<NormalizeCase> {};

TEST_P(NormalizeAsyncTest, MatchesHostNormalizerBitForBit) {
  SKIP_WITHOUT_DEVICE();
  const auto [type, c] = GetParam();
  constexpr int kN = 5, kH = 37, kW = 53;
  const size_t in_bytes = size_t{kN} * kH * kW * c;
  const size_t out_bytes = in_bytes * read::NormalizeTypeSize(type);
  std::mt19937 random(1234);
  PinnedBuffer in = ValueOrDie(PinnedBuffer::Allocate(in_bytes));
  auto* pixels = static_cast<uint8_t*>(in.data());
  for (size_t i = 0; i < in_bytes; ++i) {
    pixels[i] = i < 256 ? static_cast<uint8_t>(i) : static_cast<uint8_t>(random());
  }
  Stream stream = ValueOrDie(Stream::Create(0));
  DeviceBuffer device_in = ValueOrDie(DeviceBuffer::Allocate(0, in_bytes));
  DeviceBuffer device_out = ValueOrDie(DeviceBuffer::Allocate(0, out_bytes));
  PinnedBuffer out = ValueOrDie(PinnedBuffer::Allocate(out_bytes));
  ASSERT_OK(CopyToDeviceAsync(device_in.data(), in.data(), in_bytes, stream.get()));

  NormalizeParams extreme;
  extreme.scale = {300.0f, 1e-7f, -3.3e-5f};
  extreme.bias = {-10000.0f, 1e-6f, 3e-5f};
  const NormalizeParams cases[] = {
      read::MakeNormalizeParams({0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}),
      read::MakeNormalizeParams({0.5f, 0.5f, 0.5f}, {0.5f, 0.5f, 0.5f}),
      extreme,
  };
  for (const NormalizeParams& p : cases) {
    ASSERT_OK(NormalizeAsync(static_cast<const uint8_t*>(device_in.data()), kN, kH, kW, c, p, type,
                             device_out.data(), stream.get()));
    ASSERT_OK(CopyToHostAsync(out.data(), device_out.data(), out_bytes, stream.get()));
    ASSERT_OK(StreamSynchronize(stream.get()));
    std::vector<uint8_t> expected(out_bytes);
    read::HostNormalizer(p, type).Run(pixels, kN, kH, kW, c, expected.data());
    const auto* got = static_cast<const uint8_t*>(out.data());
    size_t mismatches = 0;
    for (size_t i = 0; i < out_bytes && mismatches < 10; ++i) {
      if (got[i] != expected[i]) {
        ++mismatches;
        ADD_FAILURE() << "byte " << i << ": device " << int{got[i]} << ", host " << int{expected[i]}
                      << " (scale[0] " << p.scale[0] << ")";
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(TypesAndChannels, NormalizeAsyncTest,
                         ::testing::Values(NormalizeCase{NormalizeType::kFloat32, 3},
                                           NormalizeCase{NormalizeType::kFloat32, 1},
                                           NormalizeCase{NormalizeType::kFloat16, 3},
                                           NormalizeCase{NormalizeType::kFloat16, 1}),
                         [](const ::testing::TestParamInfo<NormalizeCase>& info) {
                           return std::string(info.param.type == NormalizeType::kFloat16
                                                  ? "Float16"
                                                  : "Float32") +
                                  "C" + std::to_string(info.param.channels);
                         });

}  // namespace
}  // namespace shardpack::cuda
