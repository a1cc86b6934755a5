/* meshrt: the Mesh runtime, C ABI.
 *
 * A program compiled by meshc is one SPMD function (`entry`) that the runtime runs once
 * per mesh device. The generated object file defines `main`, which calls meshrt_main with
 * a static description of the program's meshes. Everything the generated code cannot do
 * inline (contractions, collectives, random numbers, I/O, printing, lookups) is a call
 * into this ABI. All shapes passed here are *local* (per-device) shapes unless named
 * `global`; all buffers are dense, row-major (C order), 64-byte aligned.
 *
 * Communication is a handler (runtime/comm/): `sim` (every device a thread of this
 * process, shared-memory collectives) is the default; `mpi` (one process per device
 * under mpirun, device index = rank) gives bitwise the same results; NCCL plugs into the
 * same interface (comm.h, internal to the runtime).
 *
 * Errors (bad input files, out of memory, a failed collective) call meshrt_fail: one
 * message naming the device goes to stderr, temporary output files are removed, and
 * the process exits with status 1 (under MPI through MPI_Abort, which ends every rank).
 * Nothing here returns an error code.
 */
#ifndef MESHRT_H
#define MESHRT_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Element types; the numbering is the compiler's ast::DType. Bool is one byte (0/1);
 * F16 is IEEE binary16, BF16 is bfloat16, both stored as uint16_t. */
enum meshrt_dtype {
    MESHRT_BOOL = 0, MESHRT_I32 = 1, MESHRT_I64 = 2, MESHRT_F16 = 3,
    MESHRT_BF16 = 4, MESHRT_F32 = 5, MESHRT_F64 = 6
};

enum meshrt_reduce_op { MESHRT_SUM = 0, MESHRT_MAX = 1 };
enum meshrt_random_kind { MESHRT_NORMAL = 0, MESHRT_UNIFORM = 1 };

typedef struct meshrt_device meshrt_device; /* opaque: one per mesh device */

typedef struct meshrt_mesh_desc {
    const char* name;               /* "Pod" */
    int32_t naxes;
    const char* const* axis_names;  /* major -> minor */
    const int64_t* axis_sizes;
} meshrt_mesh_desc;

/* The most devices a program may run on (ndevices): meshrt_main refuses more with a
 * message and status 1, since the simulated mesh starts a thread for each device and the
 * runtime keeps tables per device. meshc build refuses such a program (E0707). */
#define MESHRT_MAX_DEVICES 65536

/* A program argument, `arg("steps", 100)` in the source: set by `--steps=12` on the
 * command line (every rank of an MPI job parses the same one). */
enum meshrt_arg_kind { MESHRT_ARG_INT = 0, MESHRT_ARG_FLOAT = 1, MESHRT_ARG_BOOL = 2, MESHRT_ARG_PATH = 3 };
typedef struct meshrt_arg_desc {
    const char* name;          /* "steps": set by --steps=VALUE */
    int32_t kind;              /* meshrt_arg_kind: i64, f32, bool (true/false/1/0), a file name */
    const char* default_text;  /* "100" */
} meshrt_arg_desc;
typedef struct meshrt_program {
    const char* name;                 /* the source file's stem, for --help and messages */
    int32_t nmeshes;
    const meshrt_mesh_desc* meshes;
    int64_t ndevices;                 /* the largest mesh's device count (at least 1) */
    void (*entry)(meshrt_device*);    /* the SPMD program; runs once per device */
    int32_t nargs;                    /* the program's arguments (may be 0, args NULL) */
    const meshrt_arg_desc* args;
} meshrt_program;

/* How a (global) tensor is laid out over a mesh. mesh == -1: not placed, replicated on
 * every device (then split_count may be NULL). For dim d, split_count[d] mesh axes
 * split it, listed major first in split_axes (the lists of all dims concatenated). A
 * device on mesh `mesh` with coordinates c holds, along dim d split over axes
 * (a1, ..., ak), piece p = mixed-radix(c[a1], ..., c[ak]) (a1 most significant) of
 * global_shape[d] / (size(a1) * ... * size(ak)) elements, starting at p * that size.
 * Devices that differ only in axes splitting no dim hold copies. Partial (pending-sum)
 * values never reach a meshrt_layout: the compiler reduces them first. A device that is
 * not on `mesh` (a smaller mesh) holds no piece: load and random write nothing there, and
 * it contributes nothing to save and print. */
