// The language server's protocol loop; see lsp.h. A reader thread frames messages from
// the input into a queue; the main thread handles them in order and checks documents
// whose text changed once no message is waiting (so a burst of edits costs one check),
// or at once when a request needs the result. Every handler runs under a catch-all: a
// failure answers an LSP error and the server goes on.
#include "lsp/lsp.h"

#include <chrono>
#include <condition_variable>
#include <deque>
#include <iostream>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "lsp/analysis.h"
#include "lsp/features.h"
#include "lsp/protocol.h"

namespace meshc::lsp {

namespace {

// JSON-RPC and LSP error codes.
constexpr int kParseError = -32700;
constexpr int kInvalidRequest = -32600;
constexpr int kMethodNotFound = -32601;
constexpr int kInvalidParams = -32602;
constexpr int kInternalError = -32603;
constexpr int kServerNotInitialized = -32002;

class MessageQueue {
public:
    void push(RawMessage m) {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            queue_.push_back(std::move(m));
        }
        ready_.notify_one();
    }
    std::optional<RawMessage> try_pop() {
        std::lock_guard<std::mutex> lock(mutex_);
        if (queue_.empty()) return std::nullopt;
        RawMessage m = std::move(queue_.front());
        queue_.pop_front();
        return m;
    }
    RawMessage pop() {
        std::unique_lock<std::mutex> lock(mutex_);
        ready_.wait(lock, [&] { return !queue_.empty(); });
        RawMessage m = std::move(queue_.front());
        queue_.pop_front();
        return m;
    }

private:
    std::mutex mutex_;
    std::condition_variable ready_;
    std::deque<RawMessage> queue_;
};

/// A failure to answer with a given error code (bad parameters, unknown document).
struct RequestError {
    int code;
    std::string message;
};

struct Document {
    std::string uri;
    std::string path;       // as the compiler sees it
    std::string canonical;  // overlay key
    std::string text;
    int64_t version = 0;
    bool open = false;
    bool dirty = true;
    std::shared_ptr<Analysis> analysis;
    /// The last analysis that got as far as the GIR, and the text it checked: while the
    /// text has errors that stop checking before inference (a name being typed), hovers
    /// and inlay hints in the unchanged parts of the text come from it.
    std::shared_ptr<Analysis> typed;
    std::string typed_text;
    std::set<std::string> files;  // canonical paths the last analysis read
};

class Server {
public:
    Server(std::ostream& out, const ServerOptions& options) : out_(out), options_(options) {
        analysis_options_.stdlib_dir = options.stdlib_dir;
        analysis_options_.strict_comm = options.strict_comm;
    }

    /// Returns the exit status once the client sends `exit` (or the input ends).
    int run(MessageQueue& queue) {
        while (true) {
            std::optional<RawMessage> m = queue.try_pop();
            if (!m) {
                if (refresh_one_dirty()) continue;
                m = queue.pop();
            }
            if (m->status == RawMessage::Status::Eof) return shutdown_ ? 0 : 1;
            if (m->status == RawMessage::Status::BadHeader) {
                log(fmt::format("bad message header: {}", m->problem));
                send_error(nullptr, kParseError, m->problem);
                continue;
            }
            handle(m->body);
            if (exit_) return shutdown_ ? 0 : 1;
        }
    }

private:
    // ------------------------------------------------------------ output

    void send(const json& message) { write_message(out_, message.dump(-1, ' ', false, json::error_handler_t::replace)); }

    void send_result(const json& id, json result) {
        send(json{{"jsonrpc", "2.0"}, {"id", id}, {"result", std::move(result)}});
    }

    void send_error(const json& id, int code, const std::string& message) {
        send(json{{"jsonrpc", "2.0"}, {"id", id}, {"error", {{"code", code}, {"message", message}}}});
    }

    void notify(const std::string& method, json params) {
        send(json{{"jsonrpc", "2.0"}, {"method", method}, {"params", std::move(params)}});
    }

    void log(const std::string& line) {
        if (options_.verbose) std::cerr << "meshc lsp: " << line << "\n";
    }

    // ------------------------------------------------------------ dispatch

