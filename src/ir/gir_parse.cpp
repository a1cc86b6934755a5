// The GIR text reader; see gir_parse.h. The grammar is the printer's (src/ir/gir.cpp), line
// by line: a module line (`device`, `mesh`, `arg`), a function header, one op per line with
// its results' types, position, call path and `// inserted: reason` or `// backward`, a
// `region(...) {` line per region of `for` and `if`, `yield` and `return`, and `}`.
#include "ir/gir_parse.h"

#include <fmt/format.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>

namespace meshc::ir {
namespace {

/// Spans whose position is known only as `path:line:col` until every file is read: the
/// index of the position in `Parser::locs_` is in `begin`.
constexpr FileId kPendingFile = kNoFile - 1;
/// A run-time slice's position text still to be made from its span.
constexpr std::string_view kOwnPosition = "\x01own position";

struct Failure {
    size_t offset;
    std::string message;
};

struct RawLoc {
    std::string path;  // empty: the GIR file itself
    uint32_t line = 0;
    uint32_t col = 0;
    uint32_t length = 0;  // `+N`: bytes
    size_t offset = 0;    // of the `@` in the GIR text, for an error about it
};

/// A function's name as printed: `f`, `f[T = bf16, M = Pod, B = 8]`, `grad(f)`.
struct Label {
    std::string name;
    std::string derived;
    std::map<std::string, int64_t> instance;
    std::map<std::string, std::string> mesh_instance;
    std::map<std::string, std::string> dtype_instance;
    int copy = 1;  // `@f#2`: the second function printed with the label `f`

    std::string text() const {
        Function f;
        f.name = name;
        f.derived = derived;
        f.instance = instance;
        f.mesh_instance = mesh_instance;
        f.dtype_instance = dtype_instance;
        return copy == 1 ? function_label(f) : fmt::format("{}#{}", function_label(f), copy);
    }
};

bool ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.'; }

class Parser {
public:
    Parser(SourceManager& sources, FileId file, DiagnosticEngine& diags)
        : sources_(sources), file_(file), diags_(diags), text_(sources.text(file)) {}

    std::optional<Module> run() {
        try {
            collect_labels();
            reset();
            while (next_line()) {
                if (eat_word("device")) {
                    device();
                } else if (eat_word("mesh")) {
                    mesh();
                } else if (eat_word("arg")) {
                    arg();
                } else if (eat_word("func")) {
                    function();
                } else {
                    fail("expected `device`, `mesh`, `arg` or `func` at the start of a line");
                }
            }
            resolve_positions();
        } catch (const Failure& f) {
            uint32_t at = static_cast<uint32_t>(std::min(f.offset, text_.size()));
            uint32_t end = at < text_.size() && text_[at] != '\n' ? at + 1 : at;
            diags_.emit(DiagCode::E0712, Span{file_, at, end}, f.message);
            return std::nullopt;
        }
        return std::move(module_);
    }

private:
    // ---- Lines and characters ------------------------------------------------------

    void reset() {
        next_ = 0;
        line_end_ = pos_ = 0;
    }

    /// Moves to the next line that has something besides blanks and a `//` comment; false
    /// at the end of the text.
    bool next_line() {
        while (next_ < text_.size()) {
            size_t begin = next_;
            size_t end = text_.find('\n', begin);
            if (end == std::string_view::npos) end = text_.size();
            next_ = end + 1;
            line_end_ = end;
            if (line_end_ > begin && text_[line_end_ - 1] == '\r') --line_end_;
            pos_ = begin;
            if (!at_end()) return true;
        }
        pos_ = line_end_ = text_.size();
        return false;
    }

    struct Mark {
        size_t next, line_end, pos;
    };
    Mark mark() const { return {next_, line_end_, pos_}; }
    void restore(Mark m) {
        next_ = m.next;
        line_end_ = m.line_end;
        pos_ = m.pos;
    }

    [[noreturn]] void fail(std::string message) const { throw Failure{pos_, std::move(message)}; }

    /// The position of the next token.
    size_t here() {
        ws();
        return pos_;
    }

    void ws() {
        while (pos_ < line_end_ && (text_[pos_] == ' ' || text_[pos_] == '\t')) ++pos_;
    }
    /// Nothing but blanks and a `//` comment left on the line.
    bool at_end() {
        ws();
        return pos_ >= line_end_ || text_.substr(pos_, 2) == "//";
    }
    char peek() {
        ws();
        return pos_ < line_end_ ? text_[pos_] : '\n';
    }
    bool eat(char c) {
        if (peek() != c) return false;
        ++pos_;
        return true;
    }
    bool eat(std::string_view s) {
        ws();
        if (text_.substr(pos_, s.size()) != s || pos_ + s.size() > line_end_) return false;
        pos_ += s.size();
        return true;
    }
    void expect(char c) {
        if (!eat(c)) fail(fmt::format("expected `{}` here", c));
    }
    void expect(std::string_view s) {
        if (!eat(s)) fail(fmt::format("expected `{}` here", s));
    }
    bool eat_word(std::string_view w) {
        ws();
        if (text_.substr(pos_, w.size()) != w || pos_ + w.size() > line_end_) return false;
        size_t after = pos_ + w.size();
        if (after < line_end_ && ident_char(text_[after])) return false;
        pos_ = after;
        return true;
    }
    void expect_word(std::string_view w) {
        if (!eat_word(w)) fail(fmt::format("expected `{}` here", w));
    }
    void expect_end() {
        if (!at_end()) fail("unexpected text at the end of the line");
    }

