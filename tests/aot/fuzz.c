/* Random calls through a nax library's C ABI (ABI.md), built with
 * AddressSanitizer by tests/aot.rs: every descriptor field drawn at random
 * (argument names, counts, dtypes, lanes, devices, ranks, sizes, strides,
 * byte offsets, axis names, NULL pointers), each tensor's bytes in a
 * malloc'd buffer of exactly its `capacity`, so that any read outside what
 * the caller described is an AddressSanitizer report (and an abort).
 * Every call must end in a status of ABI.md; a result is freed by its
 * deleter. Built with -std=c99 -Wall -Wextra -Werror -pedantic.
 *
 *   fuzz LIB.so NAME WEIGHTS CALLS SEED FUNCTION...
 *
 * Prints "statuses S0 S1 ... S7": how many calls ended in each status
 * (an internal error's message goes to stderr). */
#include NAX_HEADER
#include <dlfcn.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ARGS 6
#define MAX_RANK 5

typedef int (*open_fn)(const char *, int32_t, void **);
typedef void (*close_fn)(void *);
typedef int (*call_fn)(void *, const char *, const nax_arg *, size_t, nax_result *);
typedef const char *(*error_fn)(void);

static uint64_t state;

static uint64_t next(void) {
  state ^= state << 13;
  state ^= state >> 7;
  state ^= state << 17;
  return state;
}

/* A number below n (0 when n is 0). */
static uint64_t below(uint64_t n) { return n ? next() % n : 0; }

static void *symbol(void *lib, const char *name, const char *entry) {
  char full[256];
  void *p;
  snprintf(full, sizeof full, "%s_%s", name, entry);
  p = dlsym(lib, full);
  if (!p) {
    fprintf(stderr, "fuzz: no %s\n", full);
    exit(2);
  }
  return p;
}

