/* The reference of tests/bench/mpi/run_mpi_bench.py: MPI's own collectives called
 * directly, on the sizes the generated Mesh program uses, under the same mpirun.
 *
 *   mpirun ... -np N reference BYTES ITERS
 *
 * BYTES is the larger buffer of each collective per rank (nccl-tests' convention):
 * all_reduce in = out = BYTES; reduce_scatter in BYTES, out BYTES / N; all_gather in
 * BYTES / N, out BYTES; all_to_all in = out = BYTES. f32 data, SUM. Each collective is
 * called once to warm up, then ITERS times back to back (no barrier in between, as in
 * the Mesh program's loop); a call's time is the maximum over ranks of its duration.
 * Besides MPI's own algorithms ("native"), the rank-ordered algorithms of the meshrt MPI
 * handler ("ordered": MPI_Alltoall(v), a local sum in rank order, MPI_Allgatherv), so that
 * the cost of the algorithm and the cost of the runtime around it can be told apart.
 * Rank 0 prints one JSON object: {"native": {"all_reduce": [seconds per call], ...},
 * "ordered": {"all_reduce": [...], "reduce_scatter": [...]}}.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { ALL_REDUCE, REDUCE_SCATTER, ALL_GATHER, ALL_TO_ALL, ORDERED_ALL_REDUCE, ORDERED_REDUCE_SCATTER, NKINDS };
static const char* kNames[NKINDS] = {"all_reduce", "reduce_scatter", "all_gather", "all_to_all",
                                     "all_reduce", "reduce_scatter"};

static int rank, size;
static float *in, *out, *scratch;
static long long count; /* floats in BYTES */

/* out[0, n) = the sum, in rank order, of the size blocks of n floats in blocks. */
static void sum_blocks(float* dst, const float* blocks, long long n) {
    memcpy(dst, blocks, (size_t)n * sizeof(float));
    for (int i = 1; i < size; ++i) {
        const float* b = blocks + (size_t)i * (size_t)n;
        for (long long j = 0; j < n; ++j)
            dst[j] += b[j];
    }
}

static void call(int kind) {
    const int piece = (int)(count / size);
    switch (kind) {
    case ALL_REDUCE:
        MPI_Allreduce(in, out, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        break;
    case REDUCE_SCATTER:
        MPI_Reduce_scatter_block(in, out, piece, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        break;
    case ALL_GATHER:
        MPI_Allgather(in, piece, MPI_FLOAT, out, piece, MPI_FLOAT, MPI_COMM_WORLD);
        break;
    case ALL_TO_ALL:
        MPI_Alltoall(in, piece, MPI_FLOAT, out, piece, MPI_FLOAT, MPI_COMM_WORLD);
        break;
    case ORDERED_ALL_REDUCE: {
        /* count is a multiple of size here: equal slices. */
        int* counts = malloc(sizeof(int) * (size_t)size);
        int* displs = malloc(sizeof(int) * (size_t)size);
        for (int i = 0; i < size; ++i) {
            counts[i] = piece;
            displs[i] = i * piece;
        }
        MPI_Alltoall(in, piece, MPI_FLOAT, scratch, piece, MPI_FLOAT, MPI_COMM_WORLD);
        sum_blocks(out + (size_t)rank * (size_t)piece, scratch, piece);
        MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, out, counts, displs, MPI_FLOAT,
                       MPI_COMM_WORLD);
        free(counts);
        free(displs);
        break;
    }
    case ORDERED_REDUCE_SCATTER:
        MPI_Alltoall(in, piece, MPI_FLOAT, scratch, piece, MPI_FLOAT, MPI_COMM_WORLD);
        sum_blocks(out, scratch, piece);
        break;
    }
}

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc != 3) {
        if (rank == 0)
            fprintf(stderr, "usage: reference BYTES ITERS\n");
        MPI_Finalize();
        return 2;
    }
    const long long bytes = atoll(argv[1]);
    const int iters = atoi(argv[2]);
    count = bytes / (long long)sizeof(float);
    if (count % size != 0 || iters < 1) {
        if (rank == 0)
            fprintf(stderr, "reference: BYTES / 4 must divide by the rank count\n");
        MPI_Finalize();
        return 2;
    }
    in = malloc((size_t)bytes);
    out = malloc((size_t)bytes);
    scratch = malloc((size_t)bytes);
    for (long long i = 0; i < count; ++i) {
        in[i] = 1.0f;
        out[i] = 0.0f;
        scratch[i] = 0.0f;
    }
    double* times = malloc(sizeof(double) * (size_t)iters);
    double* worst = malloc(sizeof(double) * (size_t)iters);
    if (rank == 0)
        printf("{");
    for (int kind = 0; kind < NKINDS; ++kind) {
        MPI_Barrier(MPI_COMM_WORLD);
        call(kind); /* warm-up */
        MPI_Barrier(MPI_COMM_WORLD);
        for (int it = 0; it < iters; ++it) {
            const double t0 = MPI_Wtime();
            call(kind);
            times[it] = MPI_Wtime() - t0;
        }
        MPI_Reduce(times, worst, iters, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        if (rank == 0) {
            if (kind == ALL_REDUCE)
                printf("\"native\": {");
            if (kind == ORDERED_ALL_REDUCE)
                printf("}, \"ordered\": {");
            printf("%s\"%s\": [", kind == ALL_REDUCE || kind == ORDERED_ALL_REDUCE ? "" : ", ",
                   kNames[kind]);
            for (int it = 0; it < iters; ++it)
                printf("%s%.9f", it ? ", " : "", worst[it]);
            printf("]");
        }
    }
    if (rank == 0) {
        printf("}}\n");
        fflush(stdout);
    }
    free(times);
    free(worst);
    free(in);
    free(out);
    free(scratch);
    MPI_Finalize();
    return 0;
}