    std::string ident(std::string_view what = "a name") {
        ws();
        size_t begin = pos_;
        while (pos_ < line_end_ && ident_char(text_[pos_])) ++pos_;
        if (pos_ == begin) fail(fmt::format("expected {} here", what));
        return std::string(text_.substr(begin, pos_ - begin));
    }

    int64_t integer() {
        ws();
        size_t begin = pos_;
        if (pos_ < line_end_ && text_[pos_] == '-') ++pos_;
        size_t digits = pos_;
        while (pos_ < line_end_ && std::isdigit(static_cast<unsigned char>(text_[pos_]))) ++pos_;
        if (pos_ == digits) {
            pos_ = begin;
            fail("expected an integer here");
        }
        std::string s(text_.substr(begin, pos_ - begin));
        errno = 0;
        long long v = std::strtoll(s.c_str(), nullptr, 10);
        if (errno == ERANGE) {
            pos_ = begin;
            fail(fmt::format("`{}` is out of the range of a 64-bit integer", s));
        }
        return v;
    }

    double number() {
        ws();
        size_t begin = pos_;
        if (eat_word("inf")) return INFINITY;
        if (eat_word("-inf")) return -INFINITY;
        if (eat_word("nan") || eat_word("-nan")) return NAN;
        while (pos_ < line_end_ && (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '.' ||
                                    text_[pos_] == '-' || text_[pos_] == '+')) {
            ++pos_;
        }
        std::string s(text_.substr(begin, pos_ - begin));
        char* end = nullptr;
        double v = std::strtod(s.c_str(), &end);
        if (s.empty() || end != s.c_str() + s.size()) {
            pos_ = begin;
            fail("expected a number here");
        }
        return v;
    }

    std::string str() {
        if (!eat('"')) fail("expected a string in double quotes here");
        std::string out;
        while (pos_ < line_end_ && text_[pos_] != '"') {
            char c = text_[pos_++];
            if (c == '\\' && pos_ < line_end_) {
                char e = text_[pos_++];
                out += e == 'n' ? '\n' : e;
            } else {
                out += c;
            }
        }
        if (pos_ >= line_end_) fail("the string is not closed on its line");
        ++pos_;
        return out;
    }

    ValueId value() {
        if (!eat('%')) fail("expected a value (`%N`) here");
        size_t begin = pos_;
        while (pos_ < line_end_ && std::isdigit(static_cast<unsigned char>(text_[pos_]))) ++pos_;
        if (pos_ == begin) fail("expected the number of a value after `%`");
        unsigned long long v = std::strtoull(std::string(text_.substr(begin, pos_ - begin)).c_str(), nullptr, 10);
        if (v >= 100'000'000) {  // the types are a dense table indexed by value
            pos_ = begin;
            fail("value numbers above 99999999 are not supported");
        }
        return static_cast<ValueId>(v);
    }

    /// `/*name*/` after a value where it is defined; "" when there is none.
    std::string name_comment() {
        if (!eat("/*")) return {};
        size_t end = text_.find("*/", pos_);
        if (end == std::string_view::npos || end > line_end_) fail("the `/*` comment is not closed on its line");
        std::string name(text_.substr(pos_, end - pos_));
        pos_ = end + 2;
        return name;
    }

    std::vector<int64_t> int_list() {
        expect('[');
        std::vector<int64_t> out;
        if (eat(']')) return out;
        do out.push_back(integer());
        while (eat(','));
        expect(']');
        return out;
    }

