// JSON-RPC framing, URIs and positions; see protocol.h.
#include "lsp/protocol.h"

#include <algorithm>
#include <cctype>
#include <istream>
#include <ostream>

namespace meshc::lsp {

namespace {

constexpr size_t kMaxBody = 64u << 20;
constexpr size_t kMaxHeaderLine = 8u << 10;

bool iequals_prefix(std::string_view line, std::string_view prefix) {
    if (line.size() < prefix.size()) return false;
    for (size_t i = 0; i < prefix.size(); ++i) {
        if (std::tolower(static_cast<unsigned char>(line[i])) != std::tolower(static_cast<unsigned char>(prefix[i]))) {
            return false;
        }
    }
    return true;
}

int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

}  // namespace

RawMessage read_message(std::istream& in) {
    RawMessage m;
    std::optional<size_t> length;
    bool bad_length = false;
    bool any_header = false;
    std::string line;
    bool too_long = false;
    while (true) {
        // One header line, at most kMaxHeaderLine bytes kept (the rest of a longer one
        // is skipped, and the message is then a bad header).
        line.clear();
        int c;
        while ((c = in.get()) != std::char_traits<char>::eof() && c != '\n') {
            if (line.size() < kMaxHeaderLine) {
                line += static_cast<char>(c);
            } else {
                too_long = true;
            }
        }
        if (c == std::char_traits<char>::eof() && line.empty()) {
            m.status = RawMessage::Status::Eof;
            return m;
        }
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.empty()) {
            if (!any_header) continue;  // stray blank lines between messages
            break;
        }
        any_header = true;
        if (iequals_prefix(line, "content-length:")) {
            std::string value = line.substr(15);
            value.erase(0, value.find_first_not_of(" \t"));
            while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.pop_back();
            if (value.empty() || value.size() > 12 || value.find_first_not_of("0123456789") != std::string::npos) {
                bad_length = true;
            } else {
                length = std::stoull(value);
            }
        }
    }
    if (bad_length || !length || too_long) {
        m.status = RawMessage::Status::BadHeader;
        m.problem = too_long     ? "header line over 8 KiB"
                    : bad_length ? "invalid Content-Length header"
                                 : "message without a Content-Length header";
        return m;
    }
    if (*length > kMaxBody) {
        in.ignore(static_cast<std::streamsize>(*length));
        m.status = in ? RawMessage::Status::BadHeader : RawMessage::Status::Eof;
        m.problem = "message body over 64 MiB";
        return m;
    }
    m.body.resize(*length);
    in.read(m.body.data(), static_cast<std::streamsize>(*length));
    if (static_cast<size_t>(in.gcount()) != *length) {
        m.status = RawMessage::Status::Eof;
        return m;
    }
    m.status = RawMessage::Status::Ok;
    return m;
}

void write_message(std::ostream& out, const std::string& body) {
    out << "Content-Length: " << body.size() << "\r\n\r\n" << body;
    out.flush();
}

std::optional<std::string> uri_to_path(std::string_view uri) {
    constexpr std::string_view scheme = "file://";
    if (uri.substr(0, scheme.size()) != scheme) return std::nullopt;
    uri.remove_prefix(scheme.size());
    // `file://host/path`: only the local host (empty or localhost) is a path here.
    if (!uri.empty() && uri.front() != '/') {
        size_t slash = uri.find('/');
        if (slash == std::string_view::npos || uri.substr(0, slash) != "localhost") return std::nullopt;
        uri.remove_prefix(slash);
    }
    std::string path;
    for (size_t i = 0; i < uri.size(); ++i) {
        if (uri[i] == '%' && i + 2 < uri.size()) {
            int hi = hex_value(uri[i + 1]), lo = hex_value(uri[i + 2]);
            if (hi >= 0 && lo >= 0) {
                path += static_cast<char>(hi * 16 + lo);
                i += 2;
                continue;
            }
        }
        if (uri[i] == '?' || uri[i] == '#') break;
        path += uri[i];
    }
    return path;
}

std::string path_to_uri(std::string_view path) {
    static const char* hex = "0123456789ABCDEF";
    std::string uri = "file://";
    for (unsigned char c : path) {
        if (std::isalnum(c) || c == '/' || c == '-' || c == '_' || c == '.' || c == '~') {
            uri += static_cast<char>(c);
        } else {
            uri += '%';
            uri += hex[c >> 4];
            uri += hex[c & 15];
        }
    }
    return uri;
}

LineIndex::LineIndex(std::string_view text, bool utf16) : text_(text), utf16_(utf16) {
    starts_.push_back(0);
    for (size_t i = 0; i < text.size(); ++i) {
        if (text[i] == '\n') starts_.push_back(static_cast<uint32_t>(i + 1));
    }
}

namespace {

// Bytes of the UTF-8 sequence starting with `lead` (1 for an invalid lead byte).
size_t sequence_length(unsigned char lead) {
    if (lead < 0x80) return 1;
    if ((lead >> 5) == 0x6) return 2;
    if ((lead >> 4) == 0xE) return 3;
    if ((lead >> 3) == 0x1E) return 4;
    return 1;
}

}  // namespace

uint32_t LineIndex::offset(uint32_t line, uint32_t character) const {
    if (line >= starts_.size()) return static_cast<uint32_t>(text_.size());
    uint32_t begin = starts_[line];
    uint32_t end = line + 1 < starts_.size() ? starts_[line + 1] - 1 : static_cast<uint32_t>(text_.size());
    if (end > begin && text_[end - 1] == '\r') --end;
    if (!utf16_) return std::min(begin + character, end);
    uint32_t units = 0, i = begin;
    while (i < end && units < character) {
        size_t n = sequence_length(static_cast<unsigned char>(text_[i]));
        units += n == 4 ? 2 : 1;
        i += static_cast<uint32_t>(n);
    }
    return std::min(i, end);
}

std::pair<uint32_t, uint32_t> LineIndex::line_character(uint32_t offset) const {
    offset = std::min<uint32_t>(offset, static_cast<uint32_t>(text_.size()));
    auto it = std::upper_bound(starts_.begin(), starts_.end(), offset);
    uint32_t line = static_cast<uint32_t>(it - starts_.begin()) - 1;
    return {line, length(starts_[line], offset)};
}

uint32_t LineIndex::length(uint32_t begin, uint32_t end) const {
    end = std::min<uint32_t>(end, static_cast<uint32_t>(text_.size()));
    if (end <= begin) return 0;
    if (!utf16_) return end - begin;
    uint32_t units = 0;
    for (uint32_t i = begin; i < end;) {
        size_t n = sequence_length(static_cast<unsigned char>(text_[i]));
        units += n == 4 ? 2 : 1;
        i += static_cast<uint32_t>(n);
    }
    return units;
}

json LineIndex::position(uint32_t offset) const {
    auto [line, character] = line_character(offset);
    return json{{"line", line}, {"character", character}};
}

json LineIndex::range(uint32_t begin, uint32_t end) const {
    if (end < begin) end = begin;
    return json{{"start", position(begin)}, {"end", position(end)}};
}

}  // namespace meshc::lsp
