/* One function of a nax shared library (`nax build --emit so`, the C ABI of
 * ABI.md) called from C, for benches/compare.py: the same protocol as the
 * Rust worker (benches/worker.rs), so that the library's calls are measured
 * in the same interleaved rounds as the JIT's.
 *
 *     cc -std=c99 -O2 -Wall -Wextra -Werror -pedantic \
 *        -DNAX_HEADER='"DIR/NAME.h"' benches/aot_worker.c -o aot_worker -ldl
 *     aot_worker DIR/libNAME.so NAME FUNCTION WEIGHTS.safetensors THREADS PARAM...
 *
 * NAX_HEADER is any library's generated header: the worker takes only the
 * types all nax libraries share from it (the DLPack structs, nax_arg,
 * nax_result, the status codes), and the library's entries from dlsym
 * (`NAME_open`, `NAME_call`, `NAME_close`, `NAME_last_error`), so one
 * binary runs any library. It dlopens the library (RTLD_NOW | RTLD_LOCAL),
 * opens the model on the weights with THREADS workers (as the Rust worker
 * makes its pool) and passes one tensor per PARAM, `NAME:DTYPE:D0,D1,...`
 * (f32 or f64, row-major, 64-byte aligned, axes unnamed so bound by
 * position, e.g. `x:f32:4,256,512`), filled with seeded values in [-1, 1)
 * (the xorshift of benches/support/workloads.rs, from the same seed: the
 * Rust worker's input values). After one warm-up call it prints
 *
 *     {"ready": true, "threads": THREADS}
 *
 * and then serves lines of stdin: `measure SECONDS` calls FUNCTION
 * through `NAME_call` repeatedly for about that long (at least 3 calls;
 * each call's result is allocated by the library and freed by its
 * deleter, as a user's call does) and prints
 * `{"median_ms": .., "min_ms": .., "calls": N}`; `quit` or the end of
 * stdin exits. */
#define _POSIX_C_SOURCE 200809L
#ifndef NAX_HEADER
#error "compile with -DNAX_HEADER='\"DIR/NAME.h\"', a nax library's generated header"
#endif
#include NAX_HEADER
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The library's entries, with the model as an opaque pointer. */
typedef int (*open_fn)(const char *weights_path, int32_t threads, void **model);
typedef int (*call_fn)(void *model, const char *function, const nax_arg *args, size_t nargs, nax_result *result);
typedef void (*close_fn)(void *model);
typedef const char *(*last_error_fn)(void);

static void fail(const char *format, ...) {
  va_list ap;
  fputs("aot_worker: ", stderr);
  va_start(ap, format);
  vfprintf(stderr, format, ap);
  va_end(ap);
  fputc('\n', stderr);
  exit(2);
}

/* `NAME_entry` from the library, or exits saying which is missing. */
static void *entry(void *library, const char *name, const char *entry_name) {
  char symbol[256];
  void *p;
  if (snprintf(symbol, sizeof symbol, "%s_%s", name, entry_name) >= (int)sizeof symbol) fail("library name too long: %s", name);
  p = dlsym(library, symbol);
  if (p == NULL) fail("the library has no %s: %s", symbol, dlerror());
  return p;
}

/* The next value in [-1, 1) of benches/support/workloads.rs's xorshift. */
static double seeded(uint64_t *state) {
  *state ^= *state << 13;
  *state ^= *state >> 7;
  *state ^= *state << 17;
  return (double)(*state >> 40) / (double)(1UL << 23) - 1.0;
}

/* Room for `bytes`, 64-byte aligned (a cache line, a 512-bit vector). */
static void *aligned(size_t bytes) {
  void *p;
  if (posix_memalign(&p, 64, bytes + 1) != 0) fail("out of memory");
  return p;
}

