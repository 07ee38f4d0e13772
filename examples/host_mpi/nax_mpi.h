/* nax_mpi.h: the collectives of a nax library split over processes
 * (`nax build --emit so --mesh tp=2 --shard H=tp,F=tp`), run by MPI.
 *
 *     nax_mpi mpi;
 *     nax_collectives coll = nax_mpi_collectives(&mpi, MPI_COMM_WORLD);
 *     NAME_open_sharded(weights, NULL, &coll, &model);
 *     ...
 *     NAME_close(model);
 *     nax_mpi_free(&mpi);
 *
 * Include it after the library's header, in one C file of the host. Each
 * mesh axis's group gets a communicator of its own the first time a
 * collective runs along it (MPI_Comm_create_group: only the group's ranks
 * take part), kept until nax_mpi_free. Communicators return MPI's errors
 * instead of aborting, so a failed collective reaches the caller as
 * NAX_ERR_COLLECTIVE with MPI's message. Reductions of bf16 and f16 are
 * refused (MPI has no such types); gathers move them as 16-bit words. */
#ifndef NAX_MPI_H_
#define NAX_MPI_H_

#include <mpi.h>
#include <stdio.h>
#include <string.h>

enum { NAX_MPI_MAX_AXES = 8 };

typedef struct {
  MPI_Comm world;
  int axes;                                  /* how many communicators are made */
  char names[NAX_MPI_MAX_AXES][64];          /* each one's mesh axis */
  MPI_Comm comms[NAX_MPI_MAX_AXES];
} nax_mpi;

static int32_t nax_mpi_rank(void *context) {
  int r = -1;
  MPI_Comm_rank(((nax_mpi *)context)->world, &r);
  return r;
}

static int32_t nax_mpi_size(void *context) {
  int n = 0;
  MPI_Comm_size(((nax_mpi *)context)->world, &n);
  return n;
}

/* Writes MPI's message for `code` (or `what`) into the caller's buffer; 1. */
static int nax_mpi_error(int code, const char *what, char *error, size_t error_size) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (code != MPI_SUCCESS && MPI_Error_string(code, text, &len) == MPI_SUCCESS) {
    snprintf(error, error_size, "%s: %.*s", what, len, text);
  } else {
    snprintf(error, error_size, "%s", what);
  }
  return 1;
}

/* The communicator of a group: made the first time, by its ranks alone. */
static int nax_mpi_comm(nax_mpi *mpi, const nax_group *group, MPI_Comm *comm, char *error, size_t error_size) {
  MPI_Group world_group, members;
  int i, code, ranks[256];
  for (i = 0; i < mpi->axes; i++) {
    if (strcmp(mpi->names[i], group->mesh_axis) == 0) {
      *comm = mpi->comms[i];
      return 0;
    }
  }
  if (mpi->axes == NAX_MPI_MAX_AXES || group->size > 256 || strlen(group->mesh_axis) >= sizeof mpi->names[0]) {
    return nax_mpi_error(MPI_SUCCESS, "nax_mpi: too many mesh axes, ranks or too long a name", error, error_size);
  }
  for (i = 0; i < (int)group->size; i++) ranks[i] = group->ranks[i];
  MPI_Comm_group(mpi->world, &world_group);
  MPI_Group_incl(world_group, (int)group->size, ranks, &members);
  code = MPI_Comm_create_group(mpi->world, members, 0, comm);
  MPI_Group_free(&members);
  MPI_Group_free(&world_group);
  if (code != MPI_SUCCESS) return nax_mpi_error(code, "MPI_Comm_create_group", error, error_size);
  MPI_Comm_set_errhandler(*comm, MPI_ERRORS_RETURN);
  strcpy(mpi->names[mpi->axes], group->mesh_axis);
  mpi->comms[mpi->axes++] = *comm;
  return 0;
}

/* MPI's type of a DLPack dtype (`reduced`: for a reduction, where 16-bit
 * floats have none); MPI_DATATYPE_NULL where there is none. */
