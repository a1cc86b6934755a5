// The reference of tests/gpu/run.sh's matmul benchmark: an N^3 matrix product called on
// cuBLAS directly, timed as the runtime's trace times meshrt_contract (wall clock from
// the call to the end of cudaStreamSynchronize), on cudaMalloc'd memory.
//   matmul_ref f32|bf16 N ITERS      prints the median seconds of ITERS calls (after two
//                                    warm-up calls) as {"seconds": S}
//   matmul_ref copy N ITERS          the GPU's device-to-device copy of N f32 (the
//                                    bandwidth reference of the element-wise kernel
//                                    benchmark) as {"gbps": G}, counting a read and a
//                                    write of each byte
// f32: cublasSgemm (full FP32, like the runtime); bf16: cublasGemmEx with bf16 inputs and
// output and CUBLAS_COMPUTE_32F (what the runtime calls for bf16).
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CHECK(x)                                                                            \
    do {                                                                                    \
        if (!(x)) {                                                                         \
            std::fprintf(stderr, "matmul_ref: %s failed at line %d\n", #x, __LINE__);       \
            std::exit(1);                                                                   \
        }                                                                                   \
    } while (0)

__global__ void fill(float* f, unsigned short* h, long long n, float scale) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)blockDim.x * gridDim.x) {
        unsigned x = unsigned(i) * 2654435761u;
        float v = (float(x >> 8) * (1.0f / 16777216.0f) - 0.5f) * scale;
        f[i] = v;
        h[i] = (unsigned short)(__float_as_uint(v) >> 16);
    }
}

int copy_bandwidth(long long n, int iters) {
    float *a, *b;
    CHECK(cudaMalloc(&a, n * 4) == cudaSuccess && cudaMalloc(&b, n * 4) == cudaSuccess);
    CHECK(cudaMemset(a, 0, n * 4) == cudaSuccess);
    std::vector<double> seconds;
    for (int i = 0; i < iters + 2; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        CHECK(cudaMemcpy(b, a, n * 4, cudaMemcpyDeviceToDevice) == cudaSuccess);
        CHECK(cudaDeviceSynchronize() == cudaSuccess);
        const double s =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (i >= 2)
            seconds.push_back(s);
    }
    std::sort(seconds.begin(), seconds.end());
    std::printf("{\"gbps\": %.3f}\n", 2.0 * 4.0 * double(n) / seconds[seconds.size() / 2] * 1e-9);
    return 0;
}

int main(int argc, char** argv) {
    if (argc == 4 && std::strcmp(argv[1], "copy") == 0)
        return copy_bandwidth(std::atoll(argv[2]), std::atoi(argv[3]));
    if (argc != 4 || (std::strcmp(argv[1], "f32") && std::strcmp(argv[1], "bf16"))) {
        std::fprintf(stderr, "usage: matmul_ref f32|bf16|copy N ITERS\n");
        return 2;
    }
    const bool bf16 = std::strcmp(argv[1], "bf16") == 0;
    const int n = std::atoi(argv[2]), iters = std::atoi(argv[3]);
    const long long nn = (long long)n * n;
    float *fa, *fb, *fc;
    unsigned short *ha, *hb, *hc;
    CHECK(cudaMalloc(&fa, nn * 4) == cudaSuccess && cudaMalloc(&fb, nn * 4) == cudaSuccess &&
          cudaMalloc(&fc, nn * 4) == cudaSuccess);
    CHECK(cudaMalloc(&ha, nn * 2) == cudaSuccess && cudaMalloc(&hb, nn * 2) == cudaSuccess &&
          cudaMalloc(&hc, nn * 2) == cudaSuccess);
    fill<<<1024, 256>>>(fa, ha, nn, 1.0f);
    fill<<<1024, 256>>>(fb, hb, nn, 1.0f);
    CHECK(cudaDeviceSynchronize() == cudaSuccess);
    cudaStream_t stream;
    CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess);
    cublasHandle_t h;
    CHECK(cublasCreate(&h) == CUBLAS_STATUS_SUCCESS);
    CHECK(cublasSetStream(h, stream) == CUBLAS_STATUS_SUCCESS);
    const float one = 1.0f, zero = 0.0f;
    std::vector<double> seconds;
    for (int i = 0; i < iters + 2; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        if (bf16)
            CHECK(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, hb, CUDA_R_16BF, n, ha,
                               CUDA_R_16BF, n, &zero, hc, CUDA_R_16BF, n, CUBLAS_COMPUTE_32F,
                               CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS);
        else
            CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, fb, n, fa, n, &zero, fc,
                              n) == CUBLAS_STATUS_SUCCESS);
        CHECK(cudaStreamSynchronize(stream) == cudaSuccess);
        const double s =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (i >= 2)
            seconds.push_back(s);
    }
    std::sort(seconds.begin(), seconds.end());
    std::printf("{\"seconds\": %.9f}\n", seconds[seconds.size() / 2]);
    return 0;
}
