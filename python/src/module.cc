// The _shardpack extension module: the C++ library bound for the Python package in
// python/shardpack/, which is its only intended user (the package adds the Pythonic API,
// argument checking and the framework conversions).
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <string>

#include "bindings.h"
#include "shardpack/limits.h"
#include "shardpack/manifest.h"

namespace nb = nanobind;

NB_MODULE(_shardpack, m) {
  m.doc() = "shardpack C++ library bindings (use the shardpack package, not this module)";
  m.def(
      "version", [] { return std::string(shardpack::Version()); },
      "The version of the linked shardpack library, e.g. \"0.1.0\".");
  // shardpack/limits.h, for the package's argument checks and defaults.
  m.attr("MAX_IMAGE_PIXELS") = shardpack::kMaxImagePixels;
  m.attr("MAX_IMAGE_SIDE") = shardpack::kMaxImageSide;
  m.attr("MAX_PREFETCH") = shardpack::kMaxPrefetch;
  m.attr("MAX_IO_DEPTH") = shardpack::kMaxIoDepth;
  m.attr("MAX_THREADS") = shardpack::kMaxThreads;
  shardpack::python::BindDataset(m);
  shardpack::python::BindLoader(m);
  shardpack::python::BindConvert(m);
  shardpack::python::BindVerify(m);
}
