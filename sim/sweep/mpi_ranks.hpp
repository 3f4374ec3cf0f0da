// The MPI ranks of `mpirun -np N moesim sweep ...` (Open MPI; moesim built where CMake found MPI).
#pragma once

#include <memory>

#include "sim/sweep/ranks.hpp"

namespace moesim::sweep {

// The ranks of MPI_COMM_WORLD when an MPI launcher (mpirun, mpiexec, srun) started this process
// as one of several; nullptr otherwise (a plain `moesim sweep`, or `mpirun -np 1`). MPI is
// initialised only then: a process not started by a launcher never touches MPI (a singleton
// MPI_Init can fail or hang in a container), and it is finalised when the object goes. A moesim
// built without MPI refuses to run as one of several processes (InputError): each would run the
// whole sweep into the same files.
std::unique_ptr<Ranks> mpi_ranks_from_launcher();

// Whether this moesim was built with MPI.
bool built_with_mpi();

}  // namespace moesim::sweep
