# Sourced by the mpi tests: skips (exit 77) where mpirun is missing, and sets up Open MPI for local
# ranks on one machine: as root (CI), without ssh, without cross-process memory reads.
if ! command -v mpirun >/dev/null; then
  echo "skipped: mpirun not found (Debian's openmpi-bin, installed with libopenmpi-dev by scripts/install-deps.sh)"
  exit 77
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1  # CI runs as root
export OMPI_MCA_plm=isolated                        # one machine: no ssh needed to start the ranks
export OMPI_MCA_btl_vader_single_copy_mechanism=none  # containers often forbid cross-process memory reads
mpi=(mpirun -q --oversubscribe)