    /// `@L:C`, `@PATH:L:C` or `@?` (a position not known), after the `@`.
    RawLoc location() {
        RawLoc loc;
        loc.offset = here();
        expect('@');
        size_t begin = pos_;
        while (pos_ < line_end_ && text_[pos_] != ' ' && text_[pos_] != '\t') ++pos_;
        if (pos_ > begin && text_[pos_ - 1] == ',') --pos_;  // `via @3:4, @5:6`
        std::string_view t = text_.substr(begin, pos_ - begin);
        if (t == "?") {
            loc.line = 0;
            return loc;
        }
        size_t c2 = t.rfind(':');
        size_t c1 = c2 == std::string_view::npos || c2 == 0 ? std::string_view::npos : t.rfind(':', c2 - 1);
        auto num = [&](std::string_view s) {
            if (s.empty() || s.size() > 9 || s.find_first_not_of("0123456789") != std::string_view::npos) {
                pos_ = begin;
                fail("expected a position `@LINE:COL` or `@PATH:LINE:COL` here");
            }
            return static_cast<uint32_t>(std::stoul(std::string(s)));
        };
        if (c2 == std::string_view::npos) {
            pos_ = begin;
            fail("expected a position `@LINE:COL` or `@PATH:LINE:COL` here");
        }
        if (c1 == std::string_view::npos) {
            loc.line = num(t.substr(0, c2));
        } else {
            loc.path = std::string(t.substr(0, c1));
            loc.line = num(t.substr(c1 + 1, c2 - c1 - 1));
        }
        std::string_view col = t.substr(c2 + 1);
        if (size_t plus = col.find('+'); plus != std::string_view::npos) {
            loc.length = num(col.substr(plus + 1));
            col = col.substr(0, plus);
        }
        loc.col = num(col);
        if (loc.line == 0 || loc.col == 0) {
            pos_ = begin;
            fail("lines and columns count from 1");
        }
        return loc;
    }

    /// A span to be resolved once every file is known (resolve_positions).
    Span pending(RawLoc loc, const std::string& function_path) {
        if (loc.line == 0) return Span{};  // `@?`
        if (loc.path.empty()) loc.path = function_path;
        locs_.push_back(std::move(loc));
        uint32_t index = static_cast<uint32_t>(locs_.size() - 1);
        return Span{kPendingFile, index, index};
    }

    // ---- Module lines -----------------------------------------------------------------

    void device() {
        DeviceModel& d = module_.device;
        d.name = str();
        expect('=');
        expect('{');
        std::map<std::string, double*> fields{
            {"matmul_f64", &d.matmul_f64},     {"matmul_f32", &d.matmul_f32},     {"matmul_f16", &d.matmul_f16},
            {"matmul_int", &d.matmul_int},     {"vector_flops", &d.vector_flops}, {"memory_bandwidth", &d.memory_bandwidth},
            {"memory_bytes", &d.memory_bytes}};
        if (!eat('}')) {
            do {
                size_t at = here();
                std::string key = ident("a device rate");
                auto it = fields.find(key);
                if (it == fields.end()) {
                    pos_ = at;
                    fail(fmt::format("`{}` is not a figure of a device model", key));
                }
                expect(':');
                *it->second = number();
            } while (eat(','));
            expect('}');
        }
        expect_end();
    }

    void mesh() {
        Mesh m;
        size_t at = here();
        m.name = ident("the mesh's name");
        for (const Mesh& other : module_.meshes) {
            if (other.name == m.name) {
                pos_ = at;
                fail(fmt::format("mesh `{}` is declared twice", m.name));
            }
        }
        expect('=');
        expect('[');
        if (!eat(']')) {
            do {
                MeshAxis axis;
                axis.name = ident("an axis name");
                expect(':');
                axis.size = integer();
                if (axis.size < 1) fail("an axis has at least one device");
                if (eat('{')) {
                    do {
                        std::string key = ident("`latency` or `bandwidth`");
                        expect(':');
                        if (key == "latency") {
                            axis.latency = number();
                        } else if (key == "bandwidth") {
                            axis.bandwidth = number();
                        } else {
                            fail(fmt::format("an axis has a `latency` and a `bandwidth`, not `{}`", key));
                        }
                    } while (eat(','));
                    expect('}');
                }
                m.axes.push_back(std::move(axis));
                if (m.axes.size() > kMaxMeshAxes) fail(fmt::format("a mesh has at most {} axes", kMaxMeshAxes));
            } while (eat(','));
            expect(']');
        }
        expect_end();
        module_.meshes.push_back(std::move(m));
    }

    void arg() {
        ProgramArg a;
        a.name = str();
        expect(':');
        std::string kind = ident("the argument's kind");
        if (kind == "i64") {
            a.kind = ProgramArg::Int;
        } else if (kind == "f32") {
            a.kind = ProgramArg::Float;
        } else if (kind == "bool") {
            a.kind = ProgramArg::Bool;
        } else if (kind == "path") {
            a.kind = ProgramArg::Path;
        } else {
            fail(fmt::format("an argument is an `i64`, `f32`, `bool` or `path`, not `{}`", kind));
        }
        expect('=');
        a.default_text = str();
        if (a.kind == ProgramArg::Bool) {
            a.number = a.default_text == "true" ? 1 : 0;
        } else if (a.kind != ProgramArg::Path) {
            a.number = std::strtod(a.default_text.c_str(), nullptr);
        }
        expect_end();
        module_.args.push_back(std::move(a));
    }

    // ---- Types --------------------------------------------------------------------------

    DType dtype() {
        size_t at = here();
        std::string name = ident("an element type");
        DType t;
        if (!dtype_from_name(name, t)) {
            pos_ = at;
            fail(fmt::format("`{}` is not an element type", name));
        }
        return t;
    }