    void handle(const std::string& body) {
        json msg;
        try {
            msg = json::parse(body);
        } catch (const json::exception& e) {
            send_error(nullptr, kParseError, fmt::format("invalid JSON: {}", e.what()));
            return;
        }
        if (!msg.is_object()) {
            send_error(nullptr, kInvalidRequest, "a message is a JSON object");
            return;
        }
        json id = msg.contains("id") ? msg["id"] : json();
        bool is_request = msg.contains("id");
        if (!msg.contains("method") || !msg["method"].is_string()) {
            // A response to a request of ours (none are sent), or garbage.
            if (!msg.contains("result") && !msg.contains("error")) send_error(id, kInvalidRequest, "a request needs a `method`");
            return;
        }
        if (is_request && !id.is_string() && !id.is_number_integer()) {
            send_error(nullptr, kInvalidRequest, "a request's id is an integer or a string");
            return;
        }
        std::string method = msg["method"];
        json params = msg.contains("params") ? msg["params"] : json::object();
        auto start = std::chrono::steady_clock::now();
        try {
            if (!initialized_ && method != "initialize" && method != "exit") {
                if (is_request) send_error(id, kServerNotInitialized, "the server is not initialized");
                return;
            }
            if (shutdown_ && method != "exit") {
                if (is_request) send_error(id, kInvalidRequest, "the server is shutting down");
                return;
            }
            json result = dispatch(method, params, is_request);
            if (is_request) send_result(id, std::move(result));
        } catch (const RequestError& e) {
            if (is_request) send_error(id, e.code, e.message);
        } catch (const json::exception& e) {
            if (is_request) send_error(id, kInvalidParams, fmt::format("invalid parameters for `{}`: {}", method, e.what()));
        } catch (const InternalError& e) {
            if (is_request) send_error(id, kInternalError, fmt::format("internal compiler error in `{}`: {}", method, e.message));
        } catch (const std::exception& e) {
            if (is_request) send_error(id, kInternalError, fmt::format("internal error in `{}`: {}", method, e.what()));
        }
        log(fmt::format("{} {:.2f} ms", method,
                        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count()));
    }

    json dispatch(const std::string& method, const json& params, bool is_request) {
        if (method == "initialize") return initialize(params);
        if (method == "initialized") return nullptr;
        if (method == "shutdown") {
            shutdown_ = true;
            return nullptr;
        }
        if (method == "exit") {
            exit_ = true;
            return nullptr;
        }
        if (method == "textDocument/didOpen") {
            did_open(params.at("textDocument"));
            return nullptr;
        }
        if (method == "textDocument/didChange") {
            did_change(params);
            return nullptr;
        }
        if (method == "textDocument/didClose") {
            did_close(params.at("textDocument").at("uri").get<std::string>());
            return nullptr;
        }
        if (method == "textDocument/didSave") return nullptr;
        if (method == "textDocument/hover") return hover_request(params);
        if (method == "textDocument/definition") {
            return with_position(params, [&](const Analysis& a, Positions& pos, uint32_t offset) {
                return definition(a, pos, offset);
            });
        }
        if (method == "textDocument/references") {
            bool decl = params.contains("context") && params["context"].value("includeDeclaration", false);
            return with_position(params, [&](const Analysis& a, Positions& pos, uint32_t offset) {
                return references(a, pos, offset, decl);
            });
        }
        if (method == "textDocument/documentSymbol") {
            Document& d = analysed(params);
            Positions pos(*d.analysis, utf16_);
            return document_symbols(*d.analysis, pos);
        }
        if (method == "textDocument/inlayHint") return inlay_hint_request(params);
        if (method == "textDocument/semanticTokens/full") {
            Document& d = analysed(params);
            Positions pos(*d.analysis, utf16_);
            return semantic_tokens(*d.analysis, pos);
        }
        if (method == "textDocument/codeAction") {
            Document& d = analysed(params);
            Positions pos(*d.analysis, utf16_);
            auto [begin, end] = offsets(*d.analysis, pos, params.at("range"));
            return code_actions(*d.analysis, pos, d.uri, begin, end);
        }
        // A test hook: fails inside the handler like a broken compiler invariant would.
        if (method == "meshc/debugFail") internal_error("meshc/debugFail was requested", __FILE__, __LINE__);
        if (is_request) throw RequestError{kMethodNotFound, fmt::format("method `{}` is not supported", method)};
        return nullptr;  // notifications we do not handle ($/cancelRequest, $/setTrace, ...)
    }