typedef struct meshrt_layout {
    int32_t mesh;
    int32_t rank;
    const int64_t* global_shape;
    const int32_t* split_count;  /* [rank] */
    const int32_t* split_axes;   /* [sum of split_count] */
} meshrt_layout;

/* ------------------------------------------------------------------ start-up */

/* Parses the program's options, launches one device per mesh device (threads for the
 * simulated mesh; under --comm=mpi this process runs the device of its rank, and the
 * rank count must be program->ndevices, else status 2), runs program->entry on each,
 * and returns the exit status (0 when every device finished). Options:
 *   --comm=sim|mpi|nccl     communication handler (default sim; the others exist only
 *                           when the runtime was built with them, else a clear error;
 *                           MPI is initialised only for mpi; nccl needs --device=cuda)
 *   --device=cpu|cuda|gpu-emulator
 *                           where contractions, random numbers, (nccl) collectives and
 *                           the program's GPU kernels (meshc build --gpu) run (default
 *                           cpu; cuda only in a runtime built with CUDA, else status 2):
 *                           with cuda, meshrt_alloc returns CUDA managed memory, which
 *                           the host code and the GPU share; gpu-emulator runs the GPU
 *                           kernels on the host, one GPU thread after another (the GPU
 *                           code path, tested without a GPU)
 *   --mesh-threads=N        threads each device's kernels may use (default: the
 *                           machine's cores divided by the devices, at least 1)
 *   --trace=FILE.json       write a Chrome/Perfetto trace, one track per device
 *   --help                  usage, the program's arguments and its meshes
 *   --NAME=VALUE            the program argument NAME (program->args)
 * Unknown options and malformed argument values are an error naming the option (status
 * 2). Arguments after `--` are ignored. */
int meshrt_main(int argc, char** argv, const meshrt_program* program);

/* ------------------------------------------------------------------ devices, memory */

int64_t meshrt_device_index(meshrt_device* dev);                   /* 0 .. ndevices-1 */
/* The device's coordinate along `axis` of mesh `mesh`; -1 when the device is not part of
 * that mesh (a smaller mesh uses the first devices, row-major). */
int64_t meshrt_coord(meshrt_device* dev, int32_t mesh, int32_t axis);
/* Never returns NULL (fails the run instead). bytes may be 0. Under --device=cuda the
 * buffer is CUDA managed memory (addressable by the host and the GPUs). */
void* meshrt_alloc(meshrt_device* dev, int64_t bytes);
void meshrt_free(meshrt_device* dev, void* ptr);                   /* ptr may be NULL */
/* Ends the run: prints "error: device D: MESSAGE" once, removes temporary files, exits 1.
 * When several devices fail at once only the first message is printed. dev may be NULL
 * (then "error: MESSAGE"). */
void meshrt_fail(meshrt_device* dev, const char* message);

/* ------------------------------------------------------------------ collectives
 * A group is the set of devices of mesh `mesh` whose coordinates agree on every axis
 * not in `axes`. A member's rank in its group is mixed-radix over `axes` in the order
 * given (axes[0] most significant). Every member calls the same collective with the same
 * arguments (except the buffers). `in` and `out` never alias. Reductions: f16/bf16 are
 * summed in float and rounded once (to nearest even); integers wrap; bool sum and max
 * are logical or; float max propagates NaN. Calling a collective from a device that is
 * not on `mesh` fails the run. */

/* The source location (`file:line:col`, a string that lives as long as the program) of
 * the collective or contraction this device makes next: named by the messages of a
 * collective that fails or makes no progress (--comm-timeout), and the `at` argument of
 * their events in a --trace. */
