# The CUDA device (--device=cuda: managed memory, cuBLAS contractions, Philox on the
# GPU) and the NCCL handler (--comm=nccl), built into libmeshrt with -DMESHC_CUDA=ON
# (CUDA 13 toolkit with cuBLAS and NCCL 2.28; compiles and links without a GPU). Included
# by runtime/CMakeLists.txt once the meshrt target and _meshrt_link_libs exist; appends
# what a program then links (cudart, cuBLAS, NCCL by full path, with an rpath to their
# directory) to _meshrt_link_libs, so `meshc build` links them. Sets MESHRT_HAVE_CUDA.
option(MESHC_CUDA "Build the CUDA device and the NCCL handler into the runtime" OFF)
set(MESHRT_HAVE_CUDA OFF)
if(NOT MESHC_CUDA)
  return()
endif()

# The lines that work with CMake 3.25 and nvcc 13 (shared/design/TOOLCHAIN.md).
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
  set(CMAKE_CUDA_ARCHITECTURES 90)       # H100/H200
endif()
enable_language(CUDA)
set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")   # CMake 3.25 lacks it for nvcc
set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
set(CMAKE_CUDA_STANDARD 20)
set(CMAKE_CUDA_STANDARD_REQUIRED ON)
set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)   # else cudart_static and libcudart.so both load
find_package(CUDAToolkit REQUIRED)       # CUDA::cudart CUDA::cublas
find_library(NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} REQUIRED)
find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} REQUIRED)
set(MESHRT_HAVE_CUDA ON)

# The kernels (nvcc). The directory's compile options are the host compiler's (-Wall
# -Wpedantic -Werror ..., and sanitizers), which nvcc does not take: the host side of the
# .cu gets -Wall -Wextra through -Xcompiler, and any warning, nvcc's or the host
# compiler's, is an error.
add_library(meshrt_cuda_kernels OBJECT ${CMAKE_CURRENT_LIST_DIR}/kernels/cuda/kernels.cu)
set_property(TARGET meshrt_cuda_kernels PROPERTY COMPILE_OPTIONS "")
target_compile_options(meshrt_cuda_kernels PRIVATE
  -Xcompiler=-Wall,-Wextra,-Wno-unused-parameter,-Werror --Werror=all-warnings)
target_include_directories(meshrt_cuda_kernels PRIVATE
  ${CMAKE_CURRENT_LIST_DIR} ${CMAKE_CURRENT_LIST_DIR}/include)
set_target_properties(meshrt_cuda_kernels PROPERTIES POSITION_INDEPENDENT_CODE ON)

# The host side: plain C++ (the project's warnings), CUDA's and NCCL's headers as system
# headers.
target_sources(meshrt PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/kernels/cuda/device.cpp
  ${CMAKE_CURRENT_LIST_DIR}/kernels/cuda/contract.cpp
  ${CMAKE_CURRENT_LIST_DIR}/kernels/cuda/random.cpp
  ${CMAKE_CURRENT_LIST_DIR}/kernels/cuda/launch.cpp
  ${CMAKE_CURRENT_LIST_DIR}/comm/nccl/nccl_handler.cpp
  $<TARGET_OBJECTS:meshrt_cuda_kernels>)
target_compile_definitions(meshrt PUBLIC MESHRT_HAVE_CUDA)
target_include_directories(meshrt SYSTEM PRIVATE ${NCCL_INCLUDE_DIR})
target_link_libraries(meshrt PUBLIC CUDA::cudart CUDA::cublas ${NCCL_LIBRARY})

# A program built by meshc links these after libmeshrt.a.
list(APPEND _meshrt_link_libs ${CUDA_cublas_LIBRARY} ${CUDA_cudart_LIBRARY} ${NCCL_LIBRARY}
     "-Wl,-rpath,${CUDAToolkit_LIBRARY_DIR}")

# The GPU check (runtime/tests/cuda_check.cpp): every CUDA kernel and the NCCL handler
# against the CPU runtime, bitwise where meshrt.h promises it. Needs a GPU, so it is not a
# ctest; tests/gpu/run.sh runs it.
add_executable(meshrt-cuda-check ${CMAKE_CURRENT_LIST_DIR}/tests/cuda_check.cpp
                                 ${CMAKE_CURRENT_LIST_DIR}/tests/test_util.cpp)
target_include_directories(meshrt-cuda-check PRIVATE ${CMAKE_CURRENT_LIST_DIR})
target_link_libraries(meshrt-cuda-check PRIVATE meshrt)
