// NumPy arrays made from C++ data: copies that Python owns.
#ifndef SHARDPACK_PYTHON_ARRAYS_H_
#define SHARDPACK_PYTHON_ARRAYS_H_

#include <nanobind/ndarray.h>

#include <algorithm>
#include <cstddef>
#include <span>

namespace shardpack::python {

// A new 1-D NumPy array holding a copy of `values`; Python owns it (freed with the array).
// Call with the GIL held.
template <typename T>
nanobind::ndarray<nanobind::numpy, T, nanobind::ndim<1>> CopyToNumpy(std::span<const T> values) {
  T* data = new T[std::max<size_t>(values.size(), 1)];
  std::copy(values.begin(), values.end(), data);
  nanobind::capsule owner(data, [](void* p) noexcept { delete[] static_cast<T*>(p); });
  return nanobind::ndarray<nanobind::numpy, T, nanobind::ndim<1>>(data, {values.size()}, owner);
}

}  // namespace shardpack::python

#endif  // SHARDPACK_PYTHON_ARRAYS_H_
