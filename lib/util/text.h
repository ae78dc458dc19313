// Text helpers for names that come from the file system: bytes, not necessarily UTF-8.
#ifndef SHARDPACK_UTIL_TEXT_H_
#define SHARDPACK_UTIL_TEXT_H_

#include <string>
#include <string_view>

namespace shardpack {

// Returns `bytes` unchanged when it is valid UTF-8 without control characters; otherwise
// every byte that is not part of a valid printable sequence becomes "\xNN" (and a
// backslash becomes "\\"), so the result is valid UTF-8 and names each byte. Used for
// class names (in the manifest and the records) and for paths in messages and
// rejects.tsv.
std::string EscapeBytes(std::string_view bytes);

// Whether `bytes` is valid UTF-8 (no overlong form, surrogate or code point past
// U+10FFFF) without a C0 control character or DEL: the text EscapeBytes keeps as it is
// (a backslash aside, which it doubles).
bool IsPrintableUtf8(std::string_view bytes);

}  // namespace shardpack

#endif  // SHARDPACK_UTIL_TEXT_H_
