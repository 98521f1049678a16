/*
 * ccbench's compiled timing loop for the MPI library's own collectives (`--loop compiled`).
 *
 * The per-sample protocol is the one of ccbench's Python loop (ccbench/measure/timing.py,
 * `measure`), which follows OSU Micro-Benchmarks (osu_util_mpi / osu_allreduce.c: MPI_Barrier,
 * timer, one call, timer) and, batched, IMB and nccl-tests (a timer around K back-to-back
 * calls, the time / K):
 *
 *   sync "barrier": MPI_Barrier; t0 = now; K calls; local[i] = (now - t0) / K
 *   sync "window":  rank 0 picks start = now + gap; MPI_Bcast(start); start += this rank's
 *                   clock offset to rank 0; spin until start; K calls; local[i] = (now - start) / K
 *
 * `ccb_take_seq` runs, per sample, a sequence of cases back to back (a training step's calls: DDP's
 * bucket allreduces, ZeRO's reduce-scatters and allgathers, MoE's all-to-alls) under the same
 * protocol, the synchronisation on its own communicator, with the clock read around each call as
 * well (ccbench/measure/workload_engine.py, `StepTimer`), and optionally a delay on this rank
 * between the barrier and its timer (`DelayedSync`, the straggler workload).
 *
 * Only the loop over the samples of one check runs here; the warm-up estimate, the reduction of
 * the per-rank times to their maximum over ranks, the stop rules and the statistics stay in
 * Python, so both loops give the same kind of sample.  Handles arrive as Fortran handles
 * (mpi4py's py2f) and are turned into C handles with MPI_*_f2c, which works whatever type the
 * library gives MPI_Comm (an int in MPICH, a pointer in Open MPI).  The clock is
 * clock_gettime(CLOCK_MONOTONIC), the clock of Python's time.perf_counter on Linux.
 */
#define _POSIX_C_SOURCE 199309L
#include <mpi.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CCB_ABI 2 /* bump when ccb_case or a signature changes (compiled.py checks it) */

/* the collectives, in the order of ccbench.measure.compiled.CODES */
enum { CCB_BARRIER, CCB_PINGPONG, CCB_BCAST, CCB_SCATTER, CCB_GATHER, CCB_ALLGATHER, CCB_REDUCE,
       CCB_REDUCE_SCATTER, CCB_ALLREDUCE, CCB_ALLTOALL };
/* what a buffer argument is: an array, MPI_IN_PLACE, or nothing (a non-root's unused buffer) */
enum { CCB_BUF, CCB_IN_PLACE, CCB_NULL };

typedef struct {
    int coll;
    MPI_Fint comm, dtype, op;
    int root;
    int count; /* elements per buffer, or per block of the blocked collectives */
    void *sbuf, *rbuf;
    int skind, rkind;
} ccb_case;

int ccb_abi(void) { return CCB_ABI; }

double ccb_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The version string of the MPI library this file was linked with (callable before MPI_Init). */
int ccb_library_version(char *out, int len)
{
    char v[MPI_MAX_LIBRARY_VERSION_STRING];
    int n = 0;
    int err = MPI_Get_library_version(v, &n);
    if (err != MPI_SUCCESS || len < 1)
        return err != MPI_SUCCESS ? err : 1;
    if (n >= len)
        n = len - 1;
    memcpy(out, v, (size_t)n);
    out[n] = '\0';
    return MPI_SUCCESS;
}

typedef struct {
    MPI_Comm comm;
    MPI_Datatype dt;
    MPI_Op op;
    void *s, *r;
    int rank;
} resolved;

static void *buffer(void *p, int kind)
{
    return kind == CCB_IN_PLACE ? MPI_IN_PLACE : kind == CCB_NULL ? NULL : p;
}

static int resolve(const ccb_case *c, resolved *x)
{
    x->comm = MPI_Comm_f2c(c->comm);
    x->dt = MPI_Type_f2c(c->dtype);
    x->op = MPI_Op_f2c(c->op);
    x->s = buffer(c->sbuf, c->skind);
    x->r = buffer(c->rbuf, c->rkind);
    return MPI_Comm_rank(x->comm, &x->rank);
}

/* One call, with the arguments mpi4py's buffer interface passes for ccbench's native algorithms
 * (ccbench/algorithms/native.py); reduce_scatter is MPI_Reduce_scatter_block. */
static int one_call(const ccb_case *c, const resolved *x)
{
    int n = c->count, err;
    switch (c->coll) {
    case CCB_BARRIER:
        return MPI_Barrier(x->comm);
    case CCB_PINGPONG: /* rank 1 echoes what it received; other ranks idle */
        if (x->rank == 0) {
            err = MPI_Send(x->s, n, x->dt, 1, 7, x->comm);
            return err != MPI_SUCCESS ? err : MPI_Recv(x->r, n, x->dt, 1, 7, x->comm, MPI_STATUS_IGNORE);
        }
        if (x->rank == 1) {
            err = MPI_Recv(x->r, n, x->dt, 0, 7, x->comm, MPI_STATUS_IGNORE);
            return err != MPI_SUCCESS ? err : MPI_Send(x->r, n, x->dt, 0, 7, x->comm);
        }
        return MPI_SUCCESS;
    case CCB_BCAST:
        return MPI_Bcast(x->s, n, x->dt, c->root, x->comm);
    case CCB_SCATTER:
        return MPI_Scatter(x->s, n, x->dt, x->r, n, x->dt, c->root, x->comm);
    case CCB_GATHER:
        return MPI_Gather(x->s, n, x->dt, x->r, n, x->dt, c->root, x->comm);
    case CCB_ALLGATHER:
        return MPI_Allgather(x->s, n, x->dt, x->r, n, x->dt, x->comm);
    case CCB_REDUCE:
        return MPI_Reduce(x->s, x->r, n, x->dt, x->op, c->root, x->comm);
    case CCB_REDUCE_SCATTER:
        return MPI_Reduce_scatter_block(x->s, x->r, n, x->dt, x->op, x->comm);
    case CCB_ALLREDUCE:
        return MPI_Allreduce(x->s, x->r, n, x->dt, x->op, x->comm);
    case CCB_ALLTOALL:
        return MPI_Alltoall(x->s, n, x->dt, x->r, n, x->dt, x->comm);
    default:
        return MPI_ERR_ARG;
    }
}

