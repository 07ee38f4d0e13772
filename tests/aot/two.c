/* Two nax libraries whose programs both define `forward`, loaded into one
 * process with dlopen(RTLD_LOCAL): each must give its own result.
 *
 *   two LIB_A.so NAME_A LIB_B.so NAME_B
 *
 * Calls forward(x) on both with x = [1, 2, 3, 4] and prints each result. */
#define _DEFAULT_SOURCE
#include NAX_HEADER
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

typedef int (*open_fn)(const char *, int32_t, void **);
typedef int (*call_fn)(void *, const char *, const nax_arg *, size_t, nax_result *);
typedef void (*close_fn)(void *);

static int run(const char *path, const char *name) {
  char full[256];
  void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL), *model = NULL, *sym;
  open_fn open_;
  call_fn call_;
  close_fn close_;
  float x[4] = {1, 2, 3, 4};
  int64_t shape[1] = {4};
  DLTensor t;
  nax_arg arg;
  nax_result r;
  int i;
  if (!lib) return fprintf(stderr, "%s\n", dlerror()), 1;
  snprintf(full, sizeof full, "%s_open", name);
  sym = dlsym(lib, full);
  memcpy(&open_, &sym, sizeof open_);
  snprintf(full, sizeof full, "%s_call", name);
  sym = dlsym(lib, full);
  memcpy(&call_, &sym, sizeof call_);
  snprintf(full, sizeof full, "%s_close", name);
  sym = dlsym(lib, full);
  memcpy(&close_, &sym, sizeof close_);
  if (!open_ || !call_ || !close_) return fprintf(stderr, "missing entries in %s\n", path), 1;
  memset(&t, 0, sizeof t);
  t.data = x;
  t.device.device_type = kDLCPU;
  t.ndim = 1;
  t.dtype.code = kDLFloat;
  t.dtype.bits = 32;
  t.dtype.lanes = 1;
  t.shape = shape;
  arg.name = "x";
  arg.tensor = &t;
  arg.axes = NULL;
  arg.capacity = sizeof x;
  if (open_(NULL, 1, &model) != NAX_OK || call_(model, "forward", &arg, 1, &r) != NAX_OK) return fprintf(stderr, "call failed in %s\n", path), 1;
  printf("%s:", name);
  for (i = 0; i < 4; i++) printf(" %g", ((float *)r.tensor->dl_tensor.data)[i]);
  printf("\n");
  r.tensor->deleter(r.tensor);
  close_(model);
  return 0;
}

int main(int argc, char **argv) {
  if (argc != 5) return 2;
  return run(argv[1], argv[2]) || run(argv[3], argv[4]) || run(argv[1], argv[2]);
}