    json initialize(const json& params) {
        initialized_ = true;
        if (params.contains("capabilities")) {
            const json& caps = params["capabilities"];
            if (caps.contains("general") && caps["general"].contains("positionEncodings")) {
                for (const json& e : caps["general"]["positionEncodings"]) {
                    if (e == "utf-8") utf16_ = false;
                }
            }
        }
        if (params.contains("initializationOptions") && params["initializationOptions"].is_object()) {
            const json& o = params["initializationOptions"];
            if (o.contains("stdlib") && o["stdlib"].is_string()) analysis_options_.stdlib_dir = o["stdlib"];
            if (o.contains("strictComm") && o["strictComm"].is_boolean()) analysis_options_.strict_comm = o["strictComm"];
        }
        json caps{
            {"positionEncoding", utf16_ ? "utf-16" : "utf-8"},
            {"textDocumentSync", {{"openClose", true}, {"change", 2}, {"save", false}}},
            {"hoverProvider", true},
            {"definitionProvider", true},
            {"referencesProvider", true},
            {"documentSymbolProvider", true},
            {"inlayHintProvider", true},
            {"semanticTokensProvider", {{"legend", semantic_tokens_legend()}, {"full", true}}},
            {"codeActionProvider", {{"codeActionKinds", {"quickfix"}}}},
        };
        return json{{"capabilities", caps}, {"serverInfo", {{"name", "meshc"}, {"version", MESHC_VERSION}}}};
    }

    // ------------------------------------------------------------ documents

    Document& document(const std::string& uri) {
        auto path = uri_to_path(uri);
        if (!path) throw RequestError{kInvalidParams, fmt::format("not a file URI: `{}`", uri)};
        Document& d = docs_[uri];
        if (d.uri.empty()) {
            d.uri = uri;
            d.path = *path;
            d.canonical = canonical_path(*path);
        }
        return d;
    }

    void did_open(const json& item) {
        Document& d = document(item.at("uri").get<std::string>());
        d.text = item.at("text").get<std::string>();
        d.version = item.value("version", int64_t{0});
        d.open = true;
        mark_dirty(d);
    }

    void did_change(const json& params) {
        const json& item = params.at("textDocument");
        auto it = docs_.find(item.at("uri").get<std::string>());
        if (it == docs_.end() || !it->second.open) return;
        Document& d = it->second;
        for (const json& change : params.at("contentChanges")) {
            if (!change.contains("range")) {
                d.text = change.at("text").get<std::string>();
                continue;
            }
            LineIndex index(d.text, utf16_);
            const json& r = change["range"];
            uint32_t begin = index.offset(r.at("start").at("line"), r.at("start").at("character"));
            uint32_t end = index.offset(r.at("end").at("line"), r.at("end").at("character"));
            if (end < begin) std::swap(begin, end);
            d.text.replace(begin, end - begin, change.at("text").get<std::string>());
        }
        if (item.contains("version") && item["version"].is_number_integer()) d.version = item["version"];
        mark_dirty(d);
    }

    void did_close(const std::string& uri) {
        auto it = docs_.find(uri);
        if (it == docs_.end()) return;
        std::string canonical = it->second.canonical;
        docs_.erase(it);
        notify("textDocument/publishDiagnostics", {{"uri", uri}, {"diagnostics", json::array()}});
        for (auto& [u, other] : docs_) {
            if (other.files.count(canonical)) other.dirty = true;  // it reads the file from disk now
        }
    }

    /// The document changed: it and every open document that imports it are checked again.
    void mark_dirty(Document& d) {
        d.dirty = true;
        for (auto& [uri, other] : docs_) {
            if (&other != &d && other.files.count(d.canonical)) other.dirty = true;
        }
    }

    std::map<std::string, std::string> overlays() const {
        std::map<std::string, std::string> out;
        for (const auto& [uri, d] : docs_) {
            if (d.open) out[d.canonical] = d.text;
        }
        return out;
    }

