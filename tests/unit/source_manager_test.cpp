// Unit tests for the source manager's line/column mapping.
#include <catch2/catch.hpp>

#include "support/source_manager.h"

using namespace meshc;

TEST_CASE("line and column of offsets", "[source]") {
    SourceManager sm;
    FileId f = sm.add_file("a.msh", "ab\ncde\n\nf");
    CHECK(sm.line_count(f) == 4);
    CHECK(sm.line_col(f, 0).line == 1);
    CHECK(sm.line_col(f, 0).col == 1);
    CHECK(sm.line_col(f, 1).col == 2);
    CHECK(sm.line_col(f, 2).line == 1);  // the newline belongs to line 1
    CHECK(sm.line_col(f, 3).line == 2);
    CHECK(sm.line_col(f, 3).col == 1);
    CHECK(sm.line_col(f, 7).line == 3);
    CHECK(sm.line_col(f, 8).line == 4);
    CHECK(sm.line_col(f, 9).col == 2);   // end of file: just past the last character
    CHECK(sm.line_col(f, 999).line == 4);  // clamped
}

TEST_CASE("line text without terminators", "[source]") {
    SourceManager sm;
    FileId f = sm.add_file("b.msh", "one\r\ntwo\nthree");
    CHECK(sm.line_text(f, 1) == "one");
    CHECK(sm.line_text(f, 2) == "two");
    CHECK(sm.line_text(f, 3) == "three");
    CHECK(sm.line_text(f, 4).empty());
    CHECK(sm.line_text(f, 0).empty());
}

TEST_CASE("spans join", "[source]") {
    Span a{0, 4, 8};
    Span b{0, 2, 5};
    Span j = a.to(b);
    CHECK(j.begin == 2);
    CHECK(j.end == 8);
    CHECK(a.to(Span{}).begin == 4);
    CHECK(Span{}.to(b).begin == 2);
}

TEST_CASE("empty file", "[source]") {
    SourceManager sm;
    FileId f = sm.add_file("e.msh", "");
    CHECK(sm.line_count(f) == 1);
    CHECK(sm.line_col(f, 0).line == 1);
    CHECK(sm.line_col(f, 0).col == 1);
}