/* One tensor argument from `NAME:DTYPE:D0,D1,...`, allocated and filled. */
static nax_arg parameter(const char *spec, uint64_t *state) {
  nax_arg a;
  DLTensor *t = calloc(1, sizeof *t);
  char *copy = malloc(strlen(spec) + 1), *name, *dtype, *dims, *dim, *end;
  int64_t n = 1, i;
  if (t == NULL || copy == NULL) fail("out of memory");
  strcpy(copy, spec);
  name = strtok(copy, ":");
  dtype = strtok(NULL, ":");
  dims = strtok(NULL, "");
  if (name == NULL || dtype == NULL) fail("bad PARAM `%s`: give NAME:DTYPE:D0,D1,... (DTYPE f32 or f64)", spec);
  t->shape = calloc(32, sizeof *t->shape);
  if (t->shape == NULL) fail("out of memory");
  for (dim = dims ? strtok(dims, ",") : NULL; dim != NULL; dim = strtok(NULL, ",")) {
    long long d = strtoll(dim, &end, 10);
    if (*end != '\0' || d < 0 || t->ndim == 32) fail("bad PARAM `%s`: sizes are up to 32 integers, comma-separated", spec);
    t->shape[t->ndim++] = d;
    n *= d;
  }
  t->device.device_type = kDLCPU;
  t->dtype.lanes = 1;
  t->dtype.code = kDLFloat;
  if (strcmp(dtype, "f32") == 0) {
    float *data = aligned((size_t)n * sizeof *data);
    for (i = 0; i < n; i++) data[i] = (float)seeded(state);
    t->data = data;
    t->dtype.bits = 32;
  } else if (strcmp(dtype, "f64") == 0) {
    double *data = aligned((size_t)n * sizeof *data);
    for (i = 0; i < n; i++) data[i] = seeded(state);
    t->data = data;
    t->dtype.bits = 64;
  } else {
    fail("bad PARAM `%s`: the dtype is f32 or f64, not %s", spec, dtype);
  }
  a.name = name;
  a.tensor = t;
  a.axes = NULL;
  a.capacity = (uint64_t)n * (t->dtype.bits / 8);
  return a;
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

static int ascending(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* One call, its result freed. */
static void call(call_fn f, last_error_fn last_error, void *model, const char *function, const nax_arg *args, size_t nargs) {
  nax_result r;
  int status = f(model, function, args, nargs, &r);
  if (status != NAX_OK) fail("%s: status %d: %s", function, status, last_error());
  r.tensor->deleter(r.tensor);
}

/* One JSON line on stdout, flushed: the reader waits for it. */
static void reply(const char *format, ...) {
  va_list ap;
  va_start(ap, format);
  vprintf(format, ap);
  va_end(ap);
  putchar('\n');
  if (fflush(stdout) != 0) fail("stdout: cannot write");
}

int main(int argc, char **argv) {
  const char *usage = "usage: aot_worker LIB.so NAME FUNCTION WEIGHTS.safetensors THREADS PARAM...";
  void *library, *model = NULL;
  open_fn open_model;
  call_fn call_model;
  close_fn close_model;
  last_error_fn last_error;
  nax_arg *args;
  size_t nargs, i, n, capacity = 1024;
  double *times = malloc(capacity * sizeof *times), seconds, start, t, median;
  uint64_t state = 0x2545f4914f6cdd1dULL;
  char line[256], word[16], *end;
  long threads;
  if (argc < 6) fail("%s", usage);
  threads = strtol(argv[5], &end, 10);
  if (*end != '\0' || threads < 0 || threads > INT32_MAX) fail("bad THREADS `%s`\n%s", argv[5], usage);
  if (times == NULL) fail("out of memory");
  library = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (library == NULL) fail("dlopen: %s", dlerror());
  /* Object pointers to function pointers through memcpy (ISO C has no cast). */
  {
    void *p;
    p = entry(library, argv[2], "open");
    memcpy(&open_model, &p, sizeof p);
    p = entry(library, argv[2], "call");
    memcpy(&call_model, &p, sizeof p);
    p = entry(library, argv[2], "close");
    memcpy(&close_model, &p, sizeof p);
    p = entry(library, argv[2], "last_error");
    memcpy(&last_error, &p, sizeof p);
  }
  nargs = (size_t)argc - 6;
  args = malloc((nargs + 1) * sizeof *args);
  if (args == NULL) fail("out of memory");
  for (i = 0; i < nargs; i++) args[i] = parameter(argv[6 + i], &state);
  if (open_model(argv[4], (int32_t)threads, &model) != NAX_OK) fail("%s_open: %s", argv[2], last_error());
  call(call_model, last_error, model, argv[3], args, nargs);
  reply("{\"ready\": true, \"threads\": %ld}", threads);
  while (fgets(line, sizeof line, stdin) != NULL) {
    line[strcspn(line, "\n")] = '\0';
    if (sscanf(line, "%15s", word) != 1) fail("bad line: %s", line);
    if (strcmp(word, "quit") == 0) break;
    if (strcmp(word, "measure") != 0 || sscanf(line, "measure %lf %15s", &seconds, word) != 1 || !(seconds >= 0 && seconds < 1e9))
      fail("bad line: %s", line);
    n = 0;
    start = now_ms();
    while (n < 3 || now_ms() - start < seconds * 1e3) {
      if (n == capacity) {
        capacity *= 2;
        times = realloc(times, capacity * sizeof *times);
        if (times == NULL) fail("out of memory");
      }
      t = now_ms();
      call(call_model, last_error, model, argv[3], args, nargs);
      times[n++] = now_ms() - t;
    }
    qsort(times, n, sizeof *times, ascending);
    median = n % 2 == 1 ? times[n / 2] : (times[n / 2 - 1] + times[n / 2]) / 2;
    reply("{\"median_ms\": %.6f, \"min_ms\": %.6f, \"calls\": %lu}", median, times[0], (unsigned long)n);
  }
  close_model(model);
  return 0;
}
