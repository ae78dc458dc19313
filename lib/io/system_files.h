// Small readers of the kernel's files under /proc and /sys, and what they tell of the
// machine.
#ifndef SHARDPACK_IO_SYSTEM_FILES_H_
#define SHARDPACK_IO_SYSTEM_FILES_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace shardpack::io {

// The first line of a file, or "" when it cannot be read.
std::string FirstLine(const std::string& path);

// A decimal byte count, trailing newlines and spaces aside; false for "max" and anything
// else.
bool ParseBytes(std::string_view text, uint64_t* out);

// Whether this (virtual) machine's host takes its free memory back: a virtio balloon
// device (device id 0x0005) that negotiated free page reporting (VIRTIO_BALLOON_F_REPORTING,
// feature bit 5), with a page_reporting.page_reporting_order (where the module says) no
// higher than the largest free block the kernel keeps. There a 2 MiB block freed for a
// few seconds is handed back to the host, and touching it again costs a fault in the host
// per page: fresh huge pages arrive at 0.3-0.5 GB/s instead of about 10 (docs/LOADER.md,
// "The first epoch from the page cache"). "" when not so; otherwise what was found, in
// words. Reads /sys and /proc under `root` ("" for the real ones; tests pass a folder).
std::string HostReclaimsFreeMemory(const std::string& root = "");

}  // namespace shardpack::io

#endif  // SHARDPACK_IO_SYSTEM_FILES_H_
