/* The C side of the AOT tests (tests/aot.rs): loads a nax library with
 * dlopen(RTLD_LOCAL), opens a model, makes one call described by a request
 * file, and writes the result (or the error) for the Rust side to compare
 * with the interpreter. Built with -std=c99 -Wall -Wextra -Werror -pedantic.
 *
 *   harness LIB.so NAME REQUEST OUT [--weights W | --embedded] [--guard]
 *           [--threads T --calls C] [--rounds R] [--open-threads N]
 *
 * REQUEST, one item per line:
 *   call FUNCTION
 *   arg NAME CODE BITS LANES DEVICE NDIM BYTE_OFFSET CAPACITY DATAFILE|-
 *   shape D0 D1 ...          (or "shape -" for a NULL shape pointer)
 *   strides S0 S1 ... | strides null
 *   axes A B _ ... | axes null       ("_": a NULL entry, an unnamed axis)
 * DATAFILE's bytes become the tensor's memory (data points at its first
 * byte, element 0 at data + BYTE_OFFSET); "-" gives a NULL data pointer.
 * With --guard, each tensor's memory ends exactly at a PROT_NONE page.
 * With --nulls, NULL model, function, result and model-out pointers are
 * passed first and their statuses written ("nulls A B C D").
 * With --threads, T threads make C calls each on one model and every
 * result must equal the first. With --rounds, R rounds of open, call and
 * close run, and the growth of the resident set is written.
 *
 * OUT.meta gets "status S", "error MESSAGE", "call_seconds T" (the last
 * call's), "peak_rss_kib N" (the process's largest resident set), and for
 * a result "dtype CODE BITS", "shape ...", "axes ..." (and "rss_growth_kib
 * N" with --rounds); OUT.bin the result's bytes, row-major. */
#define _DEFAULT_SOURCE
#include NAX_HEADER
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define MAX_ARGS 32
#define MAX_RANK 16

typedef int (*open_fn)(const char *, int32_t, void **);
typedef void (*close_fn)(void *);
typedef int (*call_fn)(void *, const char *, const nax_arg *, size_t, nax_result *);
typedef const char *(*error_fn)(void);

static open_fn lib_open;
static close_fn lib_close;
static call_fn lib_call;
static error_fn lib_error;

static char function[256];
static nax_arg args[MAX_ARGS];
static DLTensor tensors[MAX_ARGS];
static char names[MAX_ARGS][128];
static int64_t shapes[MAX_ARGS][MAX_RANK], strides[MAX_ARGS][MAX_RANK];
static char axis_text[MAX_ARGS][MAX_RANK][64];
static const char *axis_ptrs[MAX_ARGS][MAX_RANK];
static size_t nargs;

static void fail(const char *what) {
  fprintf(stderr, "harness: %s\n", what);
  exit(2);
}

static void *symbol(void *lib, const char *name, const char *entry) {
  char full[256];
  void *p;
  snprintf(full, sizeof full, "%s_%s", name, entry);
  p = dlsym(lib, full);
  if (!p) fail(full);
  return p;
}

/* The bytes of a file, in memory that ends at a PROT_NONE page when guard is set. */
static void *load(const char *path, int guard) {
  FILE *f = fopen(path, "rb");
  long len;
  unsigned char *buf;
  if (!f) fail(path);
  fseek(f, 0, SEEK_END);
  len = ftell(f);
  fseek(f, 0, SEEK_SET);
  if (guard) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t pages = ((size_t)len + page - 1) / page + 1;
    unsigned char *base = mmap(NULL, pages * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) fail("mmap");
    if (mprotect(base + (pages - 1) * page, page, PROT_NONE) != 0) fail("mprotect");
    buf = base + (pages - 1) * page - (size_t)len;
  } else {
    buf = malloc((size_t)len + 1);
    if (!buf) fail("malloc");
  }
  if (len > 0 && fread(buf, 1, (size_t)len, f) != (size_t)len) fail("fread");
  fclose(f);
  return buf;
}

