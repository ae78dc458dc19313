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

// `text` (a class name, a file name, a key, a message quoting any of them: bytes from a
// dataset or the file system) made safe to show on a terminal, which would otherwise
// act on the controls it holds (set the window title or the clipboard through OSC, move
// the cursor, rewrite the line). Returned unchanged when it holds none. Otherwise every
// byte of what a terminal would interpret is written as "\xNN" (ESC as \x1b):
//   - bytes that are not valid UTF-8 (a terminal may take them for controls);
//   - the C0 controls U+0000..U+001F, newline and tab included (a name must not start a
//     line that looks like the CLI's own), and DEL (U+007F);
//   - the C1 controls U+0080..U+009F (in UTF-8 0xC2 0x80..0xC2 0x9F; 0xC2 0x9B is CSI);
//   - the bidirectional controls U+061C, U+200E, U+200F, U+202A..U+202E and
//     U+2066..U+2069, which reorder how the rest of the line is shown.
// Every other character is kept as it is: printable ASCII, backslashes included, and
// printable non-ASCII text ("café", "猫"). The result is for people to read, not to parse
// back (a name that holds "\x1b" as text shows the same): the CLI's --json is for machines.
std::string TerminalText(std::string_view text);

// Whether `bytes` is valid UTF-8 (no overlong form, surrogate or code point past
// U+10FFFF) without a C0 control character or DEL: the text EscapeBytes keeps as it is
// (a backslash aside, which it doubles).
bool IsPrintableUtf8(std::string_view bytes);

// The deepest nesting of objects and arrays in JSON text (brackets inside strings do not
// count); for text that is not JSON, some number the parser then refuses anyway. Checked
// before parsing, since nlohmann::json's parser and dump() recurse.
int JsonNestingDepth(std::string_view text);

}  // namespace shardpack

#endif  // SHARDPACK_UTIL_TEXT_H_
