/* The speed-up of GPT-2's prefill split over processes by heads and
 * features, through the C ABI with MPI's collectives (issue 41's floor:
 * tp = 2, one thread per process, against one process of one thread):
 *
 *     nax build examples/gpt2/gpt2.nax --emit so -o DIR/libgpt2.so
 *     nax build examples/gpt2/gpt2.nax --emit so -o DIR/libgpt2tp.so \
 *         --mesh tp=2 --shard H=tp,F=tp
 *     mpicc -std=c99 -O2 -I DIR -I examples/host_mpi benches/gpt2_split.c \
 *         -o DIR/gpt2_split DIR/libgpt2.so DIR/libgpt2tp.so -Wl,-rpath,DIR
 *     mpirun -np 2 DIR/gpt2_split WEIGHTS.safetensors ROUNDS TOKENS
 *
 * Each round, after a barrier, every rank calls the split `gpt2` on
 * TOKENS tokens (batch 1; its time is the slowest rank's), then, after
 * another barrier, every rank calls the whole `gpt2` alone on its core (the
 * unsplit time is each rank's own, as one process of one thread would
 * take with its neighbour busy too). Then the plan's collectives, timed
 * alone: the communication's share. They are MPI_Allreduce of a [1 TOKENS
 * D] f32 value twice per layer (Megatron's), and the head's, which the
 * compiler splits along D (each rank its columns of the tied table): the
 * embedding's rows all-gathered ([1 TOKENS D]) and the logits' partial
 * sums all-reduced ([1 TOKENS V]). Rank 0 prints one JSON line: the
 * medians of the split and unsplit times, the median of the per-round
 * speed-ups, and the collectives' time. The dims default to GPT-2
 * small's (-DGPT2_L, -DGPT2_D, -DGPT2_V for others). */
#include "gpt2.h"
#include "gpt2tp.h"
#include "nax_mpi.h"
#include <stdio.h>
#include <stdlib.h>

#ifndef GPT2_L
#define GPT2_L 12
#endif
#ifndef GPT2_D
#define GPT2_D 768
#endif
#ifndef GPT2_V
#define GPT2_V 50257
#endif

static int by_value(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return (a > b) - (a < b);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, by_value);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static int fail(int rank, const char *what, const char *message) {
  fprintf(stderr, "rank %d: %s: %s\n", rank, what, message);
  return 1;
}

int main(int argc, char **argv) {
  nax_mpi mpi;
  nax_collectives collectives;
  nax_shard_options options = {1, 0}; /* one thread; each rank's blocks */
  gpt2_model *whole = NULL;
  gpt2tp_model *split = NULL;
  int rank = 0, rounds, r;
  int64_t tokens_len, i, shape[2] = {1, 0};
  int64_t *ids;
  double *split_ms, *unsplit_ms, *speedup, start, exchange_ms;
  float *buffer, *logits;
  int size = 1;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc != 4 || atoi(argv[2]) < 1 || atoll(argv[3]) < 1) {
    if (rank == 0) fprintf(stderr, "usage: mpirun -np 2 %s WEIGHTS ROUNDS TOKENS\n", argv[0]);
    MPI_Finalize();
    return 2;
  }
  rounds = atoi(argv[2]);
  tokens_len = atoll(argv[3]);
  ids = calloc((size_t)tokens_len, sizeof *ids);
  buffer = calloc((size_t)(tokens_len * GPT2_D), sizeof *buffer);
  logits = calloc((size_t)(tokens_len * GPT2_V), sizeof *logits);
  split_ms = calloc((size_t)rounds, sizeof *split_ms);
  unsplit_ms = calloc((size_t)rounds, sizeof *unsplit_ms);
  speedup = calloc((size_t)rounds, sizeof *speedup);
  if (!ids || !buffer || !logits || !split_ms || !unsplit_ms || !speedup) return 3;
  for (i = 0; i < tokens_len; i++) ids[i] = (i * 7919) % 1000; /* ids any vocabulary has */
  shape[1] = tokens_len;
  collectives = nax_mpi_collectives(&mpi, MPI_COMM_WORLD);
  if (gpt2tp_open_sharded(argv[1], &options, &collectives, &split) != NAX_OK) return fail(rank, "open split", gpt2tp_last_error());
  if (gpt2_open(argv[1], 1, &whole) != NAX_OK) return fail(rank, "open whole", gpt2_last_error());
  for (r = -1; r < rounds; r++) { /* round -1 warms up */
    DLTensor tokens = {ids, {kDLCPU, 0}, 2, {kDLInt, 64, 1}, shape, NULL, 0};
    nax_result result;
    double mine, slowest;
    MPI_Barrier(MPI_COMM_WORLD);
    start = MPI_Wtime();
    if (gpt2tp_gpt2(split, &tokens, &result) != NAX_OK) return fail(rank, "split call", gpt2tp_last_error());
    mine = MPI_Wtime() - start;
    result.tensor->deleter(result.tensor);
    MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    start = MPI_Wtime();
    if (gpt2_gpt2(whole, &tokens, &result) != NAX_OK) return fail(rank, "whole call", gpt2_last_error());
    mine = MPI_Wtime() - start;
    result.tensor->deleter(result.tensor);
    if (r >= 0) {
      split_ms[r] = slowest * 1e3;
      unsplit_ms[r] = mine * 1e3;
      speedup[r] = mine / slowest;
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  start = MPI_Wtime();
  MPI_Allgather(MPI_IN_PLACE, 0, MPI_FLOAT, buffer, (int)(tokens_len * GPT2_D / size), MPI_FLOAT, MPI_COMM_WORLD);
  for (i = 0; i < 2 * GPT2_L; i++) MPI_Allreduce(MPI_IN_PLACE, buffer, (int)(tokens_len * GPT2_D), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, logits, (int)(tokens_len * GPT2_V), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  exchange_ms = (MPI_Wtime() - start) * 1e3;
  if (rank == 0)
    printf("{\"tokens\": %lld, \"rounds\": %d, \"split_ms\": %.2f, \"unsplit_ms\": %.2f, \"speedup\": %.3f, \"all_reduces\": %d, \"all_gathers\": 1, "
           "\"collectives_ms\": %.2f}\n",
           (long long)tokens_len, rounds, median(split_ms, rounds), median(unsplit_ms, rounds), median(speedup, rounds), 2 * GPT2_L + 1, exchange_ms);
  gpt2tp_close(split);
  gpt2_close(whole);
  nax_mpi_free(&mpi);
  MPI_Finalize();
  free(ids);
  free(buffer);
  free(logits);
  free(split_ms);
  free(unsplit_ms);
  free(speedup);
  return 0;
}
