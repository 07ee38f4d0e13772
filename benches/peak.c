/* The machine's peak f32 arithmetic rate for benches/compare.py: fused
 * multiply-adds on the widest vectors the compiler targets with
 * -march=native (64 bytes with AVX-512, 32 with AVX2, else 16), on
 * independent accumulators (more than the FMA units' latency times their
 * count, so every unit issues every cycle, and with the two operands no
 * more than the vector registers: 12 of AVX2's 16, 16 of AVX-512's 32; a
 * spilled accumulator waits on its store and load, and 16 chains on AVX2
 * measured a third below the peak), in every OpenMP thread, with no
 * memory traffic.
 *
 *     cc -O3 -march=native -fopenmp benches/peak.c -o target/peak
 *     OMP_NUM_THREADS=2 target/peak SECONDS
 *
 * Each pass runs a fixed number of steps in every thread; a pass counts
 * 2 FLOPs per lane per multiply-add. The passes repeat for about SECONDS
 * (at least 3, after one warm-up pass). Prints one JSON line:
 *
 *     {"best_gflops": .., "median_gflops": .., "passes": N, "threads": T, "vector_bytes": B}
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#if defined(__AVX512F__)
#define VECTOR_BYTES 64
#define CHAINS 16
#elif defined(__AVX2__)
#define VECTOR_BYTES 32
#define CHAINS 12
#else
#define VECTOR_BYTES 16
#define CHAINS 12
#endif
#define LANES (VECTOR_BYTES / 4)
#define STEPS 4000000L

typedef float vec __attribute__((vector_size(VECTOR_BYTES)));

static int by_value(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* STEPS rounds of CHAINS multiply-adds; the sum keeps them all live. */
static float chains(float seed) {
    vec acc[CHAINS], x, y;
    for (int i = 0; i < LANES; i++) {
        x[i] = 1.0f - seed * 1e-9f;
        y[i] = seed * 1e-9f;
    }
    for (int c = 0; c < CHAINS; c++) acc[c] = y * (float)(c + 1);
    for (long s = 0; s < STEPS; s++) {
#pragma GCC unroll 16
        for (int c = 0; c < CHAINS; c++) acc[c] = acc[c] * x + y;
    }
    float total = 0;
    for (int c = 0; c < CHAINS; c++)
        for (int i = 0; i < LANES; i++) total += acc[c][i];
    return total;
}

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 0.5;
    if (argc > 2 || !(seconds >= 0)) {
        fprintf(stderr, "usage: peak [SECONDS]\n");
        return 2;
    }
    int threads = omp_get_max_threads();
    double flops = 2.0 * LANES * CHAINS * (double)STEPS * threads, sink = 0;
    size_t cap = 1 << 16, passes = 0;
    double *rates = malloc(cap * sizeof(double)), start = 0;
    for (int warm = 1;; warm = 0) {
        double t = omp_get_wtime();
#pragma omp parallel reduction(+ : sink)
        sink += chains((float)(omp_get_thread_num() + passes + 1));
        t = omp_get_wtime() - t;
        if (warm) {
            start = omp_get_wtime();
            continue;
        }
        if (passes < cap) rates[passes++] = flops / t / 1e9;
        if (passes >= 3 && omp_get_wtime() - start >= seconds) break;
    }
    qsort(rates, passes, sizeof(double), by_value);
    double median = passes % 2 ? rates[passes / 2] : (rates[passes / 2 - 1] + rates[passes / 2]) / 2;
    printf("{\"best_gflops\": %.3f, \"median_gflops\": %.3f, \"passes\": %zu, \"threads\": %d, \"vector_bytes\": %d, \"sink\": %g}\n", rates[passes - 1], median,
           passes, threads, VECTOR_BYTES, sink);
    free(rates);
    return 0;
}
