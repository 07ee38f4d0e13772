/* A library function of several results (LANGUAGE.md section 14) called
 * from C: through its typed entry and NAME_call_n, each result printed;
 * NAME_call on it and NAME_call_n with the wrong count are refused with
 * NAX_ERR_ARGUMENT, writing nothing. Built by tests/aot.rs against
 * results.h. */
#include "results.h"
#include <stdio.h>
#include <string.h>

static void print(const char *what, nax_result r) {
  const DLTensor *t = &r.tensor->dl_tensor;
  const float *v = (const float *)t->data;
  int64_t n = 1;
  int32_t d;
  printf("%s [", what);
  for (d = 0; d < t->ndim; d++) printf("%s%s", d ? " " : "", r.axes[d] ? r.axes[d] : "_");
  printf("]");
  for (d = 0; d < t->ndim; d++) n *= t->shape[d];
  for (d = 0; d < n; d++) printf(" %g", v[d]);
  printf("\n");
  r.tensor->deleter(r.tensor);
}

int main(void) {
  results_model *model = NULL;
  float data[4] = {1, 2, 3, 4};
  int64_t shape[1] = {4};
  const char *axes[1] = {"n"};
  DLTensor x = {data, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, shape, NULL, 0};
  nax_arg arg = {"x", &x, axes, 0};
  nax_result out[3], one, untouched;
  int status, i;
  memset(&untouched, 0, sizeof untouched);
  if (results_open(NULL, 1, &model) != NAX_OK) return 10;
  status = results_f(model, &x, out);
  if (status != NAX_OK) { printf("typed: %d %s\n", status, results_last_error()); return 11; }
  print("typed double", out[0]);
  print("typed plus", out[1]);
  print("typed total", out[2]);
  status = results_call_n(model, "f", &arg, 1, out, 3);
  if (status != NAX_OK) { printf("call_n: %d %s\n", status, results_last_error()); return 12; }
  for (i = 0; i < 3; i++) print("call_n", out[i]);
  one = untouched;
  status = results_call(model, "f", &arg, 1, &one);
  printf("call: %d %s\n", status, results_last_error());
  if (status != NAX_ERR_ARGUMENT || one.tensor != NULL) return 13;
  out[0] = untouched;
  status = results_call_n(model, "f", &arg, 1, out, 2);
  printf("call_n 2: %d %s\n", status, results_last_error());
  if (status != NAX_ERR_ARGUMENT || out[0].tensor != NULL) return 14;
  status = results_call_n(model, "g", &arg, 1, out, 1);
  if (status != NAX_OK) { printf("call_n g: %d %s\n", status, results_last_error()); return 15; }
  print("call_n g", out[0]);
  printf("manifest %s\n", results_manifest());
  results_close(model);
  return 0;
}
