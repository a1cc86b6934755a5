// Line tables for source files; see source_manager.h.
#include "support/source_manager.h"

#include <algorithm>

namespace meshc {

FileId SourceManager::add_file(std::string path, std::string contents) {
    auto file = std::make_unique<File>();
    file->path = std::move(path);
    file->contents = std::move(contents);
    file->line_starts.push_back(0);
    const std::string& text = file->contents;
    for (uint32_t i = 0; i < text.size(); ++i) {
        if (text[i] == '\n') file->line_starts.push_back(i + 1);
    }
    files_.push_back(std::move(file));
    return static_cast<FileId>(files_.size() - 1);
}

LineCol SourceManager::line_col(FileId id, uint32_t offset) const {
    const File& file = *files_[id];
    offset = std::min<uint32_t>(offset, static_cast<uint32_t>(file.contents.size()));
    auto it = std::upper_bound(file.line_starts.begin(), file.line_starts.end(), offset);
    uint32_t line = static_cast<uint32_t>(it - file.line_starts.begin());  // >= 1
    return LineCol{line, offset - file.line_starts[line - 1] + 1};
}

std::string_view SourceManager::line_text(FileId id, uint32_t line) const {
    const File& file = *files_[id];
    if (line == 0 || line > file.line_starts.size()) return {};
    uint32_t begin = file.line_starts[line - 1];
    uint32_t end = line < file.line_starts.size() ? file.line_starts[line] - 1
                                                  : static_cast<uint32_t>(file.contents.size());
    std::string_view text(file.contents);
    std::string_view result = text.substr(begin, end - begin);
    if (!result.empty() && result.back() == '\r') result.remove_suffix(1);
    return result;
}

}  // namespace meshc
