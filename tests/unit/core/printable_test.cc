// dl::printable: what a terminal receives of other people's text.
#include "core/printable.h"

#include <gtest/gtest.h>

namespace dl {
namespace {

TEST(Printable, PlainTextAndUtf8PassUnchanged) {
  EXPECT_EQ(printable("loss=0.31 step 40"), "loss=0.31 step 40");
  EXPECT_EQ(printable("a\\b"), "a\\b");
  EXPECT_EQ(printable("r\xc3\xa9sum\xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x99\x82"),
            "r\xc3\xa9sum\xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x99\x82");
  EXPECT_EQ(printable(""), "");
}

TEST(Printable, ControlCharactersBecomeEscapes) {
  EXPECT_EQ(printable("x\x1b]0;owned\ay"), "x\\x1b]0;owned\\x07y");
  EXPECT_EQ(printable("\x1b[2J\x1b[31mred"), "\\x1b[2J\\x1b[31mred");
  EXPECT_EQ(printable("a\tb\nc\rd"), "a\\tb\\nc\\rd");
  EXPECT_EQ(printable(std::string("nul\0here", 8)), "nul\\x00here");
  EXPECT_EQ(printable("del\x7f"), "del\\x7f");
}

TEST(Printable, C1ControlsAndInvalidUtf8BecomeEscapes) {
  EXPECT_EQ(printable("\xc2\x9b"
                      "2J"),
            "\\xc2\\x9b2J");  // U+009B, CSI
  EXPECT_EQ(printable("\x9b"
                      "2J"),
            "\\x9b2J");                                     // a lone 8-bit CSI
  EXPECT_EQ(printable("\xc2\xa0"), "\xc2\xa0");             // U+00A0 is printable
  EXPECT_EQ(printable("\xc0\x9b"), "\\xc0\\x9b");           // overlong
  EXPECT_EQ(printable("\xed\xa0\x80"), "\\xed\\xa0\\x80");  // a surrogate
  EXPECT_EQ(printable("cut \xe2\x9c"), "cut \\xe2\\x9c");   // truncated at the end
  EXPECT_EQ(printable("\xf5\x80\x80\x80"), "\\xf5\\x80\\x80\\x80");
}

}  // namespace
}  // namespace dl