static void read_request(const char *path, int guard) {
  FILE *f = fopen(path, "r");
  char line[4096];
  if (!f) fail(path);
  while (fgets(line, sizeof line, f)) {
    char *tok = strtok(line, " \n");
    size_t a = nargs - 1;
    int i;
    if (!tok) continue;
    if (!strcmp(tok, "call")) {
      snprintf(function, sizeof function, "%s", strtok(NULL, " \n"));
    } else if (!strcmp(tok, "arg")) {
      unsigned code, bits, lanes;
      int device, ndim;
      unsigned long long offset, capacity;
      char file[1024];
      DLTensor *t;
      if (nargs == MAX_ARGS) fail("too many arguments");
      a = nargs++;
      t = &tensors[a];
      if (sscanf(strtok(NULL, "\n"), "%127s %u %u %u %d %d %llu %llu %1023s", names[a], &code, &bits, &lanes, &device, &ndim, &offset, &capacity, file) != 9) fail("bad arg line");
      t->dtype.code = (uint8_t)code;
      t->dtype.bits = (uint8_t)bits;
      t->dtype.lanes = (uint16_t)lanes;
      t->device.device_type = (DLDeviceType)device;
      t->device.device_id = 0;
      t->ndim = ndim;
      t->byte_offset = offset;
      t->shape = shapes[a];
      t->strides = NULL;
      t->data = strcmp(file, "-") ? load(file, guard) : NULL;
      args[a].name = names[a];
      args[a].tensor = t;
      args[a].axes = NULL;
      args[a].capacity = capacity;
    } else if (!strcmp(tok, "shape")) {
      for (i = 0; (tok = strtok(NULL, " \n")) != NULL && i < MAX_RANK; i++) {
        if (!strcmp(tok, "-")) {
          tensors[a].shape = NULL;
          break;
        }
        shapes[a][i] = strtoll(tok, NULL, 10);
      }
    } else if (!strcmp(tok, "strides")) {
      for (i = 0; (tok = strtok(NULL, " \n")) != NULL && i < MAX_RANK; i++) {
        if (!strcmp(tok, "null")) break;
        strides[a][i] = strtoll(tok, NULL, 10);
        tensors[a].strides = strides[a];
      }
    } else if (!strcmp(tok, "axes")) {
      for (i = 0; (tok = strtok(NULL, " \n")) != NULL && i < MAX_RANK; i++) {
        if (!strcmp(tok, "null")) break;
        snprintf(axis_text[a][i], sizeof axis_text[a][i], "%s", tok);
        axis_ptrs[a][i] = strcmp(tok, "_") ? axis_text[a][i] : NULL;
        args[a].axes = axis_ptrs[a];
      }
    }
  }
  fclose(f);
}

