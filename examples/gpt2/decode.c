/* Greedy decoding with GPT-2 from C, through the library nax builds from
 * gpt2.nax (`nax build gpt2.nax --emit so -o libgpt2.so`): the prompt
 * goes through `step` with an empty cache, then each new token alone. The
 * key/value caches are allocated once, [L 1 H capacity Dh]; each step reads
 * their first `len` positions in place (strides, no copy) and its new keys
 * and values, the results `k` and `v`, are written after them.
 *
 *     ./decode WEIGHTS.safetensors NEW_TOKENS PROMPT_ID...
 *
 * prints the generated ids on one line. The dims are GPT-2 small's, as
 * gpt2.nax declares them; build with -DGPT2_V=... and so on for another
 * configuration (the header's comment on `step` gives each axis's size).
 *
 * Split over processes by heads and hidden features, its collectives run
 * by MPI (`nax build gpt2.nax --emit so -o libgpt2.so --mesh tp=2 --shard
 * H=tp,F=tp`, then `mpicc -DGPT2_TP=2 -I examples/host_mpi ...` and
 * `mpirun -np 2 ./decode ...`): each rank holds its heads' caches and its
 * blocks of the weights (read from the one file), the logits are whole on
 * every rank, and rank 0 prints. */
#include "gpt2.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifndef GPT2_TP
#define GPT2_TP 1
#endif
#if GPT2_TP > 1
#include "nax_mpi.h"
#endif

#ifndef GPT2_L
#define GPT2_L 12
#endif
#ifndef GPT2_H
#define GPT2_H 12
#endif
#ifndef GPT2_DH
#define GPT2_DH 64
#endif
#ifndef GPT2_V
#define GPT2_V 50257
#endif

/* HEADS: this process's (all of them, or its block of GPT2_TP). */
enum { LAYERS = GPT2_L, HEADS = GPT2_H / GPT2_TP, DEPTH = GPT2_DH, VOCAB = GPT2_V };

static int fail(const char *what) {
  fprintf(stderr, "%s: %s\n", what, gpt2_last_error());
  return 1;
}

/* The first `len` positions of a cache of `capacity`, read in place. */
static DLTensor cache_view(float *data, int64_t *shape, int64_t *strides, int64_t len, int64_t capacity) {
  DLTensor t = {data, {kDLCPU, 0}, 5, {kDLFloat, 32, 1}, shape, strides, 0};
  shape[0] = LAYERS; shape[1] = 1; shape[2] = HEADS; shape[3] = len; shape[4] = DEPTH;
  strides[0] = HEADS * capacity * DEPTH; strides[1] = 0; strides[2] = capacity * DEPTH; strides[3] = DEPTH; strides[4] = 1;
  return t;
}

/* Writes a step's new entries [L 1 H n Dh] after the `len` cached ones. */
static void append(float *cache, const nax_result *r, int64_t len, int64_t capacity) {
  const float *v = (const float *)r->tensor->dl_tensor.data;
  int64_t n = r->tensor->dl_tensor.shape[3], l, h, c;
  for (l = 0; l < LAYERS; l++)
    for (h = 0; h < HEADS; h++)
      for (c = 0; c < n; c++)
        memcpy(cache + ((l * HEADS + h) * capacity + len + c) * DEPTH, v + ((l * HEADS + h) * n + c) * DEPTH, DEPTH * sizeof(float));
}

int main(int argc, char **argv) {
  gpt2_model *model = NULL;
  int64_t prompt_len, capacity, new_tokens, len = 0, i, *ids;
  int64_t id_shape[2] = {1, 0}, k_shape[5], k_strides[5], v_shape[5], v_strides[5];
  float *keys, *values;
  int rank = 0;
#if GPT2_TP > 1
  nax_mpi mpi;
  nax_collectives collectives;
  nax_shard_options options = {1, 0}; /* one thread per process; each rank's blocks */
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  collectives = nax_mpi_collectives(&mpi, MPI_COMM_WORLD);
#endif
  if (argc < 4) {
    fprintf(stderr, "usage: %s WEIGHTS NEW_TOKENS PROMPT_ID...\n", argv[0]);
    return 2;
  }
  new_tokens = atoll(argv[2]);
  prompt_len = argc - 3;
  capacity = prompt_len + new_tokens;
  ids = calloc((size_t)prompt_len, sizeof *ids);
  keys = calloc((size_t)(LAYERS * HEADS * capacity * DEPTH), sizeof *keys);
  values = calloc((size_t)(LAYERS * HEADS * capacity * DEPTH), sizeof *values);
  if (!ids || !keys || !values) return 3;
  for (i = 0; i < prompt_len; i++) ids[i] = atoll(argv[3 + i]);
#if GPT2_TP > 1
  if (gpt2_open_sharded(argv[1], &options, &collectives, &model) != NAX_OK) return fail("open");
#else
  if (gpt2_open(argv[1], 0, &model) != NAX_OK) return fail("open");
#endif
  id_shape[1] = prompt_len;
  for (i = 0; i < new_tokens; i++) {
    DLTensor tokens = {ids, {kDLCPU, 0}, 2, {kDLInt, 64, 1}, id_shape, NULL, 0};
    DLTensor k = cache_view(keys, k_shape, k_strides, len, capacity);
    DLTensor v = cache_view(values, v_shape, v_strides, len, capacity);
    nax_result results[3]; /* logits [1 n V], k and v [L 1 H n Dh] */
    const float *last;
    int64_t best = 0, j, n = id_shape[1];
    if (gpt2_step(model, &tokens, &k, &v, results) != NAX_OK) return fail("step");
    last = (const float *)results[0].tensor->dl_tensor.data + (n - 1) * VOCAB;
    for (j = 1; j < VOCAB; j++)
      if (last[j] > last[best]) best = j;
    append(keys, &results[1], len, capacity);
    append(values, &results[2], len, capacity);
    len += n;
    for (j = 0; j < 3; j++) results[j].tensor->deleter(results[j].tensor);
    if (rank == 0) printf("%s%lld", i ? " " : "", (long long)best);
    ids[0] = best;
    id_shape[1] = 1;
  }
  if (rank == 0) printf("\n");
  gpt2_close(model);
#if GPT2_TP > 1
  nax_mpi_free(&mpi);
  MPI_Finalize();
#endif
  free(ids);
  free(keys);
  free(values);
  return 0;
}
