// _shardpack.verify: shardpack::VerifyDataset, the report as a dict.
#include <nanobind/stl/string.h>

#include <string>

#include "bindings.h"
#include "errors.h"
#include "shardpack/verify.h"

namespace nb = nanobind;

namespace shardpack::python {

void BindVerify(nb::module_& m) {
  m.def(
      "verify",
      [](const std::string& dir, int num_threads, uint64_t max_faults_per_file) {
        VerifyOptions options;
        options.num_threads = num_threads;
        options.max_faults_per_file = max_faults_per_file;
        StatusOr<VerifyReport> report = [&] {
          nb::gil_scoped_release release;
          return VerifyDataset(dir, options);
        }();
        const VerifyReport r = ValueOrRaise(std::move(report));
        nb::list faults;
        for (const VerifyFault& f : r.faults) {
          faults.append(nb::make_tuple(f.file, f.record, f.offset, f.message, FormatFault(f)));
        }
        nb::dict d;
        d["ok"] = r.ok();
        d["files"] = r.files;
        d["records"] = r.records;
        d["bytes"] = r.bytes;
        d["seconds"] = r.seconds;
        d["fault_count"] = r.fault_count;
        d["faults"] = faults;
        return d;
      },
      nb::arg("dir"), nb::arg("num_threads") = 0, nb::arg("max_faults_per_file") = 1000,
      "shardpack::VerifyDataset; the report as a dict, faults as (file, record, offset, "
      "message, formatted) tuples.");
}

}  // namespace shardpack::python