void meshrt_comm_site(meshrt_device* dev, const char* site);

void meshrt_all_reduce(meshrt_device* dev, int32_t mesh, int32_t naxes, const int32_t* axes,
                       int32_t dtype, int32_t op, const void* in, void* out, int64_t count);
/* out's dim `dim` is n times in's; member r's piece goes to index r along it. */
void meshrt_all_gather(meshrt_device* dev, int32_t mesh, int32_t naxes, const int32_t* axes,
                       int32_t dtype, const void* in, void* out, int32_t rank,
                       const int64_t* in_shape, int32_t dim);
/* in_shape[dim] is divisible by n; member r receives piece r (along dim) of the
 * element-wise reduction of all members' inputs. */
void meshrt_reduce_scatter(meshrt_device* dev, int32_t mesh, int32_t naxes, const int32_t* axes,
                           int32_t dtype, int32_t op, const void* in, void* out, int32_t rank,
                           const int64_t* in_shape, int32_t dim);
/* in_shape[to_dim] is divisible by n. Member r cuts its input into n pieces along to_dim
 * and sends piece j to member j; it receives piece r from every member i and places
 * member i's piece at index i along from_dim. Out shape: in_shape with [from_dim] * n
 * and [to_dim] / n (from_dim != to_dim). */
void meshrt_all_to_all(meshrt_device* dev, int32_t mesh, int32_t naxes, const int32_t* axes,
                       int32_t dtype, const void* in, void* out, int32_t rank,
                       const int64_t* in_shape, int32_t from_dim, int32_t to_dim);
void meshrt_barrier(meshrt_device* dev, int32_t mesh, int32_t naxes, const int32_t* axes);
/* Every device of the program (all meshes) receives device 0's `bytes` bytes of `buf`. */
void meshrt_broadcast_all(meshrt_device* dev, void* buf, int64_t bytes);

/* ------------------------------------------------------------------ kernels */

/* out = einsum(spec, a[, b]) on local shapes. spec: lowercase letters, one or two
 * operands, "->" and the output ("bd,dh->bh", "abc->cab"). A letter absent from the
 * output is summed over. b == NULL (rank_b 0) for one operand. Contractions become
 * cblas_sgemm/dgemm calls (batched by loops) with transposes folded into the BLAS call
 * when the operands' letter order allows it, else the operands are permuted first.
 * dtypes: f32, f64 (BLAS), f16/bf16 (through f32, rounded once), i32/i64 (plain loops,
 * wrapping); bool fails the run. Under --device=cuda the same plan runs with cuBLAS
 * (strided-batched GEMMs; f16/bf16 accumulated in f32, rounded once) for the float
 * dtypes; integer contractions stay on the host. */
void meshrt_contract(meshrt_device* dev, int32_t dtype, const char* spec,
                     const void* a, int32_t rank_a, const int64_t* shape_a,
                     const void* b, int32_t rank_b, const int64_t* shape_b,
                     void* out, int32_t rank_out, const int64_t* shape_out);

/* Counter-based random numbers: the value at global multi-index g depends only on seed
 * and the row-major linear index i of g in layout->global_shape (Philox4x32-10, key =
 * (lo32(seed), hi32(seed)), counter = (lo32(i), hi32(i), 0, 0), giving words x0..x3):
 *   uniform: (x0 >> 8) * 2^-24                                  in [0, 1)
 *   normal:  sqrt(-2 ln u1) * cos(2 pi u2), u1 = ((x0 >> 8) + 1) * 2^-24,
 *            u2 = (x1 >> 8) * 2^-24                             (computed in double)
 * converted to dtype (f16/bf16 through f32; i32/i64 truncate toward zero and bool is
 * value != 0, so integer dtypes are of little use). Writes this device's piece (see
 * meshrt_layout). Under --device=cuda the GPU computes the same values (the double
 * formula through CUDA's log and cos, which may differ from the host's in the last bit:
 * f64 normals within an ulp or two, the narrower dtypes practically always bitwise). */
