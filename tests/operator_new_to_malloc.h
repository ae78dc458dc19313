// For the test programs that replace malloc and free to count what is allocated
// (read/loader_alloc_test.cc, format/parser_memory_test.cc): operator new and delete
// replaced too, forwarding to the program's malloc and free, so that every C++ allocation
// reaches the counting ones. Definitions, not declarations: include it in one file of a
// program, after that file defines malloc and free.
#ifndef SHARDPACK_TESTS_OPERATOR_NEW_TO_MALLOC_H_
#define SHARDPACK_TESTS_OPERATOR_NEW_TO_MALLOC_H_

#include <cstdlib>
#include <new>

// operator new allocates with malloc, so free is the matching release; GCC cannot see
// that through the replacement.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

void* operator new(size_t size) {
  void* p = malloc(size == 0 ? 1 : size);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}
void* operator new[](size_t size) { return operator new(size); }
void operator delete(void* p) noexcept { free(p); }
void operator delete[](void* p) noexcept { free(p); }
void operator delete(void* p, size_t) noexcept { operator delete(p); }
void operator delete[](void* p, size_t) noexcept { operator delete(p); }

#endif  // SHARDPACK_TESTS_OPERATOR_NEW_TO_MALLOC_H_