/* One untimed call (ccbench validates what it timed). */
int ccb_call(const ccb_case *c)
{
    resolved x;
    int err = resolve(c, &x);
    return err != MPI_SUCCESS ? err : one_call(c, &x);
}

/* `n` samples of `batch` back-to-back calls each, this rank's time per call into local[0..n). */
int ccb_take(const ccb_case *c, double *local, int n, int batch, int window, double gap_s, double offset_s)
{
    resolved x;
    int err = resolve(c, &x);
    if (err != MPI_SUCCESS)
        return err;
    for (int i = 0; i < n; ++i) {
        double t0;
        if (!window) {
            if ((err = MPI_Barrier(x.comm)) != MPI_SUCCESS)
                return err;
            t0 = ccb_now();
        } else {
            double start = x.rank == 0 ? ccb_now() + gap_s : 0.0;
            if ((err = MPI_Bcast(&start, 1, MPI_DOUBLE, 0, x.comm)) != MPI_SUCCESS)
                return err;
            t0 = start + offset_s;
            while (ccb_now() < t0)
                ;
        }
        for (int k = 0; k < batch; ++k)
            if ((err = one_call(c, &x)) != MPI_SUCCESS)
                return err;
        local[i] = (ccb_now() - t0) / batch;
    }
    return MPI_SUCCESS;
}

/* Sleep `s` seconds (nanosleep, resumed after a signal): what Python's time.sleep does on Linux. */
static void sleep_for(double s)
{
    struct timespec ts, rem;
    ts.tv_sec = (time_t)s;
    ts.tv_nsec = (long)((s - (double)ts.tv_sec) * 1e9);
    while (nanosleep(&ts, &rem) == -1 && errno == EINTR)
        ts = rem;
}

/* `n` samples of `batch` back-to-back runs of the sequence cases[0..ncases) each, this rank's time per run into
 * local[0..n).  The protocol of ccb_take with the synchronisation (barrier, or the window's broadcast start) on
 * `sync`, which may be another communicator than the cases' (MoE's calls run on expert-parallel groups, its
 * samples are synchronised over every rank).  With `delay_s` > 0 this rank sleeps that long after each barrier,
 * before its timer starts (the straggler).  With `per_call` (rows x ncases, row-major) each call is timed on its
 * own too: run r of the sequence (r counted from `row0`, over every sample and batch) writes row r % rows, as
 * ccbench's Python step timer does.  A sample is OSU Micro-Benchmarks' (MPI_Barrier, timer, the calls, timer) with
 * a step of calls where OSU has one; the straggler's sleep after the barrier is ccbench's own DelayedSync. */
int ccb_take_seq(const ccb_case *cases, int ncases, MPI_Fint sync, double *local, int n, int batch, int window,
                 double gap_s, double offset_s, double delay_s, double *per_call, int rows, int row0)
{
    MPI_Comm scomm = MPI_Comm_f2c(sync);
    resolved *x;
    int err = MPI_SUCCESS, srank;
    long run = row0;
    if (ncases < 0 || (per_call != NULL && rows < 1))
        return MPI_ERR_ARG;
    if ((err = MPI_Comm_rank(scomm, &srank)) != MPI_SUCCESS)
        return err;
    x = malloc(sizeof(resolved) * (size_t)(ncases > 0 ? ncases : 1));
    if (x == NULL)
        return MPI_ERR_NO_MEM;
    for (int j = 0; j < ncases; ++j)
        if ((err = resolve(&cases[j], &x[j])) != MPI_SUCCESS)
            goto done;
    for (int i = 0; i < n; ++i) {
        double t0;
        if (!window) {
            if ((err = MPI_Barrier(scomm)) != MPI_SUCCESS)
                goto done;
            if (delay_s > 0)
                sleep_for(delay_s);
            t0 = ccb_now();
        } else {
            double start = srank == 0 ? ccb_now() + gap_s : 0.0;
            if ((err = MPI_Bcast(&start, 1, MPI_DOUBLE, 0, scomm)) != MPI_SUCCESS)
                goto done;
            t0 = start + offset_s;
            while (ccb_now() < t0)
                ;
        }
        for (int k = 0; k < batch; ++k, ++run) {
            if (per_call == NULL) {
                for (int j = 0; j < ncases; ++j)
                    if ((err = one_call(&cases[j], &x[j])) != MPI_SUCCESS)
                        goto done;
            } else {
                double *row = per_call + (size_t)(run % rows) * (size_t)ncases;
                for (int j = 0; j < ncases; ++j) {
                    double tj = ccb_now();
                    if ((err = one_call(&cases[j], &x[j])) != MPI_SUCCESS)
                        goto done;
                    row[j] = ccb_now() - tj;
                }
            }
        }
        local[i] = (ccb_now() - t0) / batch;
    }
done:
    free(x);
    return err;
}
