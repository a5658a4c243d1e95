// Two ways to put a resident input's rows into per-partition sorted order, on int64 columns
// (BENCHMARKS.md, issue 15, thirtieth session). Prints figures, asserts nothing.
//
//   gcc -O2 -march=native -o /tmp/gather_layouts bench/gather_layouts.c
//   /tmp/gather_layouts ROWS PARTITIONS PREFETCH_DISTANCE COLUMNS [PASSES]  (e.g. 10000000 132 16 20 7)
//
// Each row gets a random partition; each partition's rows a random "sorted" order (the taxi
// input is in random order, so a part's sort order is random against its input positions).
// - grouped (what neve's write path does): per 65,536-row batch, a counting sort by partition
//   copies every column into partition-contiguous runs; then each partition's rows are gathered
//   in sorted order from its runs. With PASSES > 1 (default 1), grouping reads every batch once
//   per pass and copies only the rows of that pass's partitions (a resident input larger than
//   the write path's chunk budget is grouped so, in passes of a few partitions each).
// - direct: each partition's rows are gathered in sorted order straight from the input
//   columns, one copy instead of two, asking for the value PREFETCH_DISTANCE rows ahead
//   (0: no prefetch).
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}
static uint64_t state = 88172645463325252ull;
static uint64_t next(void) {
  state ^= state << 13;
  state ^= state >> 7;
  state ^= state << 17;
  return state;
}

int main(int argc, char **argv) {
  if (argc != 5 && argc != 6) {
    fprintf(stderr, "usage: %s ROWS PARTITIONS PREFETCH_DISTANCE COLUMNS [PASSES]\n", argv[0]);
    return 2;
  }
  const size_t n = atol(argv[1]), batch = 65536;
  const int parts = atoi(argv[2]), dist = atoi(argv[3]), cols = atoi(argv[4]);
  const int passes = argc == 6 ? atoi(argv[5]) : 1;
  int64_t **in = malloc(cols * sizeof *in), **grouped = malloc(cols * sizeof *grouped);
  for (int c = 0; c < cols; c++) {
    in[c] = malloc(n * 8);
    grouped[c] = malloc(n * 8);
    for (size_t i = 0; i < n; i++) in[c][i] = (int64_t)(i * (c + 1));
    memset(grouped[c], 0, n * 8);
  }
  uint32_t *code = malloc(n * 4);
  for (size_t i = 0; i < n; i++) code[i] = next() % parts;
  size_t *start = calloc(parts + 1, sizeof *start), *fill = calloc(parts, sizeof *fill);
  for (size_t i = 0; i < n; i++) start[code[i] + 1]++;
  for (int p = 0; p < parts; p++) start[p + 1] += start[p];
  uint32_t *rows = malloc(n * 4), *order = malloc(n * 4), *gpos = malloc(n * 4), *take = malloc(batch * 4);
  for (size_t i = 0; i < n; i++) rows[start[code[i]] + fill[code[i]]++] = i;
  for (int p = 0; p < parts; p++) {
    size_t k = start[p + 1] - start[p];
    uint32_t *q = order + start[p];
    for (size_t i = 0; i < k; i++) q[i] = i;
    for (size_t i = k; i > 1; i--) {
      size_t j = next() % i;
      uint32_t t = q[i - 1];
      q[i - 1] = q[j];
      q[j] = t;
    }
  }
  int64_t *out = malloc(n * 8);
  size_t *at = malloc(parts * sizeof *at), *first = malloc(parts * sizeof *first);
  volatile int64_t sink = 0;
  for (int round = 0; round < 3; round++) {
    double t0 = now();
    memset(fill, 0, parts * sizeof *fill);
    size_t to = 0;
    for (int k = 0; k < passes; k++) {
      const int lo = k * parts / passes, hi = (k + 1) * parts / passes;
      for (size_t b = 0; b < n; b += batch) {
        size_t e = b + batch < n ? b + batch : n, s = to;
        memset(at, 0, parts * sizeof *at);
        for (size_t i = b; i < e; i++) at[code[i]]++;
        for (int p = lo; p < hi; p++) {
          size_t m = at[p];
          first[p] = at[p] = s;
          s += m;
        }
        // As neve's grouping: the batch's rows of this pass in grouped order, then one take per
        // column.
        for (size_t i = b; i < e; i++) {
          int p = code[i];
          if (p >= lo && p < hi) {
            gpos[start[p] + fill[p]++] = at[p];
            take[at[p]++ - to] = i;
          }
        }
        for (int c = 0; c < cols; c++) {
          const int64_t *x = in[c];
          int64_t *y = grouped[c] + to;
          for (size_t j = 0; j < s - to; j++) y[j] = x[take[j]];
        }
        to = s;
      }
    }
    double t1 = now();
    for (int p = 0; p < parts; p++) {
      size_t k = start[p + 1] - start[p];
      const uint32_t *q = order + start[p], *g = gpos + start[p];
      for (int c = 0; c < cols; c++)
        for (size_t i = 0; i < k; i++) out[start[p] + i] = grouped[c][g[q[i]]];
    }
    double t2 = now();
    sink += out[n / 2];
    for (int p = 0; p < parts; p++) {
      size_t k = start[p + 1] - start[p];
      const uint32_t *q = order + start[p], *r = rows + start[p];
      for (int c = 0; c < cols; c++) {
        const int64_t *x = in[c];
        for (size_t i = 0; i < k; i++) {
          if (dist && i + dist < k) _mm_prefetch((const char *)&x[r[q[i + dist]]], _MM_HINT_T0);
          out[start[p] + i] = x[r[q[i]]];
        }
      }
    }
    double t3 = now();
    sink += out[n / 3];
    printf("rows %zu, partitions %d, columns %d: grouped %.3f s (grouping in %d pass(es) %.3f, gather %.3f); direct, prefetch %d ahead, %.3f s\n",
           n, parts, cols, t2 - t0, passes, t1 - t0, t2 - t1, dist, t3 - t2);
  }
  return 0;
}
