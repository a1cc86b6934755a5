// Source files, spans and line/column mapping.
// Produced by the driver (files read from disk or given as text); consumed by every phase
// that reports diagnostics and by the renderers in diagnostics.cpp.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace meshc {

/// Index of a file in a SourceManager. Invalid when equal to kNoFile.
using FileId = uint32_t;
inline constexpr FileId kNoFile = UINT32_MAX;

/// A half-open byte range [begin, end) in one file.
struct Span {
    FileId file = kNoFile;
    uint32_t begin = 0;
    uint32_t end = 0;

    bool valid() const { return file != kNoFile; }
    /// The smallest span covering both (same file assumed; `other` invalid => *this).
    Span to(Span other) const {
        if (!other.valid()) return *this;
        if (!valid()) return other;
        return Span{file, begin < other.begin ? begin : other.begin,
                    end > other.end ? end : other.end};
    }
};

/// 1-based line and byte column.
struct LineCol {
    uint32_t line = 0;
    uint32_t col = 0;
};

class SourceManager {
public:
    /// Registers `contents` under `path`. Contents are kept for the manager's lifetime,
    /// and string_views into them stay valid (the AST refers to them).
    FileId add_file(std::string path, std::string contents);

    const std::string& path(FileId id) const { return files_[id]->path; }
    std::string_view text(FileId id) const { return files_[id]->contents; }
    std::string_view text(Span span) const {
        return text(span.file).substr(span.begin, span.end - span.begin);
    }
    size_t file_count() const { return files_.size(); }

    /// Line and column (1-based, columns in bytes) of a byte offset; an offset at
    /// the end of the file maps to the position just after the last character.
    LineCol line_col(FileId id, uint32_t offset) const;
    /// The text of 1-based `line`, without its line terminator.
    std::string_view line_text(FileId id, uint32_t line) const;
    uint32_t line_count(FileId id) const {
        return static_cast<uint32_t>(files_[id]->line_starts.size());
    }

private:
    struct File {
        std::string path;
        std::string contents;
        std::vector<uint32_t> line_starts;  // byte offset of each line's first character
    };
    std::vector<std::unique_ptr<File>> files_;
};

}  // namespace meshc