    size_t axis_of(const Mesh& mesh, const std::string& name, size_t at) {
        std::optional<size_t> a = mesh.axis_index(name);
        if (!a) {
            pos_ = at;
            fail(fmt::format("mesh `{}` has no axis `{}`", mesh.name, name));
        }
        return *a;
    }

    TensorType type() {
        TensorType t;
        ws();
        if (!eat_word("Tensor")) {
            t.dtype = dtype();
            t.layout = Layout::replicated(0);
            return t;
        }
        t.dtype = dtype();
        t.shape = int_list();
        for (int64_t s : t.shape) {
            if (s < 0) fail("a dim's size is not negative");
        }
        t.layout = Layout::replicated(t.shape.size());
        const Mesh* mesh = nullptr;
        if (eat_word("on")) {
            size_t at = here();
            std::string name = ident("a mesh name");
            for (size_t i = 0; i < module_.meshes.size(); ++i) {
                if (module_.meshes[i].name == name) {
                    t.mesh = static_cast<int32_t>(i);
                    mesh = &module_.meshes[i];
                }
            }
            if (!mesh) {
                pos_ = at;
                fail(fmt::format("no mesh `{}` is declared above", name));
            }
        }
        if (eat_word("with")) {
            if (!mesh) fail("a layout with splits needs the mesh (`on M`) before it");
            expect('{');
            if (!eat('}')) {
                do {
                    size_t at = here();
                    int64_t d = integer();
                    if (d < 0 || static_cast<size_t>(d) >= t.shape.size()) {
                        pos_ = at;
                        fail(fmt::format("dim {} is not a dim of a rank-{} tensor", d, t.shape.size()));
                    }
                    expect(':');
                    AxisList axes;
                    auto one = [&] {
                        size_t a_at = here();
                        std::string name = ident("an axis name");
                        axes.push_back(static_cast<uint8_t>(axis_of(*mesh, name, a_at)));
                    };
                    if (eat('(')) {
                        do one();
                        while (eat(','));
                        expect(')');
                    } else {
                        one();
                    }
                    t.layout.dims[static_cast<size_t>(d)] = axes;
                } while (eat(','));
                expect('}');
            }
        }
        if (eat_word("partial")) {
            if (!mesh) fail("a pending sum needs the mesh (`on M`) before it");
            expect('{');
            do {
                size_t at = here();
                std::string name = ident("an axis name");
                t.layout.partial |= axis_bit(axis_of(*mesh, name, at));
            } while (eat(','));
            expect('}');
        }
        return t;
    }

    // ---- Functions ----------------------------------------------------------------------

    /// A label, with its `#N` when it is not the first function of that label.
    Label label() {
        Label l = bare_label();
        if (pos_ < line_end_ && text_[pos_] == '#') {
            ++pos_;
            int64_t n = integer();
            if (n < 2) fail("a repeated label is numbered from `#2`");
            l.copy = static_cast<int>(n);
        }
        return l;
    }

