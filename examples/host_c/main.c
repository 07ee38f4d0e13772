/* A C application running the example transformer block from its shared
 * library (nax's C ABI, ABI.md): no Rust, LLVM or Python needed here.
 *
 *   nax build examples/transformer_block.nax --emit so -o DIR/libblock.so
 *   cc -std=c99 -O2 examples/host_c/main.c -IDIR -LDIR -lblock -lpthread -Wl,-rpath,DIR -o app
 *   ./app WEIGHTS.safetensors [CALLS]
 *
 * Opens the model with the weights (bound by name), calls `block` through
 * its typed entry on a seeded batch x[b=2, n=16, D=512], prints the
 * result's shape, axis names and a checksum, shows an error (a tensor of
 * the wrong width: the status code and the message naming the parameter
 * and the axis), calls `block` from four threads at once through the
 * generic entry (axes bound by name), then times CALLS calls (default 20). */
#define _POSIX_C_SOURCE 200809L
#include "block.h"
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

enum { B = 2, N = 16, D = 512 };

static block_model *model;
static float x[B * N * D];
static int64_t x_shape[3] = {B, N, D};

/* A seeded value in [-1, 1) for position i. */
static float seeded(unsigned long i) {
  unsigned long s = i * 2654435761UL + 12345UL;
  s ^= s >> 13;
  s *= 0x5bd1e995UL;
  s ^= s >> 15;
  return (float)((s & 0xffffUL) / 32768.0 - 1.0);
}

/* A DLTensor over the caller's memory: float32, row-major (NULL strides). */
static DLTensor cpu_f32(float *data, int32_t ndim, int64_t *shape) {
  DLTensor t;
  t.data = data;
  t.device.device_type = kDLCPU;
  t.device.device_id = 0;
  t.ndim = ndim;
  t.dtype.code = kDLFloat;
  t.dtype.bits = 32;
  t.dtype.lanes = 1;
  t.shape = shape;
  t.strides = NULL;
  t.byte_offset = 0;
  return t;
}

/* The sum and the sum of absolute values of a float32 result. */
static void checksum(const nax_result *r, double *sum, double *abs_sum) {
  const DLTensor *t = &r->tensor->dl_tensor;
  const float *v = (const float *)((const char *)t->data + t->byte_offset);
  int64_t n = 1, i;
  for (i = 0; i < t->ndim; i++) n *= t->shape[i];
  *sum = 0;
  *abs_sum = 0;
  for (i = 0; i < n; i++) {
    *sum += v[i];
    *abs_sum += fabs(v[i]);
  }
}

/* One thread: `block` through the generic entry, x's axes given by name. */
static void *worker(void *arg) {
  static const char *const axes[3] = {"b", "n", "D"};
  DLTensor t = cpu_f32(x, 3, x_shape);
  nax_arg a;
  nax_result r;
  double *sum = arg, abs_sum;
  a.name = "x";
  a.tensor = &t;
  a.axes = axes;
  a.capacity = sizeof x;
  if (block_call(model, "block", &a, 1, &r) != NAX_OK) {
    fprintf(stderr, "block_call: %s\n", block_last_error());
    return NULL;
  }
  checksum(&r, sum, &abs_sum);
  r.tensor->deleter(r.tensor);
  return NULL;
}

static double seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
  DLTensor t;
  nax_result r;
  double sum, abs_sum, sums[4], start;
  int i, j, calls = argc > 2 ? atoi(argv[2]) : 20, status;
  pthread_t threads[4];
  int64_t wrong_shape[3] = {B, N, D - 1};
  if (argc < 2) {
    fprintf(stderr, "usage: %s WEIGHTS.safetensors [CALLS]\n", argv[0]);
    return 2;
  }
  for (i = 0; i < B * N * D; i++) x[i] = seeded((unsigned long)i);

  /* Open: the weights bind by name; 0 threads: one worker per core. */
  if (block_open(argv[1], 0, &model) != NAX_OK) {
    fprintf(stderr, "block_open: %s\n", block_last_error());
    return 1;
  }
  printf("libblock ABI %u; its manifest (JSON): %.72s...\n", (unsigned)block_abi_version(), block_manifest());

  /* The typed entry: tensors by position, as declared. */
  t = cpu_f32(x, 3, x_shape);
  if (block_block(model, &t, &r) != NAX_OK) {
    fprintf(stderr, "block_block: %s\n", block_last_error());
    return 1;
  }
  checksum(&r, &sum, &abs_sum);
  printf("block(x) -> [");
  for (i = 0; i < r.tensor->dl_tensor.ndim; i++) printf("%s%s=%lld", i ? " " : "", r.axes[i] ? r.axes[i] : "_", (long long)r.tensor->dl_tensor.shape[i]);
  printf("] sum %.6f, sum of |y| %.6f\n", sum, abs_sum);
  r.tensor->deleter(r.tensor); /* the caller frees the result, once */

  /* An error: a status code, and this thread's message. */
  t = cpu_f32(x, 3, wrong_shape);
  status = block_block(model, &t, &r);
  printf("a width of %d: status %d (NAX_ERR_ARGUMENT is %d): %s\n", D - 1, status, NAX_ERR_ARGUMENT, block_last_error());

  /* Threads: a model may be called from any number of threads at once. */
  for (i = 0; i < 4; i++) pthread_create(&threads[i], NULL, worker, &sums[i]);
  for (i = 0; i < 4; i++) pthread_join(threads[i], NULL);
  for (i = 0; i < 4; i++) {
    if (sums[i] != sum) {
      fprintf(stderr, "thread %d's result differs: %.6f\n", i, sums[i]);
      return 1;
    }
  }
  printf("4 threads at once: the same result\n");

  /* Time. */
  t = cpu_f32(x, 3, x_shape);
  start = seconds();
  for (j = 0; j < calls; j++) {
    if (block_block(model, &t, &r) != NAX_OK) return 1;
    r.tensor->deleter(r.tensor);
  }
  printf("%d calls: %.3f ms each\n", calls, (seconds() - start) * 1e3 / (calls > 0 ? calls : 1));
  block_close(model);
  return 0;
}