void meshrt_random(meshrt_device* dev, int32_t kind, int64_t seed, int32_t dtype,
                   const meshrt_layout* layout, void* out);
/* permutation(seed, n): the indices 0..n-1 sorted by the 64-bit key (x0 << 32 | x1) of
 * Philox4x32-10 at counter i (as above), ties by index: a permutation that depends only
 * on seed and n. Every device computes it whole (n log n) and writes its piece of the
 * i64 vector. */
void meshrt_permutation(meshrt_device* dev, int64_t seed, const meshrt_layout* layout,
                        int64_t* out);

/* Row lookup. The table's local piece has rows [row_offset, row_offset + rows) of the
 * global table (vocab_size rows) and `width` columns; for each of the n ids, out gets
 * the row when the id falls in this piece, zeros otherwise (the compiler sums the pieces).
 * An id outside [0, vocab_size) fails the run with a message naming its position in the
 * global ids tensor, whose layout is ids_layout (null: the local position is the global
 * one). */
void meshrt_embedding(meshrt_device* dev, int32_t dtype, const void* table, int64_t rows,
                      int64_t row_offset, int64_t vocab_size, int64_t width, int32_t id_dtype,
                      const void* ids, int64_t n, void* out, const meshrt_layout* ids_layout);
/* out[i, k] = (ids[i] == k) as f32, out is [n, classes]; an id outside [0, classes) gives a
 * row of zeros. ids are i32 or i64 (id_dtype), as for meshrt_embedding. */
void meshrt_one_hot(meshrt_device* dev, int32_t id_dtype, const void* ids, int64_t n,
                    int64_t classes, float* out);
/* Program argument `index` (program->args) of kind int, float or bool, written to out
 * as one element of dtype (i64, f32 or bool). */
void meshrt_arg(meshrt_device* dev, int32_t index, int32_t dtype, void* out);
/* The file name of path argument `index`. */
const char* meshrt_arg_path(meshrt_device* dev, int32_t index);
/* A slice with a run-time start: fails the run unless 0 <= start and start + size <=
 * bound, with a message naming `where` (the source location), the start and the bound. */
void meshrt_check_slice(meshrt_device* dev, int64_t start, int64_t size, int64_t bound,
                        const char* where);
/* Copies the block in[..., start:start+size, ...] (along dim) to out. */
void meshrt_slice(meshrt_device* dev, int32_t dtype, const void* in, int32_t rank,
                  const int64_t* in_shape, int32_t dim, int64_t start, int64_t size, void* out);
/* Copies `in` into out at offset `offset` along dim; out has in_shape except
 * out_dim_size along dim. */
void meshrt_concat_part(meshrt_device* dev, int32_t dtype, const void* in, int32_t rank,
                        const int64_t* in_shape, int32_t dim, int64_t out_dim_size,
                        int64_t offset, void* out);

/* ------------------------------------------------------------------ I/O (act once) */

/* Reads this device's piece of a .npy file (little-endian f32/f64/i32/i64/bool, f16 as
 * '<f2', C order). A missing or unreadable file, a truncated file, or a dtype or shape
 * other than the static type fails the run with a message naming the file, the expected
 * and the found type, e.g. "load w.npy: expected f32[16, 32], found f32[16, 8]". NumPy has
 * no bfloat16: a bf16 tensor is read from '<f4' data (rounded to nearest even). Header
 * versions 1.0, 2.0 and 3.0 are read; Fortran order is an error. */
void meshrt_load(meshrt_device* dev, const char* path, int32_t dtype,
                 const meshrt_layout* layout, void* out);
/* Writes the global value once (device 0 assembles the pieces) to an unnamed file in
 * path's directory (PATH.tmp.PID where the file system has no O_TMPFILE) and names it
 * path when complete, so a failed or killed run never leaves a partial file. Every
 * device of the program calls it, and it ends with a barrier over all devices, so the
 * file is complete when save returns on any device. The header is version 1.0; bf16 is
 * written as '<f4'. */
