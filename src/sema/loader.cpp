// Program loading and import lookup; see loader.h.
#include "sema/loader.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "syntax/lexer.h"
#include "syntax/parser.h"

namespace meshc::sema {

namespace fs = std::filesystem;

FileId read_source_file(SourceManager& sources, DiagnosticEngine& diags, const std::string& path,
                        Span requested_at) {
    std::error_code ec;
    if (fs::is_directory(path, ec)) {
        diags.emit(DiagCode::E0701, requested_at,
                   fmt::format("cannot read `{}`: it is a directory", path));
        return kNoFile;
    }
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        diags.emit(DiagCode::E0701, requested_at,
                   fmt::format("cannot read `{}`: {}", path, std::strerror(errno)));
        return kNoFile;
    }
    // The size of a regular file is known before reading; a pipe, a device (/dev/zero) or
    // a FIFO is read up to one byte past the limit, which is then the error.
    uintmax_t size = fs::file_size(path, ec);
    if (!ec && size > syntax::kMaxSourceBytes) {
        diags.emit(DiagCode::E0111, requested_at,
                   fmt::format("`{}` is {} bytes; the limit for a source file is {} bytes", path,
                               size, syntax::kMaxSourceBytes));
        return kNoFile;
    }
    std::string text;
    char chunk[1 << 16];
    while (text.size() <= syntax::kMaxSourceBytes && in) {
        size_t want = std::min(sizeof chunk, syntax::kMaxSourceBytes + 1 - text.size());
        in.read(chunk, static_cast<std::streamsize>(want));
        text.append(chunk, static_cast<size_t>(in.gcount()));
    }
    if (in.bad()) {
        diags.emit(DiagCode::E0701, requested_at, fmt::format("cannot read `{}`", path));
        return kNoFile;
    }
    if (text.size() > syntax::kMaxSourceBytes) {
        diags.emit(DiagCode::E0111, requested_at,
                   fmt::format("`{}` is more than {} bytes, the limit for a source file", path,
                               syntax::kMaxSourceBytes));
        return kNoFile;
    }
    return sources.add_file(path, std::move(text));
}

namespace {

class Loader {
public:
    Loader(SourceManager& sources, DiagnosticEngine& diags, const LoadOptions& options)
        : sources_(sources), diags_(diags), options_(options) {}

    Program run(const std::string& root) {
        FileId file = read(root, {});
        if (file == kNoFile) return std::move(program_);
        add_module(file, canonical(root));
        // Breadth-first over imports; modules appended while iterating.
        for (size_t i = 0; i < program_.modules.size(); ++i) {
            const ast::Module& module = *program_.modules[i];
            for (const ast::Item* item : module.items) {
                if (item->kind == ast::ItemKind::Import) import(module, *item);
            }
        }
        return std::move(program_);
    }

private:
    static std::string canonical(const std::string& path) {
        std::error_code ec;
        fs::path p = fs::weakly_canonical(path, ec);
        return ec ? path : p.string();
    }

    // An overlay (an open, edited document) wins over the file on disk.
    FileId read(const std::string& path, Span requested_at) {
        if (options_.overlays) {
            auto it = options_.overlays->find(canonical(path));
            if (it != options_.overlays->end()) {
                if (it->second.size() > syntax::kMaxSourceBytes) {
                    diags_.emit(DiagCode::E0111, requested_at,
                                fmt::format("`{}` is {} bytes; the limit for a source file is {} bytes", path,
                                            it->second.size(), syntax::kMaxSourceBytes));
                    return kNoFile;
                }
                return sources_.add_file(path, it->second);
            }
        }
        return read_source_file(sources_, diags_, path, requested_at);
    }

    bool exists(const fs::path& path) const {
        std::error_code ec;
        if (options_.overlays && options_.overlays->count(canonical(path.string()))) return true;
        return fs::is_regular_file(path, ec);
    }

    void add_module(FileId file, const std::string& key) {
        by_path_[key] = program_.modules.size();
        const syntax::AutoLayouts* chosen = nullptr;
        if (options_.auto_layouts) {
            auto it = options_.auto_layouts->find(key);
            if (it != options_.auto_layouts->end()) chosen = &it->second;
        }
        program_.modules.push_back(syntax::parse_file(sources_, file, diags_, chosen));
    }

    void import(const ast::Module& from, const ast::Item& item) {
        fs::path relative;
        for (const ast::Ident& part : item.path) relative /= std::string(part.name);
        relative += ".msh";
        std::vector<fs::path> candidates = {
            fs::path(sources_.path(from.file)).parent_path() / relative};
        if (!options_.stdlib_dir.empty()) candidates.push_back(fs::path(options_.stdlib_dir) / relative);
        Span path_span = item.path.front().span.to(item.path.back().span);
        for (const fs::path& candidate : candidates) {
            if (!exists(candidate)) continue;
            std::string key = canonical(candidate.string());
            auto found = by_path_.find(key);
            if (found != by_path_.end()) {
                program_.import_targets[&item] = found->second;
                return;
            }
            FileId file = read(candidate.string(), path_span);
            if (file == kNoFile) return;
            program_.import_targets[&item] = program_.modules.size();
            add_module(file, key);
            return;
        }
        std::string name;
        for (const ast::Ident& part : item.path) name += (name.empty() ? "" : ".") + std::string(part.name);
        auto& d = diags_.emit(DiagCode::E0205, path_span, fmt::format("unknown module `{}`", name));
        for (const fs::path& candidate : candidates) {
            d.note(fmt::format("looked for `{}`", candidate.lexically_normal().string()));
        }
    }

    SourceManager& sources_;
    DiagnosticEngine& diags_;
    const LoadOptions& options_;
    Program program_;
    std::map<std::string, size_t> by_path_;
};

}  // namespace

Program load_program(SourceManager& sources, DiagnosticEngine& diags, const std::string& root,
                     const LoadOptions& options) {
    return Loader(sources, diags, options).run(root);
}

}  // namespace meshc::sema
