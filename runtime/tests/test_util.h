// Helpers for the runtime's unit tests: building a meshrt_program around a lambda (run
// on every device by meshrt_main), and running code in a child process to observe exits
// (meshrt_fail ends the process) with its stdout and stderr.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "meshrt.h"

namespace meshrt::test {

struct MeshSpec {
    std::string name;
    std::vector<std::string> axes;
    std::vector<int64_t> sizes;
};

/// Owns everything a meshrt_program points to.
class TestProgram {
public:
    TestProgram(std::vector<MeshSpec> meshes, std::string name = "test");
    TestProgram(const TestProgram&) = delete;
    TestProgram& operator=(const TestProgram&) = delete;

    /// Runs `entry` on every device through meshrt_main (with extra argv); the status.
    int run(std::function<void(meshrt_device*)> entry, std::vector<std::string> args = {});
    int64_t ndevices() const { return program_.ndevices; }
    /// The program's arguments (their strings must outlive run()).
    void set_args(std::vector<meshrt_arg_desc> args) {
        args_ = std::move(args);
        program_.nargs = int32_t(args_.size());
        program_.args = args_.data();
    }

private:
    std::vector<MeshSpec> specs_;
    std::string name_;
    std::vector<std::vector<const char*>> axis_names_;
    std::vector<meshrt_mesh_desc> descs_;
    meshrt_program program_{};
    std::vector<meshrt_arg_desc> args_;
};

struct ChildResult {
    int exit_status = -1; // -1 when the child died of a signal
    std::string out, err;
};

/// Runs `body` in a forked child with stdout and stderr captured; the child exits 0 when
/// body returns.
ChildResult run_in_child(const std::function<void()>& body);

/// A fresh empty directory under /tmp, removed (with its files) by the destructor.
class TempDir {
public:
    TempDir();
    ~TempDir();
    std::string path(const std::string& file) const { return dir_ + "/" + file; }

private:
    std::string dir_;
};

/// A layout on `mesh` with, per dim, the axes splitting it (major first).
class Layout {
public:
    Layout(int32_t mesh, std::vector<int64_t> shape, std::vector<std::vector<int32_t>> splits);
    const meshrt_layout* get() const { return &layout_; }
    const std::vector<int64_t>& shape() const { return shape_; }

private:
    std::vector<int64_t> shape_;
    std::vector<int32_t> counts_, axes_;
    meshrt_layout layout_{};
};

} // namespace meshrt::test