int main(int argc, char **argv) {
  static const char *params[] = {"x", "alpha", "k", "flip", "keep", "w", "", "nope"};
  static const char *axis_names[] = {"n", "D", "a", "", "n D"};
  static const unsigned dtypes[][2] = {{2, 32}, {2, 64}, {2, 16}, {4, 16}, {0, 64}, {0, 32}, {6, 8}, {1, 8}, {2, 8}, {5, 64}, {0, 7}};
  nax_arg args[MAX_ARGS];
  DLTensor tensors[MAX_ARGS];
  int64_t shapes[MAX_ARGS][MAX_RANK], strides[MAX_ARGS][MAX_RANK];
  const char *axes[MAX_ARGS][MAX_RANK];
  unsigned char *buffers[MAX_ARGS];
  long statuses[8] = {0};
  void *lib, *model = NULL;
  long calls, c;
  int functions, status;
  open_fn lib_open;
  close_fn lib_close;
  call_fn lib_call;
  error_fn lib_error;
  if (argc < 7) {
    fprintf(stderr, "usage: fuzz LIB.so NAME WEIGHTS CALLS SEED FUNCTION...\n");
    return 2;
  }
  lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    fprintf(stderr, "fuzz: %s\n", dlerror());
    return 2;
  }
  /* ISO C has no conversion from dlsym's object pointer to a function's. */
  memcpy(&lib_open, (void *[]){symbol(lib, argv[2], "open")}, sizeof lib_open);
  memcpy(&lib_close, (void *[]){symbol(lib, argv[2], "close")}, sizeof lib_close);
  memcpy(&lib_call, (void *[]){symbol(lib, argv[2], "call")}, sizeof lib_call);
  memcpy(&lib_error, (void *[]){symbol(lib, argv[2], "last_error")}, sizeof lib_error);
  calls = strtol(argv[4], NULL, 10);
  state = strtoull(argv[5], NULL, 10) * 2654435761u + 1;
  functions = argc - 6;
  status = lib_open(argv[3], 1, &model);
  if (status != NAX_OK) {
    fprintf(stderr, "fuzz: the model does not open (status %d)\n", status);
    return 2;
  }
  for (c = 0; c < calls; c++) {
    size_t n = (size_t)below(MAX_ARGS + 1), a;
    int i, valid = (int)below(2);
    nax_result r;
    const char *function = below(20) ? argv[6 + below((uint64_t)functions)] : "nope";
    if (valid) {
      /* A well-formed call of `scaled`, `masked` or `positive` (the KINDS
         library of tests/aot.rs), then a few fields mutated: the draw
         reaches the kernels, and the checks near a good call. */
      static const char *valid_names[] = {"x", "alpha", "k", "flip"};
      int64_t rows = (int64_t)below(4);
      function = argv[6 + below((uint64_t)functions)];
      n = !strcmp(function, "scaled") ? 4 : !strcmp(function, "masked") ? 2 : 1;
      for (a = 0; a < n; a++) {
        DLTensor *t = &tensors[a];
        int scalar = !strcmp(function, "scaled") && a > 0;
        int mask = (!strcmp(function, "masked") && a == 1) || (scalar && a == 3);
        size_t elements = scalar ? 1 : (size_t)rows * 3, size = mask ? 1 : (scalar && a < 3) ? 8 : 4;
        size_t bytes = elements * size + 1;
        buffers[a] = malloc(bytes);
        if (!buffers[a]) return 2;
        for (i = 0; (size_t)i < bytes; i++) buffers[a][i] = (unsigned char)(mask ? below(2) : below(256) & 0x3f);
        args[a].name = !strcmp(function, "masked") && a == 1 ? "keep" : valid_names[a];
        t->ndim = scalar ? 0 : 2;
        t->dtype.code = (uint8_t)(mask ? 6 : (scalar && a == 2) ? 0 : 2);
        t->dtype.bits = (uint8_t)(size * 8);
        t->dtype.lanes = 1;
        t->device.device_type = (DLDeviceType)1;
        t->device.device_id = 0;
        shapes[a][0] = rows;
        shapes[a][1] = 3;
        t->shape = shapes[a];
        t->strides = NULL;
        t->data = buffers[a];
        t->byte_offset = 0;
        args[a].tensor = t;
        args[a].axes = NULL;
        args[a].capacity = bytes;
      }
      for (i = (int)below(3); i > 0 && n > 0; i--) {
        DLTensor *t = &tensors[below(n)];
        switch (below(6)) {
          case 0: t->dtype.bits = (uint8_t)dtypes[below(sizeof dtypes / sizeof *dtypes)][1]; break;
          case 1: shapes[t - tensors][below(2)] = below(3) ? (int64_t)below(8) : (int64_t)next(); break;
          case 2:
            t->strides = strides[t - tensors];
            strides[t - tensors][0] = (int64_t)below(9) - 4;
            strides[t - tensors][1] = (int64_t)below(9) - 4;
            break;
          case 3: t->byte_offset = below(3) ? below(8) : next(); break;
          case 4: t->ndim = (int)below(4); break;
          default: args[t - tensors].axes = axes[t - tensors]; break;
        }
      }
      for (a = 0; a < n; a++)
        for (i = 0; i < MAX_RANK; i++) axes[a][i] = below(3) ? axis_names[below(sizeof axis_names / sizeof *axis_names)] : NULL;
    }
    for (a = 0; !valid && a < n; a++) {
      DLTensor *t = &tensors[a];
      size_t bytes = 1 + (size_t)below(below(4) ? 64 : 4096);
      buffers[a] = malloc(bytes);
      if (!buffers[a]) return 2;
      for (i = 0; (size_t)i < bytes; i++) buffers[a][i] = (unsigned char)(below(3) ? below(2) : next());
      args[a].name = below(30) ? params[below(sizeof params / sizeof *params)] : NULL;
      t->ndim = below(12) ? (int)below(MAX_RANK + 1) : (int)below(64) - 32;
      t->dtype.code = (uint8_t)dtypes[below(sizeof dtypes / sizeof *dtypes)][0];
      t->dtype.bits = (uint8_t)dtypes[below(sizeof dtypes / sizeof *dtypes)][1];
      if (below(2)) {
        int d = (int)below(sizeof dtypes / sizeof *dtypes);
        t->dtype.code = (uint8_t)dtypes[d][0];
        t->dtype.bits = (uint8_t)dtypes[d][1];
      }
      t->dtype.lanes = (uint16_t)(below(12) ? 1 : below(4));
      t->device.device_type = (DLDeviceType)(below(12) ? 1 : (int)below(20));
      t->device.device_id = 0;
      for (i = 0; i < MAX_RANK; i++) {
        shapes[a][i] = below(5) ? (int64_t)below(7) : (int64_t)next();
        strides[a][i] = below(5) ? (int64_t)below(9) - 4 : (int64_t)next();
        axes[a][i] = below(4) ? axis_names[below(sizeof axis_names / sizeof *axis_names)] : NULL;
      }
      t->shape = below(40) ? shapes[a] : NULL;
      t->strides = below(3) ? NULL : strides[a];
      t->data = below(40) ? buffers[a] : NULL;
      t->byte_offset = below(6) ? below(bytes + 16) : next();
      args[a].tensor = below(40) ? t : NULL;
      args[a].axes = below(3) ? NULL : axes[a];
      /* The buffer's true size: a capacity of 0 would tell the library to
         trust the descriptor, and a random one addresses anything. */
      args[a].capacity = bytes;
    }
    status = lib_call(model, function, below(40) ? args : NULL, n, &r);
    if (status == NAX_OK) r.tensor->deleter(r.tensor);
    statuses[status >= 0 && status < 8 ? status : 7]++;
    if (status < 0 || status > 5) {
      fprintf(stderr, "fuzz: call %ld ended in status %d, not one of ABI.md's\n", c, status);
      return 1;
    }
    if (status == NAX_ERR_INTERNAL) fprintf(stderr, "fuzz: call %ld of `%s`: internal error: %s\n", c, function, lib_error());
    for (a = 0; a < n; a++) free(buffers[a]);
  }
  lib_close(model);
  printf("statuses %ld %ld %ld %ld %ld %ld %ld %ld\n", statuses[0], statuses[1], statuses[2], statuses[3], statuses[4], statuses[5], statuses[6], statuses[7]);
  return 0;
}
