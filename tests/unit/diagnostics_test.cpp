// Unit tests for diagnostic rendering (human and JSON) and the code table.
#include <catch2/catch.hpp>

#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "support/diagnostics.h"

using namespace meshc;

TEST_CASE("human rendering shows location, code, source line and carets", "[diag]") {
    SourceManager sm;
    FileId f = sm.add_file("t.msh", "fn f() {\n    let x = y;\n}\n");
    DiagnosticEngine diags;
    diags.emit(DiagCode::E0201, Span{f, 21, 22}, "unknown name `y`").note("did you mean `x`?");
    std::ostringstream out;
    render_human(out, sm, diags.diagnostics());
    CHECK(out.str() ==
          "t.msh:2:13: error[E0201]: unknown name `y`\n"
          " 2 |     let x = y;\n"
          "   |             ^\n"
          "  = note: did you mean `x`?\n");
}

TEST_CASE("multi-character spans are underlined; tabs expand", "[diag]") {
    SourceManager sm;
    FileId f = sm.add_file("t.msh", "\tlet abc = 1;\n");
    DiagnosticEngine diags;
    diags.emit(DiagCode::E0104, Span{f, 5, 8}, "bad");
    std::ostringstream out;
    render_human(out, sm, diags.diagnostics());
    CHECK(out.str() ==
          "t.msh:1:6: error[E0104]: bad\n"
          " 1 |     let abc = 1;\n"
          "   |         ^~~\n");
}

TEST_CASE("notes with spans render their own snippet", "[diag]") {
    SourceManager sm;
    FileId f = sm.add_file("n.msh", "a\nb\n");
    DiagnosticEngine diags;
    diags.emit(DiagCode::E0202, Span{f, 2, 3}, "dup").note("first here", Span{f, 0, 1});
    std::ostringstream out;
    render_human(out, sm, diags.diagnostics());
    CHECK(out.str() ==
          "n.msh:2:1: error[E0202]: dup\n"
          " 2 | b\n"
          "   | ^\n"
          "n.msh:1:1: note: first here\n"
          " 1 | a\n"
          "   | ^\n");
}

TEST_CASE("JSON rendering has the documented fields in order", "[diag]") {
    SourceManager sm;
    FileId f = sm.add_file("j.msh", "let\n");
    DiagnosticEngine diags;
    diags.emit(DiagCode::E0104, Span{f, 0, 3}, "expected an item").note("no span");
    std::ostringstream out;
    render_json(out, sm, diags.diagnostics());
    std::string line = out.str();
    REQUIRE(line.back() == '\n');
    auto j = nlohmann::ordered_json::parse(line);
    std::vector<std::string> keys;
    for (auto it = j.begin(); it != j.end(); ++it) keys.push_back(it.key());
    CHECK(keys == std::vector<std::string>{"severity", "code", "message", "file", "line", "col",
                                           "end_line", "end_col", "notes"});
    CHECK(j["code"] == "E0104");
    CHECK(j["severity"] == "error");
    CHECK(j["line"] == 1);
    CHECK(j["col"] == 1);
    CHECK(j["end_col"] == 4);
    CHECK(j["notes"][0]["message"] == "no span");
    CHECK(j["notes"][0]["line"].is_null());
}

TEST_CASE("JSON survives invalid UTF-8 in messages", "[diag]") {
    SourceManager sm;
    FileId f = sm.add_file("u.msh", "x");
    DiagnosticEngine diags;
    diags.emit(DiagCode::E0101, Span{f, 0, 1}, std::string("bad \xff byte"));
    std::ostringstream out;
    REQUIRE_NOTHROW(render_json(out, sm, diags.diagnostics()));
    CHECK(nlohmann::json::parse(out.str())["code"] == "E0101");
}

TEST_CASE("code table: unique names, phase prefix, titles", "[diag]") {
    std::set<std::string_view> names;
    for (DiagCode c : all_diag_codes()) {
        const DiagCodeInfo& info = diag_code_info(c);
        CHECK(names.insert(info.name).second);
        CHECK(info.name.size() == 5);
        CHECK((info.name[0] == 'E' || info.name[0] == 'W'));
        CHECK(!info.title.empty());
    }
}

TEST_CASE("errors are counted and sorted by position", "[diag]") {
    SourceManager sm;
    FileId f = sm.add_file("s.msh", "abcdef");
    DiagnosticEngine diags;
    diags.emit(DiagCode::E0201, Span{f, 4, 5}, "second");
    diags.emit(DiagCode::E0201, Span{f, 1, 2}, "first");
    CHECK(diags.error_count() == 2);
    auto sorted = diags.sorted();
    CHECK(sorted[0].message == "first");
    CHECK(sorted[1].message == "second");
}