void meshrt_save(meshrt_device* dev, const char* path, int32_t dtype,
                 const meshrt_layout* layout, const void* local);

/* .safetensors (the checkpoint of a struct, tuple or tensor: one tensor per leaf, named
 * by its field path, "opt.m.w1", "state.1.w"). meshrt_load_tensor reads this device's
 * piece of the tensor NAME (NULL or "": the file's only tensor) with positioned reads;
 * a missing name, another dtype or shape, a truncated file or a malformed header fails
 * the run naming the file and the tensor. meshrt_save_tensor assembles a leaf on device
 * 0, which keeps it; meshrt_save_finish writes every kept leaf of PATH as one file
 * (through a temporary and a rename, like meshrt_save) and ends with a barrier over all
 * devices. dtypes F32 F64 F16 BF16 I32 I64 BOOL. */
void meshrt_load_tensor(meshrt_device* dev, const char* path, const char* name, int32_t dtype,
                        const meshrt_layout* layout, void* out);
void meshrt_save_tensor(meshrt_device* dev, const char* path, const char* name, int32_t dtype,
                        const meshrt_layout* layout, const void* local);
void meshrt_save_finish(meshrt_device* dev, const char* path);

typedef struct meshrt_print_arg {
    int32_t dtype;
    const meshrt_layout* layout;
    const void* data;  /* this device's piece */
} meshrt_print_arg;
/* Prints one line once (device 0), `format` with each "{}" replaced by the next
 * argument's global value: floats as %.6g (f64: %.10g), integers as %lld, bools as
 * true/false; a tensor of at most 64 elements as nested lists "[[1, 2], [3, 4]]", a
 * larger one as "<f32[1024, 1024] sum=... min=... max=...>" (sum, min and max formatted
 * like the elements; i64 printed exactly; a bool tensor's sum counts the trues). Every
 * device calls it; "{}" count and nargs must agree. "{{" and "}}" print one brace (the
 * compiler doubles the braces of the program's strings, which print as they are). */
void meshrt_print(meshrt_device* dev, const char* format, int32_t nargs, const meshrt_print_arg* args);

/* ------------------------------------------------------------------ tracing */

/* Generated code may bracket a fused loop or any other region; the runtime already
 * traces its own kernels, collectives (with bytes) and I/O. No-ops without --trace. */
void meshrt_trace_begin(meshrt_device* dev, const char* name);
void meshrt_trace_end(meshrt_device* dev);

/* ------------------------------------------------------------------ GPU kernels
 * A program built with `meshc build --gpu` carries its data-parallel loops twice: as
 * host loops, and as kernels in a PTX image (compiled by LLVM's NVPTX back end from the
 * same IR). Before each such loop the generated code asks meshrt_offload; when it says
 * 1 the loop runs as a kernel through meshrt_launch.
 *
 * meshrt_offload: 1 under --device=cuda and --device=gpu-emulator, else 0.
 * meshrt_launch: runs kernel `kernel` of the NUL-terminated PTX `image` over `n` GPU
 * threads' worth of work (a grid-stride loop: any thread count covers it) with the
 * kernel's arguments `args` (args[i] points to argument i, as cudaLaunchKernel takes
 * them), on the device's stream, and waits for it (every GPU runtime call does, so the
 * host may read the results at once). Under --device=gpu-emulator, `host(args)` runs the
 * same kernel compiled for the host, once per emulated GPU thread, one after another;
 * meshrt_kernel_thread / meshrt_kernel_threads give that host code its thread index and
 * the thread count (0 and 1 outside meshrt_launch). A failure (the PTX does not load, the
 * launch fails) ends the run naming the device and the kernel. */
int32_t meshrt_offload(meshrt_device* dev);
void meshrt_launch(meshrt_device* dev, const char* image, const char* kernel,
                   void (*host)(void**), void** args, int64_t n);
int64_t meshrt_kernel_thread(void);
int64_t meshrt_kernel_threads(void);

#ifdef __cplusplus
}
#endif
#endif /* MESHRT_H */