static MPI_Datatype nax_mpi_type(DLDataType t, int reduced) {
  if (t.code == kDLFloat && t.bits == 32) return MPI_FLOAT;
  if (t.code == kDLFloat && t.bits == 64) return MPI_DOUBLE;
  if (t.code == kDLInt && t.bits == 32) return MPI_INT32_T;
  if (t.code == kDLInt && t.bits == 64) return MPI_INT64_T;
  if (t.code == kDLBool && t.bits == 8) return MPI_UINT8_T;
  if (!reduced && t.bits == 16) return MPI_UINT16_T;
  return MPI_DATATYPE_NULL;
}

static MPI_Op nax_mpi_op(nax_reduce_op op) {
  switch (op) {
    case NAX_REDUCE_MAX: return MPI_MAX;
    case NAX_REDUCE_MIN: return MPI_MIN;
    case NAX_REDUCE_PROD: return MPI_PROD;
    default: return MPI_SUM;
  }
}

/* A collective's communicator and MPI type (`reduced`: for a reduction);
 * 0, or 1 with a message. */
static int nax_mpi_prepare(void *context, const nax_group *group, DLDataType dtype, int reduced, size_t count, MPI_Comm *comm,
                           MPI_Datatype *type, char *error, size_t error_size) {
  *type = nax_mpi_type(dtype, reduced);
  if (*type == MPI_DATATYPE_NULL || count > 2147483647u) {
    return nax_mpi_error(MPI_SUCCESS, reduced ? "nax_mpi: no MPI reduction of this dtype or count" : "nax_mpi: no MPI type of this dtype or count",
                         error, error_size);
  }
  return nax_mpi_comm((nax_mpi *)context, group, comm, error, error_size);
}

static int nax_mpi_all_reduce(void *context, const nax_group *group, DLDataType dtype, nax_reduce_op op, void *data, size_t count,
                              char *error, size_t error_size) {
  MPI_Comm comm;
  MPI_Datatype type;
  int code;
  if (nax_mpi_prepare(context, group, dtype, 1, count, &comm, &type, error, error_size)) return 1;
  code = MPI_Allreduce(MPI_IN_PLACE, data, (int)count, type, nax_mpi_op(op), comm);
  return code == MPI_SUCCESS ? 0 : nax_mpi_error(code, "MPI_Allreduce", error, error_size);
}

static int nax_mpi_all_gather(void *context, const nax_group *group, DLDataType dtype, const void *block, size_t count, void *out,
                              char *error, size_t error_size) {
  MPI_Comm comm;
  MPI_Datatype type;
  int code;
  if (nax_mpi_prepare(context, group, dtype, 0, count, &comm, &type, error, error_size)) return 1;
  code = MPI_Allgather(block, (int)count, type, out, (int)count, type, comm);
  return code == MPI_SUCCESS ? 0 : nax_mpi_error(code, "MPI_Allgather", error, error_size);
}

static int nax_mpi_reduce_scatter(void *context, const nax_group *group, DLDataType dtype, nax_reduce_op op, const void *data, size_t count,
                                  void *out, char *error, size_t error_size) {
  MPI_Comm comm;
  MPI_Datatype type;
  int code;
  if (nax_mpi_prepare(context, group, dtype, 1, count, &comm, &type, error, error_size)) return 1;
  code = MPI_Reduce_scatter_block(data, out, (int)(count / group->size), type, nax_mpi_op(op), comm);
  return code == MPI_SUCCESS ? 0 : nax_mpi_error(code, "MPI_Reduce_scatter_block", error, error_size);
}

/* The collectives over `world` (its size must be the library's mesh's). */
static nax_collectives nax_mpi_collectives(nax_mpi *mpi, MPI_Comm world) {
  nax_collectives c;
  memset(mpi, 0, sizeof *mpi);
  mpi->world = world;
  c.context = mpi;
  c.rank = nax_mpi_rank;
  c.size = nax_mpi_size;
  c.all_reduce = nax_mpi_all_reduce;
  c.all_gather = nax_mpi_all_gather;
  c.reduce_scatter = nax_mpi_reduce_scatter;
  return c;
}

/* Frees the communicators made (after the models using them are closed). */
static void nax_mpi_free(nax_mpi *mpi) {
  int i;
  for (i = 0; i < mpi->axes; i++) MPI_Comm_free(&mpi->comms[i]);
  mpi->axes = 0;
}

#endif /* NAX_MPI_H_ */