static size_t result_bytes(const DLTensor *t) {
  size_t n = (t->dtype.bits * (size_t)t->dtype.lanes + 7) / 8;
  int i;
  for (i = 0; i < t->ndim; i++) n *= (size_t)t->shape[i];
  return n;
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The process's own peak resident set (VmHWM: getrusage's ru_maxrss
 * counts the parent's at fork), in KiB; -1 where it cannot be read. */
static long peak_resident_kib(void) {
  char line[256];
  long kib = -1;
  FILE *f = fopen("/proc/self/status", "r");
  if (!f) return -1;
  while (fgets(line, sizeof line, f))
    if (!strncmp(line, "VmHWM:", 6)) kib = atol(line + 6);
  fclose(f);
  return kib;
}

static void write_result(const char *out, int status, const nax_result *r, long rss_growth, double seconds) {
  char path[1024];
  FILE *meta;
  int i;
  snprintf(path, sizeof path, "%s.meta", out);
  meta = fopen(path, "w");
  if (!meta) fail(path);
  fprintf(meta, "status %d\nerror %s\n", status, lib_error());
  fprintf(meta, "peak_rss_kib %ld\n", peak_resident_kib());
  fprintf(meta, "call_seconds %f\n", seconds);
  if (rss_growth >= 0) fprintf(meta, "rss_growth_kib %ld\n", rss_growth);
  if (status == NAX_OK && r) {
    const DLTensor *t = &r->tensor->dl_tensor;
    FILE *bin;
    fprintf(meta, "dtype %u %u\nshape", t->dtype.code, t->dtype.bits);
    for (i = 0; i < t->ndim; i++) fprintf(meta, " %lld", (long long)t->shape[i]);
    fprintf(meta, "\naxes");
    for (i = 0; i < t->ndim; i++) fprintf(meta, " %s", r->axes[i] ? r->axes[i] : "_");
    fprintf(meta, "\n");
    snprintf(path, sizeof path, "%s.bin", out);
    bin = fopen(path, "wb");
    if (!bin) fail(path);
    if (result_bytes(t) > 0) fwrite((const char *)t->data + t->byte_offset, 1, result_bytes(t), bin);
    fclose(bin);
  }
  fclose(meta);
}

static void *model;
static int calls;
static nax_result first;
static volatile int mismatches;

static void *worker(void *unused) {
  int i;
  (void)unused;
  for (i = 0; i < calls; i++) {
    nax_result r;
    if (lib_call(model, function, args, nargs, &r) != NAX_OK) {
      mismatches++;
      continue;
    }
    if (memcmp(r.tensor->dl_tensor.data, first.tensor->dl_tensor.data, result_bytes(&first.tensor->dl_tensor)) != 0) mismatches++;
    r.tensor->deleter(r.tensor);
  }
  return NULL;
}

static long resident_kib(void) {
  long pages = 0, resident = 0;
  FILE *f = fopen("/proc/self/statm", "r");
  if (!f || fscanf(f, "%ld %ld", &pages, &resident) != 2) fail("/proc/self/statm");
  fclose(f);
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

int main(int argc, char **argv) {
  const char *weights = NULL;
  int guard = 0, threads = 0, rounds = 0, open_threads = 0, nulls = 0, status, i;
  long growth = -1;
  double started, seconds;
  void *lib;
  nax_result r;
  if (argc < 5) fail("usage: harness LIB.so NAME REQUEST OUT [options]");
  for (i = 5; i < argc; i++) {
    if (!strcmp(argv[i], "--weights") && i + 1 < argc) weights = argv[++i];
    else if (!strcmp(argv[i], "--guard")) guard = 1;
    else if (!strcmp(argv[i], "--nulls")) nulls = 1;
    else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--calls") && i + 1 < argc) calls = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--open-threads") && i + 1 < argc) open_threads = atoi(argv[++i]);
    else if (strcmp(argv[i], "--embedded")) fail(argv[i]);
  }
  lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) fail(dlerror());
  memcpy(&lib_open, (void *[]){symbol(lib, argv[2], "open")}, sizeof lib_open);
  memcpy(&lib_close, (void *[]){symbol(lib, argv[2], "close")}, sizeof lib_close);
  memcpy(&lib_call, (void *[]){symbol(lib, argv[2], "call")}, sizeof lib_call);
  memcpy(&lib_error, (void *[]){symbol(lib, argv[2], "last_error")}, sizeof lib_error);
  read_request(argv[3], guard);
  if (rounds > 0) {
    long before = 0;
    for (i = 0; i < rounds; i++) {
      if (lib_open(weights, open_threads, &model) != NAX_OK) break;
      if (lib_call(model, function, args, nargs, &r) == NAX_OK) r.tensor->deleter(r.tensor);
      lib_close(model);
      /* The first rounds fill the allocator's caches; growth is measured after them. */
      if (i == 4) before = resident_kib();
    }
    growth = resident_kib() - before;
  }
  status = lib_open(weights, open_threads, &model);
  if (status != NAX_OK) {
    write_result(argv[4], status, NULL, growth, 0.0);
    return 0;
  }
  if (nulls) {
    int a = lib_call(NULL, function, args, nargs, &r);
    int b = lib_call(model, NULL, args, nargs, &r);
    int c = lib_call(model, function, args, nargs, NULL);
    int d = lib_open(weights, open_threads, NULL);
    int e = lib_call(model, function, NULL, nargs, &r);
    /* Counts past the arguments given: refused before any is read. */
    int f = lib_call(model, function, args, (size_t)1 << 30, &r);
    int g = lib_call(model, function, args, SIZE_MAX, &r);
    lib_close(NULL);
    printf("nulls %d %d %d %d %d %d %d\n", a, b, c, d, e, f, g);
  }
  started = now();
  status = lib_call(model, function, args, nargs, &r);
  seconds = now() - started;
  if (status == NAX_OK && threads > 0) {
    pthread_t ids[64];
    first = r;
    for (i = 0; i < threads && i < 64; i++) pthread_create(&ids[i], NULL, worker, NULL);
    for (i = 0; i < threads && i < 64; i++) pthread_join(ids[i], NULL);
    if (mismatches) {
      fprintf(stderr, "harness: %d of %d calls from %d threads disagree with the first\n", mismatches, threads * calls, threads);
      return 3;
    }
  }
  write_result(argv[4], status, &r, growth, seconds);
  if (status == NAX_OK) r.tensor->deleter(r.tensor);
  lib_close(model);
  return 0;
}
