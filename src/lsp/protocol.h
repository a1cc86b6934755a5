// The language server's wire and coordinate plumbing: JSON-RPC messages framed by
// `Content-Length` headers (read from a stream, written to one), file URIs, and the
// mapping between byte offsets (the compiler's spans) and LSP positions (line and
// character in UTF-16 code units, or UTF-8 bytes when the client accepts them).
// Used by server.cpp and features.cpp.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace meshc::lsp {

using json = nlohmann::json;

/// One framed message read from the client.
struct RawMessage {
    enum class Status { Ok, Eof, BadHeader } status = Status::Eof;
    std::string body;
    std::string problem;  // for BadHeader
};

/// Reads the next message: headers up to an empty line, then Content-Length bytes.
/// A header block without a valid Content-Length is BadHeader (the block is consumed;
/// the caller may go on reading). Bodies over 64 MiB are BadHeader and skipped.
RawMessage read_message(std::istream& in);
/// Writes `body` with its Content-Length header and flushes.
void write_message(std::ostream& out, const std::string& body);

/// `file:///a/b%20c.msh` -> `/a/b c.msh`; nullopt for other schemes.
std::optional<std::string> uri_to_path(std::string_view uri);
std::string path_to_uri(std::string_view path);

/// Line starts of one text, and conversions between byte offsets and LSP positions.
class LineIndex {
public:
    LineIndex(std::string_view text, bool utf16);
    /// LSP position (0-based line, character) -> byte offset, clamped into the text.
    uint32_t offset(uint32_t line, uint32_t character) const;
    json position(uint32_t offset) const;
    json range(uint32_t begin, uint32_t end) const;
    uint32_t line_count() const { return static_cast<uint32_t>(starts_.size()); }
    /// 0-based line and character of a byte offset.
    std::pair<uint32_t, uint32_t> line_character(uint32_t offset) const;
    /// Length of [begin, end) (within one line) in the client's units.
    uint32_t length(uint32_t begin, uint32_t end) const;

private:
    std::string_view text_;
    bool utf16_;
    std::vector<uint32_t> starts_;
};

}  // namespace meshc::lsp
