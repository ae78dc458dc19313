// Every limit shardpack sets on images and on the files it reads, defined once: the
// converter, the writer, the readers, the CLI and the Python package all take them from
// here (docs/FORMAT.md states them for the format).
#ifndef SHARDPACK_LIMITS_H_
#define SHARDPACK_LIMITS_H_

#include <cstddef>
#include <cstdint>

namespace shardpack {

// LoaderOptions::prefetch (batches prepared ahead: the ring holds prefetch + 2 slots) and
// LoaderOptions::io_depth (reads in flight on the read-ahead path): their largest values.
inline constexpr int kMaxPrefetch = 64;
inline constexpr int kMaxIoDepth = 256;
// Worker threads any command or option asks for (the loader's num_threads, convert's,
// verify's and merge's --threads).
inline constexpr int kMaxThreads = 4096;

// Largest image stored or decoded, in pixels (Pillow's MAX_IMAGE_PIXELS: a quarter GiB at
// 3 bytes a pixel), and its largest side (libjpeg's JPEG_MAX_DIMENSION).
inline constexpr uint64_t kMaxImagePixels = 89478485;
inline constexpr int kMaxImageSide = 65500;
// Largest record payload a reader accepts before touching it: the largest image (3
// channels) plus 1 MiB for metadata, which the writer's limits keep far smaller.
inline constexpr uint64_t kMaxRecordBytes = kMaxImagePixels * 3 + (1u << 20);
// Longest image/filename and image/class/text stored.
inline constexpr size_t kMaxTextBytes = 4096;
// Classes of a dataset and the length of a class name: the manifest lists every class, so
// a label of ten million (one typo in a list file) made a 549 MB manifest. ImageNet-21k
// has 21,841 classes.
inline constexpr uint64_t kMaxClasses = 1000000;
inline constexpr uint64_t kMaxClassNameBytes = 1024;
// Largest image/class/label of a TFRecord record that convert takes in: a record with a
// larger one is refused as it is read, before a class list up to it is made (adopt, whose
// class list runs up to the largest label, takes labels below kMaxClasses).
inline constexpr int64_t kMaxLabel = 10000000;
// Largest manifest.json and .idx file read whole.
inline constexpr uint64_t kMaxManifestBytes = 256ull << 20;
inline constexpr uint64_t kMaxIndexBytes = 1ull << 30;

}  // namespace shardpack

#endif  // SHARDPACK_LIMITS_H_
