#include "errors.h"

#include <nanobind/nanobind.h>

#include <string_view>

namespace nb = nanobind;

namespace shardpack::python {

void RaiseStatus(const Status& status) {
  // The classes live in Python (multiple inheritance from the built-in exceptions, with
  // docstrings); _errors.exception_class maps a code name ("Corruption") to one.
  nb::object errors = nb::module_::import_("shardpack._errors");
  const std::string_view code = StatusCodeName(status.code());
  nb::object cls = errors.attr("exception_class")(nb::str(code.data(), code.size()));
  PyErr_SetObject(cls.ptr(), nb::str(status.message().c_str()).ptr());
  throw nb::python_error();
}

}  // namespace shardpack::python
