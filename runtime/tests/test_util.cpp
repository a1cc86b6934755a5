// Test helpers (see test_util.h).
#include "tests/test_util.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace meshrt::test {
namespace {

std::function<void(meshrt_device*)>* g_entry = nullptr;

void trampoline(meshrt_device* dev) {
    (*g_entry)(dev);
}

std::string slurp(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

} // namespace

TestProgram::TestProgram(std::vector<MeshSpec> meshes, std::string name)
    : specs_(std::move(meshes)), name_(std::move(name)) {
    int64_t ndevices = 1;
    for (const MeshSpec& m : specs_) {
        std::vector<const char*> names;
        for (const std::string& a : m.axes)
            names.push_back(a.c_str());
        axis_names_.push_back(std::move(names));
        int64_t size = 1;
        for (int64_t s : m.sizes)
            size *= s;
        ndevices = std::max(ndevices, size);
    }
    for (size_t i = 0; i < specs_.size(); ++i)
        descs_.push_back(meshrt_mesh_desc{specs_[i].name.c_str(), int32_t(specs_[i].axes.size()),
                                          axis_names_[i].data(), specs_[i].sizes.data()});
    program_.name = name_.c_str();
    program_.nmeshes = int32_t(descs_.size());
    program_.meshes = descs_.data();
    program_.ndevices = ndevices;
    program_.entry = trampoline;
}

int TestProgram::run(std::function<void(meshrt_device*)> entry, std::vector<std::string> args) {
    g_entry = &entry;
    std::vector<std::string> argv_strings{name_};
    argv_strings.insert(argv_strings.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (std::string& s : argv_strings)
        argv.push_back(s.data());
    argv.push_back(nullptr);
    int status = meshrt_main(int(argv.size() - 1), argv.data(), &program_);
    g_entry = nullptr;
    return status;
}

ChildResult run_in_child(const std::function<void()>& body) {
    std::fflush(stdout);
    std::fflush(stderr);
    char out_path[] = "/tmp/meshrt-test-out-XXXXXX";
    char err_path[] = "/tmp/meshrt-test-err-XXXXXX";
    int out_fd = mkstemp(out_path), err_fd = mkstemp(err_path);
    ChildResult r;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(out_fd, 1);
        dup2(err_fd, 2);
        body();
        std::fflush(stdout);
        std::fflush(stderr);
        _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    close(out_fd);
    close(err_fd);
    r.exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = slurp(out_path);
    r.err = slurp(err_path);
    unlink(out_path);
    unlink(err_path);
    return r;
}

TempDir::TempDir() {
    char tmpl[] = "/tmp/meshrt-test-XXXXXX";
    dir_ = mkdtemp(tmpl);
}

TempDir::~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
}

Layout::Layout(int32_t mesh, std::vector<int64_t> shape, std::vector<std::vector<int32_t>> splits)
    : shape_(std::move(shape)) {
    for (auto& axes : splits) {
        counts_.push_back(int32_t(axes.size()));
        axes_.insert(axes_.end(), axes.begin(), axes.end());
    }
    counts_.resize(shape_.size(), 0);
    layout_.mesh = mesh;
    layout_.rank = int32_t(shape_.size());
    layout_.global_shape = shape_.data();
    layout_.split_count = counts_.data();
    layout_.split_axes = axes_.data();
}

} // namespace meshrt::test
