# lit configuration for meshc's textual tests (FileCheck on --emit output and diagnostics).
import os
import lit.formats

config.name = "meshc"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".msh", ".gir"]
config.excludes = ["Inputs"]
config.test_source_root = os.path.dirname(__file__)

build = lit_config.params.get("meshc_build")
if build:
    build = os.path.abspath(build)
llvm_bin = lit_config.params.get("llvm_bin", "/usr/lib/llvm-19/bin")
if not build:
    lit_config.fatal("pass --param meshc_build=<build dir>")
config.test_exec_root = os.path.join(build, "tests", "lit")

# FileCheck from LLVM 19 first on PATH (the system's plain FileCheck does not exist).
config.environment["PATH"] = os.pathsep.join([llvm_bin, build, os.environ.get("PATH", "")])
config.environment["MESHC_STDLIB"] = os.path.join(os.path.dirname(os.path.dirname(config.test_source_root)), "stdlib")
config.substitutions.append(("%meshc", os.path.join(build, "meshc")))
config.substitutions.append(("%verify", "python3 " + os.path.join(config.test_source_root, "..", "conformance", "verify_diagnostics.py") + " --meshc " + os.path.join(build, "meshc")))
# `%expect-exit N CMD...`: runs CMD and succeeds only when it exits with status N
# (`not` accepts any failure; the driver's 1-vs-2 distinction needs the exact status).
config.substitutions.append(("%expect-exit", "python3 " + os.path.join(config.test_source_root, "expect_exit.py")))
# Built with sanitizers (the ASan+UBSan CI build): tests that cap the address space with
# `ulimit -v` cannot run there (ASan reserves terabytes of shadow memory).
if lit_config.params.get("sanitize"):
    config.available_features.add("sanitizer")
