// zstd level 1 over a file in fixed blocks, one context, as parquet compresses pages: prints
// the bytes out and the best compression and decompression speed of N passes (process CPU
// time). Used to compare builds of the zstd that zstd-sys vendors (BENCHMARKS.md, issue 15,
// twenty-eighth session), e.g. with and without -DDYNAMIC_BMI2=0:
//
//   Z=~/.cargo/registry/src/index.crates.io-*/zstd-sys-2.1.2+zstd.1.5.7/zstd/lib
//   cp -r $Z /tmp/zlib && cd /tmp/zlib
//   gcc -O3 -fPIC [-DDYNAMIC_BMI2=0] -I. -Icommon -c common/*.c compress/*.c decompress/*.c
//       decompress/huf_decompress_amd64.S                          (one command)
//   gcc -O3 [-DDYNAMIC_BMI2=0] -I. <repo>/bench/zstd_pages.c *.o -o zstd_pages
//   ./zstd_pages <file> <block bytes> <passes>
//
// The file: the data files of a table with `compression=none`, concatenated.

#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "zstd.h"

static double cpu_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s <file> <block bytes> <passes>\n", argv[0]);
        return 2;
    }
    FILE *f = fopen(argv[1], "rb");
    if (!f) { perror(argv[1]); return 1; }
    fseek(f, 0, SEEK_END);
    size_t n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    char *src = malloc(n);
    if (fread(src, 1, n, f) != n) { perror("read"); return 1; }
    fclose(f);
    size_t blk = (size_t)atol(argv[2]);
    int passes = atoi(argv[3]);
    size_t nb = (n + blk - 1) / blk, cap = ZSTD_compressBound(blk);
    char *dst = malloc(nb * cap), *out = malloc(blk);
    size_t *csz = malloc(nb * sizeof(size_t)), total = 0;
    ZSTD_CCtx *c = ZSTD_createCCtx();
    ZSTD_DCtx *d = ZSTD_createDCtx();
    double bestc = 1e9, bestd = 1e9;
    for (int p = 0; p < passes; p++) {
        double t0 = cpu_now();
        total = 0;
        for (size_t i = 0; i < nb; i++) {
            size_t len = i == nb - 1 ? n - i * blk : blk;
            csz[i] = ZSTD_compressCCtx(c, dst + i * cap, cap, src + i * blk, len, 1);
            if (ZSTD_isError(csz[i])) { fprintf(stderr, "compress failed\n"); return 1; }
            total += csz[i];
        }
        double t1 = cpu_now();
        for (size_t i = 0; i < nb; i++) {
            size_t len = i == nb - 1 ? n - i * blk : blk;
            if (ZSTD_decompressDCtx(d, out, blk, dst + i * cap, csz[i]) != len) {
                fprintf(stderr, "decompress failed\n");
                return 1;
            }
        }
        double t2 = cpu_now();
        if (t1 - t0 < bestc) bestc = t1 - t0;
        if (t2 - t1 < bestd) bestd = t2 - t1;
    }
    printf("%zu -> %zu (%.3f)  compress %.1f MB/s  decompress %.1f MB/s\n", n, total,
           (double)n / total, n / bestc / 1e6, n / bestd / 1e6);
    return 0;
}
