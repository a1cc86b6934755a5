// The NCCL handler (--device=cuda --comm=nccl): collectives between GPUs, one mesh
// device per GPU. Two ways to run:
//   - one process (the default): every device is a thread of this process, device d on
//     GPU d; the program needs at least as many GPUs as devices;
//   - under mpirun (when the runtime has MPI, comm/mpi/): one process per device, as
//     with --comm=mpi, on GPU rank % (the node's GPUs).
// Each group gets its own NCCL communicator: its unique id is made once per group
// (ncclGetUniqueId; under mpirun by the group's first member and broadcast over the
// group's MPI communicator, across hosts, MpiHandler::bootstrap_group), and each member joins (ncclCommInitRank) from its own
// thread, on its own GPU, the first time it uses the group. Made by make_nccl_handler
// for meshrt_main.
//
// Failure is bounded (--comm-timeout): a collective's stream is polled (cudaStreamQuery)
// instead of synchronised, with NCCL's asynchronous error (ncclCommGetAsyncError) checked
// on the way; an error, or no completion within the timeout, aborts the communicator
// (ncclCommAbort) and fails the run with a message naming the collective and its group
// (under mpirun, MPI_Abort then ends the job).
#pragma once

#include <memory>
#include <string>

#include "comm/comm.h"

namespace meshrt::comm {

/// For --comm=nccl (after the CUDA device was initialised). Returns null with *status
/// set (2) and a message on stderr when NCCL cannot run the program: fewer GPUs than
/// devices in one process, or started by mpirun without MPI in this runtime. Under
/// mpirun (with MPI) it initialises MPI as make_mpi_handler does.
std::unique_ptr<CommHandler> make_nccl_handler(const Topology& topology,
                                               const CommSettings& settings,
                                               const std::string& program_name, int* argc,
                                               char*** argv, int* status);

} // namespace meshrt::comm