    Label bare_label() {
        Label l;
        std::string first = ident("a function name");
        if ((first == "grad" || first == "value_and_grad") && peek() == '(') {
            Mark m = mark();
            ++pos_;
            ws();
            if (pos_ < line_end_ && (std::isalpha(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_')) {
                Label inner = bare_label();
                expect(')');
                inner.derived = first;
                return inner;
            }
            restore(m);
        }
        l.name = first;
        if (peek() == '[') {
            ++pos_;
            do {
                std::string var = ident("a generic parameter");
                expect('=');
                char c = peek();
                if (std::isdigit(static_cast<unsigned char>(c)) || c == '-') {
                    l.instance[var] = integer();
                } else {
                    std::string v = ident("a mesh, element type or size");
                    DType t;
                    if (dtype_from_name(v, t)) {
                        l.dtype_instance[var] = v;
                    } else {
                        l.mesh_instance[var] = v;
                    }
                }
            } while (eat(','));
            expect(']');
        }
        return l;
    }

    /// Every function's label, in order, so that a call may name one printed below it.
    void collect_labels() {
        while (next_line()) {
            if (!eat_word("func")) continue;
            expect('@');
            size_t at = here();
            std::string text = label().text();
            if (!labels_.emplace(text, static_cast<int32_t>(labels_.size())).second) {
                pos_ = at;
                fail(fmt::format("function `@{}` is defined twice", text));
            }
        }
    }

    int32_t callee() {
        expect('@');
        size_t at = here();
        std::string text = label().text();
        auto it = labels_.find(text);
        if (it == labels_.end()) {
            pos_ = at;
            fail(fmt::format("no function `@{}` is defined in this module", text));
        }
        return it->second;
    }

    struct FnState {
        Function* f = nullptr;
        std::vector<bool> defined;
        std::vector<std::pair<ValueId, size_t>> uses;  // value, offset of the use
        std::string path;                              // the file of its positions
    };

    void define(FnState& s, ValueId v, TensorType t, std::string name, size_t at) {
        Function& f = *s.f;
        while (f.types.size() <= v) {
            f.types.emplace_back();
            f.names.emplace_back();
        }
        if (s.defined.size() <= v) s.defined.resize(v + 1, false);
        if (s.defined[v]) {
            pos_ = at;
            fail(fmt::format("value %{} is defined twice", v));
        }
        s.defined[v] = true;
        f.types[v] = std::move(t);
        f.names[v] = std::move(name);
    }

    ValueId use(FnState& s) {
        size_t at = here();
        ValueId v = value();
        s.uses.emplace_back(v, at);
        return v;
    }

    std::vector<ValueId> uses(FnState& s) {
        std::vector<ValueId> out;
        if (peek() != '%') return out;
        do out.push_back(use(s));
        while (eat(','));
        return out;
    }

    void function() {
        func_at_ = pos_ - 4;  // the `func` before the `@`
        expect('@');
        Label l = label();
        Function f;
        f.name = l.name;
        f.derived = l.derived;
        f.instance = l.instance;
        f.mesh_instance = l.mesh_instance;
        f.dtype_instance = l.dtype_instance;
        FnState s;
        s.f = &f;
        expect('(');
        typed_values(s, f.params);
        std::vector<TensorType> result_types;
        if (eat("->")) {
            expect('(');
            if (!eat(')')) {
                do result_types.push_back(type());
                while (eat(','));
                expect(')');
            }
        }
        if (eat_word("checkpoint")) f.checkpoint = true;
        expect('{');
        if (peek() == '@') {
            RawLoc loc = location();
            if (loc.path.empty() && loc.line) {
                pos_ = loc.offset;
                fail("a function's position names its file: `@PATH:LINE:COL`");
            }
            s.path = loc.path;
            f.span = pending(loc, s.path);
        } else {
            // A hand-written function: it is where its `func` is, and its ops' `@L:C` are
            // positions of the GIR file (printed again as such).
            f.span = Span{file_, static_cast<uint32_t>(func_at_), static_cast<uint32_t>(func_at_)};
        }
        expect_end();
        size_t header_end = pos_;
        // The body, then `return` (when there are results) and `}`.
        bool returned = false;
        for (;;) {
            if (!next_line()) {
                pos_ = header_end;
                fail(fmt::format("function `@{}` is not closed with `}}`", l.text()));
            }
            if (eat('}')) {
                expect_end();
                break;
            }
            if (eat_word("return")) {
                if (returned) fail("a function returns once, at its end");
                returned = true;
                size_t at = here();
                f.results = uses(s);
                expect_end();
                if (f.results.size() != result_types.size()) {
                    pos_ = at;
                    fail(fmt::format("the header says {} results and `return` gives {}", result_types.size(),
                                     f.results.size()));
                }
                result_at_ = at;
                continue;
            }
            if (returned) fail("`return` is the function's last line");
            op(s, f.ops);
        }
        if (!returned && !result_types.empty()) {
            pos_ = header_end;
            fail(fmt::format("function `@{}` has results and no `return`", l.text()));
        }
        check_uses(s);
        for (size_t i = 0; i < f.results.size(); ++i) {
            if (f.types[f.results[i]] != result_types[i]) {
                pos_ = result_at_;
                fail(fmt::format("result {} is %{}, of type {}, and the header says {}", i, f.results[i],
                                 type_to_string(module_, f.types[f.results[i]]), type_to_string(module_, result_types[i])));
            }
        }
        module_.functions.push_back(std::move(f));
    }

    void check_uses(const FnState& s) {
        for (const auto& [v, at] : s.uses) {
            if (v >= s.defined.size() || !s.defined[v]) {
                pos_ = at;
                fail(fmt::format("value %{} is used and never defined", v));
            }
        }
    }

    /// `%0 /*x*/: T, %1: U)` (a function's parameters, a region's arguments), each
    /// defined with its type, up to and including the `)`.
    void typed_values(FnState& s, std::vector<ValueId>& out) {
        if (eat(')')) return;
        do {
            size_t at = here();
            ValueId v = value();
            std::string name = name_comment();
            expect(':');
            define(s, v, type(), std::move(name), at);
            out.push_back(v);
        } while (eat(','));
        expect(')');
    }

    /// `region(%5: T, ...) {`, the region's ops, `yield ...`, `}`.
    void region(FnState& s, Region& r) {
        expect("region(");
        typed_values(s, r.args);
        expect('{');
        expect_end();
        size_t at = here();
        for (;;) {
            if (!next_line()) {
                pos_ = at;
                fail("the region is not closed with `yield` and `}`");
            }
            if (eat_word("yield")) {
                r.yields = uses(s);
                expect_end();
                if (!next_line() || !eat('}')) fail("expected `}` after the region's `yield`");
                expect_end();
                return;
            }
            if (peek() == '}') fail("a region ends with `yield` (with no values: `yield`)");
            op(s, r.ops);
        }
    }

    void axis_names_clause() {
        expect_word("over");
        expect('(');
        pending_axes_.clear();
        if (!eat(')')) {
            do {
                size_t at = here();
                pending_axes_.emplace_back(ident("an axis name"), at);
            } while (eat(','));
            expect(')');
        }
    }

    int32_t dim_word() {
        expect_word("dim");
        int64_t d = integer();
        if (d < 0 || d > 1'000'000) fail("expected a dim index here");
        return static_cast<int32_t>(d);
    }

    void op(FnState& s, std::vector<Op>& ops) {
        Op op{OpKind::Constant};
        std::vector<std::pair<ValueId, std::pair<std::string, size_t>>> results;
        if (peek() == '%') {
            do {
                size_t at = here();
                ValueId v = value();
                results.push_back({v, {name_comment(), at}});
            } while (eat(','));
            expect('=');
        }
        size_t name_at = here();
        std::string name = ident("an op name");
        auto kind = op_kinds().find(name);
        if (kind == op_kinds().end()) {
            pos_ = name_at;
            fail(fmt::format("`{}` is not a GIR op", name));
        }
        op.kind = kind->second;
        pending_axes_.clear();
        auto reduce_kind = [&] {
            size_t at = here();
            std::string r = ident("`sum`, `mean` or `max`");
            if (r == "sum") return ReduceKind::Sum;
            if (r == "mean") return ReduceKind::Mean;
            if (r == "max") return ReduceKind::Max;
            pos_ = at;
            fail(fmt::format("`{}` is not a reduction (`sum`, `mean`, `max`)", r));
        };
        switch (op.kind) {
        case OpKind::Constant:
            op.number = number();
            op.operands = uses(s);
            break;
        case OpKind::Create: {
            size_t at = here();
            std::string c = ident("a create kind");
            static const std::map<std::string, CreateKind, std::less<>> creates{
                {"zeros", CreateKind::Zeros},
                {"ones", CreateKind::Ones},
                {"full", CreateKind::Full},
                {"iota", CreateKind::Iota},
                {"random_normal", CreateKind::RandomNormal},
                {"random_uniform", CreateKind::RandomUniform},
                {"permutation", CreateKind::Permutation}};
            auto it = creates.find(c);
            if (it == creates.end()) {
                pos_ = at;
                fail(fmt::format("`{}` is not a create kind", c));
            }
            op.create = it->second;
            if (eat_word("seed") && peek() != '%') op.seed = integer();
            if (op.create == CreateKind::Full) op.number = number();
            if (peek() == 'd') op.dim = dim_word();
            op.operands = uses(s);
            break;
        }
        case OpKind::Load:
        case OpKind::Save:
            if (eat_word("arg")) op.ints = {arg_index()};
            op.text = str();
            if (eat('[')) {
                if (!eat(']')) {
                    do op.names.push_back(str());
                    while (eat(','));
                    expect(']');
                }
            }
            op.operands = uses(s);
            break;
        case OpKind::Arg:
            op.ints = {arg_index()};
            break;
        case OpKind::Contract:
        case OpKind::Print:
            op.text = str();
            op.operands = uses(s);
            break;
        case OpKind::Elementwise: {
            size_t at = here();
            std::string e = ident("an element-wise function");
            auto it = ew_kinds().find(e);
            if (it == ew_kinds().end()) {
                pos_ = at;
                fail(fmt::format("`{}` is not an element-wise function", e));
            }
            op.ew = it->second;
            op.operands = uses(s);
            break;
        }
        case OpKind::Reduce:
            op.reduce = reduce_kind();
            expect_word("dims");
            op.ints = int_list();
            op.operands = uses(s);
            break;
        case OpKind::AllReduce:
            op.reduce = reduce_kind();
            axis_names_clause();
            op.operands = uses(s);
            break;
        case OpKind::ReduceScatter:
            op.reduce = reduce_kind();
            axis_names_clause();
            op.dim = dim_word();
            op.operands = uses(s);
            break;
        case OpKind::AllGather:
        case OpKind::LocalSlice:
            axis_names_clause();
            op.dim = dim_word();
            op.operands = uses(s);
            break;
        case OpKind::AllToAll:
            axis_names_clause();
            op.dim = dim_word();
            expect("->");
            op.dim2 = static_cast<int32_t>(integer());
            op.operands = uses(s);
            break;
        case OpKind::MakePartial:
            axis_names_clause();
            op.operands = uses(s);
            break;
        case OpKind::For:
        case OpKind::If:
        case OpKind::Place:
        case OpKind::Embedding:
            op.operands = uses(s);
            break;
        case OpKind::Reshape:
        case OpKind::Broadcast:
            op.ints = int_list();
            op.operands = uses(s);
            break;
        case OpKind::OneHot:
            op.ints = {integer()};
            op.operands = uses(s);
            break;
        case OpKind::Slice:
        case OpKind::Pad:
            op.dim = dim_word();
            ws();
            if (text_.substr(pos_, 2) == "[%") {  // a run-time start: `[%5, 4] %2`
                expect('[');
                ValueId start = use(s);
                expect(',');
                op.ints = {0, integer()};
                expect(']');
                op.operands = {use(s), start};
                // Without `at`: the op's own position, once it is known (resolve_positions).
                op.text = eat_word("at") ? str() : op.kind == OpKind::Slice ? std::string(kOwnPosition) : std::string();
            } else {
                op.ints = int_list();
                op.operands = uses(s);
            }
            break;
        case OpKind::Concat:
            op.dim = dim_word();
            op.operands = uses(s);
            break;
        case OpKind::Grad:
        case OpKind::Call:
            if (op.kind == OpKind::Grad) op.dim = eat_word("value_and_grad") ? 1 : 0;
            op.callee = callee();
            expect('(');
            op.operands = uses(s);
            expect(')');
            break;
        }
        // The results' types.
        std::vector<TensorType> types;
        if (!results.empty()) {
            expect(':');
            if (results.size() == 1) {
                types.push_back(type());
            } else {
                expect('(');
                do types.push_back(type());
                while (eat(','));
                expect(')');
                if (types.size() != results.size()) {
                    fail(fmt::format("{} results and {} types", results.size(), types.size()));
                }
            }
        }
        if (op.kind == OpKind::Elementwise && op.ew == Ew::Cast && !types.empty()) op.dtype = types[0].dtype;
        // A reduction that keeps its dims (with size 1) keeps its operand's rank.
        if (op.kind == OpKind::Reduce && !op.ints.empty() && !types.empty() && !op.operands.empty() &&
            op.operands[0] < s.defined.size() && s.defined[op.operands[0]]) {
            op.keep_dims = types[0].rank() == s.f->types[op.operands[0]].rank();
        }
        // A collective's axes are of its operand's mesh (or its result's).
        if (!pending_axes_.empty() || op.kind == OpKind::AllReduce || op.kind == OpKind::ReduceScatter ||
            op.kind == OpKind::AllGather || op.kind == OpKind::LocalSlice || op.kind == OpKind::AllToAll ||
            op.kind == OpKind::MakePartial) {
            int32_t mesh = -1;
            if (!op.operands.empty() && op.operands[0] < s.defined.size() && s.defined[op.operands[0]]) {
                mesh = s.f->types[op.operands[0]].mesh;
            }
            if (mesh < 0 && !types.empty()) mesh = types[0].mesh;
            for (const auto& [axis, at] : pending_axes_) {
                if (mesh < 0) {
                    pos_ = at;
                    fail("the axes of a collective are those of its operand's mesh, and it has none");
                }
                op.axes |= axis_bit(axis_of(module_.meshes[static_cast<size_t>(mesh)], axis, at));
            }
        }
        for (size_t i = 0; i < results.size(); ++i) {
            define(s, results[i].first, types[i], results[i].second.first, results[i].second.second);
            op.results.push_back(results[i].first);
        }
        // Position, call path, and the comment saying why it is there.
        if (peek() == '@') {
            op.span = pending(location(), s.path);
            if (eat_word("via")) {
                do op.call_path.push_back(pending(location(), s.path));
                while (eat(','));
            }
        }
        ws();
        if (text_.substr(pos_, 2) == "//" && pos_ < line_end_) {
            std::string_view comment = text_.substr(pos_ + 2, line_end_ - pos_ - 2);
            while (!comment.empty() && comment.front() == ' ') comment.remove_prefix(1);
            if (comment == "inserted" || comment.rfind("inserted: ", 0) == 0) {
                op.inserted = true;
                if (comment.size() > 10) op.reason = std::string(comment.substr(10));
            } else if (comment == "backward") {
                op.backward = true;
            }
            pos_ = line_end_;
        }
        expect_end();
        // `for` has one region, `if` two: on the lines below.
        size_t regions = op.kind == OpKind::For ? 1 : op.kind == OpKind::If ? 2 : 0;
        for (size_t i = 0; i < regions; ++i) {
            size_t at = here();
            if (!next_line()) {
                pos_ = at;
                fail(fmt::format("`{}` needs {} region{} below it", name, regions, regions > 1 ? "s" : ""));
            }
            op.regions.emplace_back();
            region(s, op.regions.back());
        }
        ops.push_back(std::move(op));
    }

    int64_t arg_index() {
        size_t at = here();
        std::string name = str();
        for (size_t i = 0; i < module_.args.size(); ++i) {
            if (module_.args[i].name == name) return static_cast<int64_t>(i);
        }
        pos_ = at;
        fail(fmt::format("no program argument \"{}\" is declared above (`arg \"{}\": i64 = \"0\"`)", name, name));
    }

    static const std::map<std::string, OpKind, std::less<>>& op_kinds() {
        static const std::map<std::string, OpKind, std::less<>> table = [] {
            std::map<std::string, OpKind, std::less<>> t;
#define MESHC_OP(name, text) t.emplace(text, OpKind::name);
#include "ir/ops.def"
#undef MESHC_OP
            return t;
        }();
        return table;
    }

    static const std::map<std::string, Ew, std::less<>>& ew_kinds() {
        static const std::map<std::string, Ew, std::less<>> table = [] {
            std::map<std::string, Ew, std::less<>> t;
#define MESHC_EW(name, text, operands, pending, result, flops, domain) t.emplace(std::string(ew_name(Ew::name)), Ew::name);
#include "ir/ew.def"
#undef MESHC_EW
            return t;
        }();
        return table;
    }

    // ---- Positions ----------------------------------------------------------------------

    /// Gives every pending span its file and offset: a file named by a position is read
    /// when it can be and holds every position named in it; otherwise blank lines stand in.
    void resolve_positions() {
        std::map<std::string, std::pair<uint32_t, uint32_t>> extent;  // path -> max line, max col
        for (const RawLoc& l : locs_) {
            auto& e = extent[l.path];
            e.first = std::max(e.first, l.line);
            e.second = std::max(e.second, l.col + l.length);
        }
        std::map<std::string, FileId> files;
        for (const auto& [path, e] : extent) {
            if (path.empty()) {
                files[path] = file_;
                continue;
            }
            FileId id = kNoFile;
            for (size_t i = 0; i < sources_.file_count() && id == kNoFile; ++i) {
                if (sources_.path(static_cast<FileId>(i)) == path) id = static_cast<FileId>(i);
            }
            if (id == kNoFile) {
                std::ifstream in(path, std::ios::binary);
                if (in) {
                    std::ostringstream text;
                    text << in.rdbuf();
                    id = sources_.add_file(path, text.str());
                }
            }
            if (id != kNoFile && fits(id, path)) {
                files[path] = id;
                continue;
            }
            // Not readable, or not the file the positions were printed from.
            std::string blank;
            for (uint32_t i = 0; i < e.first; ++i) blank += std::string(e.second, ' ') + "\n";
            files[path] = sources_.add_file(path, std::move(blank));
        }
        auto fix = [&](Span& s) {
            if (s.file != kPendingFile) return;
            const RawLoc& l = locs_[s.begin];
            FileId id = files.at(l.path);
            if (l.line > sources_.line_count(id)) {
                // The GIR file itself, too short for a position in it (no file to stand in).
                s = Span{};
                return;
            }
            std::string_view line = sources_.line_text(id, l.line);
            uint32_t offset = static_cast<uint32_t>(line.data() - sources_.text(id).data()) +
                              std::min<uint32_t>(l.col - 1, static_cast<uint32_t>(line.size()));
            uint32_t size = static_cast<uint32_t>(sources_.text(id).size());
            s = Span{id, offset, std::min(size, offset + l.length)};
        };
        std::function<void(std::vector<Op>&)> walk = [&](std::vector<Op>& ops) {
            for (Op& op : ops) {
                fix(op.span);
                if (op.text == kOwnPosition) {
                    op.text = op.span.valid() ? fmt::format("{}:{}:{}", sources_.path(op.span.file),
                                                            sources_.line_col(op.span.file, op.span.begin).line,
                                                            sources_.line_col(op.span.file, op.span.begin).col)
                                              : "slice";
                }
                for (Span& s : op.call_path) fix(s);
                for (Region& r : op.regions) walk(r.ops);
            }
        };
        for (Function& f : module_.functions) {
            fix(f.span);
            walk(f.ops);
        }
    }

    bool fits(FileId id, const std::string& path) const {
        for (const RawLoc& l : locs_) {
            if (l.path != path) continue;
            if (l.line > sources_.line_count(id)) return false;
            if (l.col > sources_.line_text(id, l.line).size() + 1) return false;
            std::string_view line = sources_.line_text(id, l.line);
            if (static_cast<size_t>(line.data() - sources_.text(id).data()) + l.col - 1 + l.length > sources_.text(id).size()) {
                return false;
            }
        }
        return true;
    }

    SourceManager& sources_;
    FileId file_;
    DiagnosticEngine& diags_;
    std::string_view text_;
    size_t next_ = 0, line_end_ = 0, pos_ = 0;
    size_t result_at_ = 0;
    size_t func_at_ = 0;
    Module module_;
    std::map<std::string, int32_t> labels_;
    std::vector<RawLoc> locs_;
    std::vector<std::pair<std::string, size_t>> pending_axes_;
};

}  // namespace

std::optional<Module> parse_module(SourceManager& sources, FileId file, DiagnosticEngine& diags) {
    return Parser(sources, file, diags).run();
}

}  // namespace meshc::ir
