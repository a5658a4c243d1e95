/* What fresh memory costs on this machine (BENCHMARKS.md, issue 15, "Sixty-third session"):
 * 440 MB (about a first 1M-row insert's faults) touched a 4 KiB page at a time, populated with
 * MADV_POPULATE_WRITE, and touched as transparent huge pages; then a memset of the same
 * memory once present. Build: cc -O2 -o page_faults bench/page_faults.c; run: ./page_faults */
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static char *fresh(size_t n, int advice) {
  /* 2 MiB aligned, so huge pages can back all of it. */
  char *p = mmap(0, n + (2 << 20), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  p = (char *)(((unsigned long)p + (2 << 20) - 1) & ~((2ul << 20) - 1));
  madvise(p, n, advice);
  return p;
}

int main(void) {
  size_t n = 440ul << 20;
  for (int r = 0; r < 5; r++) {
    char *p = fresh(n, MADV_NOHUGEPAGE);
    double t = now();
    for (size_t i = 0; i < n; i += 4096) p[i] = 1;
    double touch = now() - t;
    t = now();
    memset(p, 2, n);
    double present = now() - t;
    char *q = fresh(n, MADV_NOHUGEPAGE);
    t = now();
    madvise(q, n, MADV_POPULATE_WRITE);
    double populate = now() - t;
    char *h = fresh(n, MADV_HUGEPAGE);
    t = now();
    for (size_t i = 0; i < n; i += 4096) h[i] = 1;
    double huge = now() - t;
    printf("4 KiB faults %.3f s (%.2f us a page), MADV_POPULATE_WRITE %.3f s, huge pages %.3f s, "
           "memset once present %.3f s\n",
           touch, touch / (n / 4096) * 1e6, populate, huge, present);
    /* Unmapped: the next round's mappings are fresh pages again. */
    munmap(p, n);
    munmap(q, n);
    munmap(h, n);
  }
  return 0;
}
