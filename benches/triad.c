/* The machine's memory bandwidth for benches/compare.py: a STREAM triad
 * (a[i] = b[i] + 3 * c[i]) in C with OpenMP, on three f32 arrays of 2^25
 * elements each (128 MiB), or more where that is under four times the
 * last-level cache cpu0 sees (sysfs's highest cache level; sysconf's
 * figure can be a whole socket's, which two cores do not share).
 *
 *     cc -O3 -march=native -fopenmp benches/triad.c -o target/triad
 *     OMP_NUM_THREADS=2 target/triad SECONDS
 *
 * The arrays are 2 MiB-aligned and advised onto huge pages (as nax's
 * outputs are), and first touched by the threads that later stream them
 * (the same static schedule), then the triad runs repeatedly for about
 * SECONDS (at least 3 passes, after one warm-up pass). Each pass counts
 * 3 arrays x 4 bytes per element (b and c read, a written; no
 * write-allocate traffic counted, as STREAM counts). Prints one JSON line,
 * with how much of the process's memory huge pages back (the kernel may
 * not find free ones):
 *
 *     {"best_gbs": .., "median_gbs": .., "passes": N, "threads": T, "elements": n, "huge_mib": ..}
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define HUGE_PAGE (2UL << 20)

static float *array(size_t n) {
    size_t bytes = (n * sizeof(float) + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE;
    float *p = aligned_alloc(HUGE_PAGE, bytes);
    if (!p) {
        fprintf(stderr, "triad: out of memory\n");
        exit(1);
    }
#ifdef MADV_HUGEPAGE
    madvise(p, bytes, MADV_HUGEPAGE);
#endif
    return p;
}

/* The size in bytes of the highest-level cache of cpu0 in sysfs; 0 if unknown. */
static size_t last_level_cache(void) {
    size_t size = 0;
    int best = 0;
    for (int index = 0; index < 16; index++) {
        char path[96], unit = 0;
        int level = 0;
        unsigned long value = 0;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", index);
        FILE *f = fopen(path, "r");
        if (!f) break;
        int ok = fscanf(f, "%d", &level) == 1;
        fclose(f);
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", index);
        if (!ok || !(f = fopen(path, "r"))) continue;
        ok = fscanf(f, "%lu%c", &value, &unit) >= 1;
        fclose(f);
        if (ok && level > best) {
            best = level;
            size = value * (unit == 'K' ? 1024UL : unit == 'M' ? 1024UL * 1024 : 1UL);
        }
    }
    return size;
}

/* AnonHugePages of /proc/self/smaps_rollup, in MiB; -1 if unknown. */
static long huge_mib(void) {
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    char line[256];
    long kib = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "AnonHugePages: %ld kB", &kib) == 1) break;
    if (f) fclose(f);
    return kib < 0 ? -1 : kib / 1024;
}

static int by_value(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 0.5;
    if (argc > 2 || !(seconds >= 0)) {
        fprintf(stderr, "usage: triad [SECONDS]\n");
        return 2;
    }
    size_t n = (size_t)1 << 25;
    size_t llc = last_level_cache();
    while (n * sizeof(float) < 4 * llc) n *= 2;
    float *a = array(n), *b = array(n), *c = array(n);
    /* First touch: each page lands on the node of the thread that streams it. */
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        a[i] = 0.0f;
        b[i] = (float)(i % 1024) * 0.5f;
        c[i] = (float)(i % 512) * 0.25f;
    }
    size_t cap = 1 << 16, passes = 0;
    double *rates = malloc(cap * sizeof(double));
    double start = omp_get_wtime(), bytes = 3.0 * sizeof(float) * (double)n;
    for (int warm = 1;; warm = 0) {
        double t = omp_get_wtime();
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < n; i++) a[i] = b[i] + 3.0f * c[i];
        t = omp_get_wtime() - t;
        if (warm) {
            start = omp_get_wtime();
            continue;
        }
        if (passes < cap) rates[passes++] = bytes / t / 1e9;
        if (passes >= 3 && omp_get_wtime() - start >= seconds) break;
    }
    /* The stores are read back, so that no pass can be left out. */
    for (size_t i = 0; i < n; i += 4099) {
        if (a[i] != b[i] + 3.0f * c[i]) {
            fprintf(stderr, "triad: wrong result at %zu\n", i);
            return 1;
        }
    }
    qsort(rates, passes, sizeof(double), by_value);
    double median = passes % 2 ? rates[passes / 2] : (rates[passes / 2 - 1] + rates[passes / 2]) / 2;
    printf("{\"best_gbs\": %.3f, \"median_gbs\": %.3f, \"passes\": %zu, \"threads\": %d, \"elements\": %zu, \"huge_mib\": %ld}\n", rates[passes - 1],
           median, passes, omp_get_max_threads(), n, huge_mib());
    free(rates);
    free(a);
    free(b);
    free(c);
    return 0;
}