    void refresh(Document& d) {
        auto start = std::chrono::steady_clock::now();
        std::map<std::string, std::string> files = overlays();
        if (!d.open) {
            // A request about a file that is not open: read from disk (not an overlay).
            files.erase(d.canonical);
        }
        d.analysis = analyse(d.path, files, analysis_options_);
        if (d.analysis->gir && d.open) {
            d.typed = d.analysis;
            d.typed_text = d.text;
        }
        d.dirty = false;
        d.files.clear();
        if (d.analysis->program) {
            for (const auto& m : d.analysis->program->modules) d.files.insert(canonical_path(d.analysis->sources.path(m->file)));
        }
        if (d.open) publish(d);
        log(fmt::format("checked {} in {:.2f} ms", d.path,
                        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count()));
    }

    void publish(Document& d) {
        Positions pos(*d.analysis, utf16_);
        json diagnostics;
        try {
            diagnostics = diagnostics_json(*d.analysis, pos);
        } catch (const std::exception& e) {
            diagnostics = json::array({{{"range", {{"start", {{"line", 0}, {"character", 0}}}, {"end", {{"line", 0}, {"character", 0}}}}},
                                        {"severity", 1},
                                        {"source", "meshc"},
                                        {"message", fmt::format("internal error while reporting: {}", e.what())}}});
        }
        notify("textDocument/publishDiagnostics", {{"uri", d.uri}, {"version", d.version}, {"diagnostics", diagnostics}});
    }

    /// Checks one changed document (the first in URI order); false when none is dirty.
    bool refresh_one_dirty() {
        for (auto& [uri, d] : docs_) {
            if (d.open && d.dirty) {
                refresh(d);
                return true;
            }
        }
        return false;
    }

    Document& analysed(const json& params) {
        Document& d = document(params.at("textDocument").at("uri").get<std::string>());
        if (!d.open) {
            // Not open: checked from disk each time (and forgotten).
            d.dirty = true;
            refresh(d);
        } else if (d.dirty || !d.analysis) {
            refresh(d);
        }
        return d;
    }

    std::pair<uint32_t, uint32_t> offsets(const Analysis& a, Positions& pos, const json& range) {
        if (a.root == kNoFile) return {0, 0};
        const LineIndex& index = pos.index(a.root);
        uint32_t begin = index.offset(range.at("start").at("line"), range.at("start").at("character"));
        uint32_t end = index.offset(range.at("end").at("line"), range.at("end").at("character"));
        return {std::min(begin, end), std::max(begin, end)};
    }

    // ------------------------------------------------------------ stale types
    // Offsets of the text checked last with a GIR (old) against the current (new): the
    // common prefix and suffix map; the edited middle does not.
    struct TextMap {
        size_t prefix = 0, suffix = 0, old_len = 0, new_len = 0;
        TextMap(std::string_view old_text, std::string_view new_text)
            : old_len(old_text.size()), new_len(new_text.size()) {
            size_t limit = std::min(old_len, new_len);
            while (prefix < limit && old_text[prefix] == new_text[prefix]) ++prefix;
            while (suffix < limit - prefix && old_text[old_len - 1 - suffix] == new_text[new_len - 1 - suffix]) ++suffix;
        }
        std::optional<uint32_t> to_old(uint32_t n) const {
            if (n < prefix) return n;
            if (n >= new_len - suffix && n <= new_len) return static_cast<uint32_t>(n - new_len + old_len);
            return std::nullopt;
        }
        /// Whether old [begin, end) lies in the common prefix or suffix.
        bool unchanged(uint32_t begin, uint32_t end) const {
            return end <= prefix || (begin >= old_len - suffix && end <= old_len);
        }
        std::optional<uint32_t> to_new(uint32_t o) const {
            if (o <= prefix) return o;
            if (o >= old_len - suffix && o <= old_len) return static_cast<uint32_t>(o - old_len + new_len);
            return std::nullopt;
        }
    };

