// The parts of the _shardpack extension module, one per public header they bind. Each Bind*
// adds its classes and functions to the module; module.cc calls them all.
//
// Conventions of every binding: the GIL is released while C++ works (reading, converting,
// verifying, waiting for a batch); a non-OK Status is raised as the shardpack exception of
// its code (errors.h); arrays handed to Python are either copies owned by Python or views
// that keep their C++ owner alive (documented where they are made).
#ifndef SHARDPACK_PYTHON_BINDINGS_H_
#define SHARDPACK_PYTHON_BINDINGS_H_

#include <nanobind/nanobind.h>

#include <memory>

#include "shardpack/dataset.h"

namespace shardpack::python {

// The Python object _shardpack.Dataset: an open dataset, shared with the loaders made
// from it (a loader keeps it alive).
struct DatasetHandle {
  std::shared_ptr<const Dataset> dataset;
};

void BindDataset(nanobind::module_& m);
void BindLoader(nanobind::module_& m);
void BindConvert(nanobind::module_& m);
void BindVerify(nanobind::module_& m);

}  // namespace shardpack::python

#endif  // SHARDPACK_PYTHON_BINDINGS_H_
