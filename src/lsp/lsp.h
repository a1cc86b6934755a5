// `meshc lsp`: a language server over stdio (JSON-RPC 2.0, Content-Length framing) on
// the same front end and checker as `meshc check`. Called by the driver; returns the
// process exit status (0 after `shutdown` then `exit`, 1 on `exit` without `shutdown`
// or end of input).
#pragma once

#include <iosfwd>
#include <string>

namespace meshc::lsp {

struct ServerOptions {
    std::string stdlib_dir;
    /// Check as `--strict-comm` (every inserted collective is E0406).
    bool strict_comm = false;
    /// Log each message and its handling time to stderr.
    bool verbose = false;
};

int run_server(std::istream& in, std::ostream& out, const ServerOptions& options);

}  // namespace meshc::lsp
