#include "util/text.h"

#include <gtest/gtest.h>

#include <string>

namespace shardpack {
namespace {

TEST(TerminalTextTest, PrintableTextInAnyScriptIsKeptAsItIs) {
  for (const char* text :
       {"class_01", "caf\xc3\xa9", "\xe7\x8c\xab", "\xe3\x81\x8d\xe3\x81\xa4\xe3\x81\xad",
        "a\\x1b b", "\xf0\x9f\x90\x88 emoji", "", "100% of ~/data"}) {
    EXPECT_EQ(TerminalText(text), text);
  }
}

TEST(TerminalTextTest, EveryByteATerminalWouldActOnIsShownAsHex) {
  // OSC 0 (window title) ended by BEL, CSI, CR, backspace, DEL, NUL, newline, tab.
  EXPECT_EQ(TerminalText("\x1b]0;owned\x07"), "\\x1b]0;owned\\x07");
  EXPECT_EQ(TerminalText("\x1b[2J"), "\\x1b[2J");
  EXPECT_EQ(TerminalText("ok\rFAKE\b"), "ok\\x0dFAKE\\x08");
  EXPECT_EQ(TerminalText(std::string("a\x7f\0b", 4)), "a\\x7f\\x00b");
  EXPECT_EQ(TerminalText("line\nshardpack verify: OK\tx"), "line\\x0ashardpack verify: OK\\x09x");
  // C1 controls in UTF-8: CSI (U+009B), OSC (U+009D), the first and the last.
  EXPECT_EQ(TerminalText("\xc2\x9b"
                         "2J"),
            "\\xc2\\x9b2J");
  EXPECT_EQ(TerminalText("\xc2\x9d"
                         "0;t"),
            "\\xc2\\x9d0;t");
  EXPECT_EQ(TerminalText("\xc2\x80\xc2\x9f\xc2\xa0"), "\\xc2\\x80\\xc2\\x9f\xc2\xa0");
  // Bidirectional controls: RLO (U+202E), RLI (U+2067), ALM (U+061C), LRM (U+200E).
  EXPECT_EQ(TerminalText("gpj.\xe2\x80\xae"
                         "exe"),
            "gpj.\\xe2\\x80\\xaeexe");
  EXPECT_EQ(TerminalText("\xe2\x81\xa7x\xd8\x9c\xe2\x80\x8e"),
            "\\xe2\\x81\\xa7x\\xd8\\x9c\\xe2\\x80\\x8e");
}

TEST(TerminalTextTest, InvalidUtf8IsShownByteByByte) {
  EXPECT_EQ(TerminalText("\xff\xfe"), "\\xff\\xfe");
  EXPECT_EQ(TerminalText("caf\xc3"), "caf\\xc3");              // cut short
  EXPECT_EQ(TerminalText("\xc0\xaf"), "\\xc0\\xaf");           // overlong '/'
  EXPECT_EQ(TerminalText("\xed\xa0\x80"), "\\xed\\xa0\\x80");  // a surrogate
  EXPECT_EQ(TerminalText("\xc2"
                         "\x1b"),
            "\\xc2\\x1b");  // a lead byte, then ESC
}

TEST(TerminalTextTest, TheResultHoldsNoControlOfAnyKind) {
  std::string every;
  for (int b = 0; b < 256; ++b) every += static_cast<char>(b);
  every += "\xc2\x85\xe2\x80\xaa\xe2\x81\xa9";
  const std::string shown = TerminalText(every);
  for (size_t i = 0; i < shown.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(shown[i]);
    EXPECT_TRUE(c >= 0x20 && c != 0x7f) << "byte " << int(c) << " at " << i;
    // Every byte >= 0x80 of `every` is either escaped or part of a printable character.
    if (c == 0xc2 && i + 1 < shown.size()) {
      EXPECT_FALSE(static_cast<unsigned char>(shown[i + 1]) <= 0x9f) << "a C1 control at " << i;
    }
  }
}

}  // namespace
}  // namespace shardpack
