// recognize.cpp — mesh-recognize FILE...: runs the reference grammar (mesh.y +
// lexer.re) over each file and prints "FILE: accept" or "FILE: reject: LINE:COL: why".
// Consumed by tests/conformance (compared with `meshc check --syntax-only`).
//
// Exit status: 0 all files accepted, 1 some file rejected, 2 usage or I/O error.

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include "mesh.tab.hpp"

namespace {

constexpr int kAllAccepted = 0;
constexpr int kSomeRejected = 1;
constexpr int kUsageOrIoError = 2;

void print_usage(std::ostream& out) {
  out << "usage: mesh-recognize FILE...\n"
         "Checks each FILE against the reference grammar (docs/grammar-spec.txt) and\n"
         "prints 'FILE: accept' or 'FILE: reject: LINE:COL: reason'.\n"
         "Exit status: 0 all accepted, 1 some rejected, 2 usage or I/O error.\n";
}

// Reads the whole file, byte for byte (a NUL byte is content, not an end).
bool read_file(const std::string& path, std::string& bytes, std::string& error) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) {
    error = std::strerror(errno);
    return false;
  }
  bytes.clear();
  char buffer[1 << 16];
  for (;;) {
    const std::size_t n = std::fread(buffer, 1, sizeof buffer, file);
    bytes.append(buffer, n);
    if (n < sizeof buffer) break;
  }
  const bool failed = std::ferror(file) != 0;
  const int saved_errno = errno;
  std::fclose(file);
  if (failed) {
    error = std::strerror(saved_errno);
    return false;
  }
  return true;
}

// Returns the diagnostic of the first error, or an unset one when `bytes` is accepted.
mesh::grammar::Diagnostic recognize(const std::string& bytes) {
  // std::string keeps a '\0' at data()[size()]: the lexer's end-of-input sentinel.
  mesh::grammar::Lexer lexer(bytes.data(), bytes.size());
  mesh::grammar::Parser parser(lexer);
  const int rc = parser.parse();
  mesh::grammar::Diagnostic diag = lexer.diagnostic();
  if (rc != 0 && !diag.set) {
    diag.set = true;
    diag.line = 1;
    diag.column = 1;
    diag.message = "parse failed";
  }
  return diag;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> files;
  bool options_done = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (!options_done && (arg == "-h" || arg == "--help")) {
      print_usage(std::cout);
      return kAllAccepted;
    }
    if (!options_done && arg == "--") {
      options_done = true;
      continue;
    }
    if (!options_done && arg.size() > 1 && arg[0] == '-') {
      std::cerr << "mesh-recognize: unknown option '" << arg << "'\n";
      print_usage(std::cerr);
      return kUsageOrIoError;
    }
    files.emplace_back(arg);
  }
  if (files.empty()) {
    print_usage(std::cerr);
    return kUsageOrIoError;
  }

  bool any_rejected = false;
  bool any_io_error = false;
  std::string bytes;
  for (const std::string& path : files) {
    std::string error;
    if (!read_file(path, bytes, error)) {
      std::cerr << "mesh-recognize: cannot read " << path << ": " << error << "\n";
      any_io_error = true;
      continue;
    }
    const mesh::grammar::Diagnostic diag = recognize(bytes);
    if (!diag.set) {
      std::cout << path << ": accept\n";
    } else {
      any_rejected = true;
      std::cout << path << ": reject: " << diag.line << ":" << diag.column << ": "
                << diag.message << "\n";
    }
  }
  std::cout.flush();
  if (any_io_error) return kUsageOrIoError;
  return any_rejected ? kSomeRejected : kAllAccepted;
}