    /// The document's last typed analysis when the current one has no GIR (and the map
    /// from the current text to the one it checked); null otherwise.
    std::optional<TextMap> stale(const Document& d) const {
        if (!d.open || (d.analysis && d.analysis->gir) || !d.typed || d.typed->root == kNoFile) return std::nullopt;
        return TextMap(d.typed_text, d.text);
    }

    json hover_request(const json& params) {
        Document& d = analysed(params);
        const json& p = params.at("position");
        uint32_t line = p.at("line").get<uint32_t>(), character = p.at("character").get<uint32_t>();
        if (auto map = stale(d)) {
            LineIndex now(d.text, utf16_);
            auto old_offset = map->to_old(now.offset(line, character));
            if (!old_offset) return nullptr;
            Positions pos(*d.typed, utf16_);
            json result = hover(*d.typed, pos, *old_offset);
            if (result.is_null()) return result;
            // The construct hovered must lie wholly in unchanged text.
            const LineIndex& then = pos.index(d.typed->root);
            json& r = result["range"];
            uint32_t old_begin = then.offset(r["start"]["line"], r["start"]["character"]);
            uint32_t old_end = then.offset(r["end"]["line"], r["end"]["character"]);
            if (!map->unchanged(old_begin, old_end)) return nullptr;
            r = now.range(*map->to_new(old_begin), *map->to_new(old_end));
            result["contents"]["value"] = result["contents"]["value"].get<std::string>() +
                                          "\n\n*(as of the last version that got through name resolution)*";
            return result;
        }
        return with_position(params, [&](const Analysis& a, Positions& pos, uint32_t offset) {
            return hover(a, pos, offset);
        });
    }

    json inlay_hint_request(const json& params) {
        Document& d = analysed(params);
        if (auto map = stale(d)) {
            LineIndex now(d.text, utf16_);
            Positions pos(*d.typed, utf16_);
            const LineIndex& then = pos.index(d.typed->root);
            const json& range = params.at("range");
            uint32_t begin = now.offset(range.at("start").at("line"), range.at("start").at("character"));
            uint32_t end = now.offset(range.at("end").at("line"), range.at("end").at("character"));
            json out = json::array();
            for (json& hint : inlay_hints(*d.typed, pos, 0, static_cast<uint32_t>(d.typed_text.size()))) {
                // After a name: the name's last character and the next are unchanged.
                uint32_t old_at = then.offset(hint["position"]["line"], hint["position"]["character"]);
                if (old_at == 0 || !map->unchanged(old_at - 1, old_at + 1)) continue;
                auto at = map->to_new(old_at);
                if (!at || *at < begin || *at > end) continue;
                hint["position"] = now.position(*at);
                out.push_back(std::move(hint));
            }
            return out;
        }
        Positions pos(*d.analysis, utf16_);
        auto [begin, end] = offsets(*d.analysis, pos, params.at("range"));
        return inlay_hints(*d.analysis, pos, begin, end);
    }

    template <typename F>
    json with_position(const json& params, F&& f) {
        Document& d = analysed(params);
        const Analysis& a = *d.analysis;
        if (a.root == kNoFile) return nullptr;
        Positions pos(a, utf16_);
        const json& p = params.at("position");
        uint32_t offset = pos.index(a.root).offset(p.at("line").get<uint32_t>(), p.at("character").get<uint32_t>());
        json result = f(a, pos, offset);
        if (!d.open) docs_.erase(d.uri);
        return result;
    }

    std::ostream& out_;
    ServerOptions options_;
    AnalysisOptions analysis_options_;
    std::map<std::string, Document> docs_;
    bool utf16_ = true;
    bool initialized_ = false;
    bool shutdown_ = false;
    bool exit_ = false;
};

}  // namespace

int run_server(std::istream& in, std::ostream& out, const ServerOptions& options) {
    auto queue = std::make_shared<MessageQueue>();
    std::thread reader([queue, &in] {
        while (true) {
            RawMessage m = read_message(in);
            bool eof = m.status == RawMessage::Status::Eof;
            queue->push(std::move(m));
            if (eof) return;
        }
    });
    reader.detach();  // it may be blocked reading when the client says `exit`
    Server server(out, options);
    return server.run(*queue);
}

}  // namespace meshc::lsp
