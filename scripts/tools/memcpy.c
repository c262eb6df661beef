// Aggregate memcpy bandwidth of N threads, each copying 1080p BGR frames (6,220,800 bytes)
// as the test pattern fills the ring: from its 21-frame period into a ring of 6 slots, over
// and over for 2 s (nothing stays in the caches).
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#define FRAME 6220800
#define PERIOD 21
#define RING 6
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
static volatile int go;
static void *run(void *arg) {
    long *count = arg;
    char *src[PERIOD], *dst[RING];
    for (int i = 0; i < PERIOD; i++) { src[i] = aligned_alloc(4096, FRAME); memset(src[i], i, FRAME); }
    for (int i = 0; i < RING; i++) { dst[i] = aligned_alloc(4096, FRAME); memset(dst[i], 0, FRAME); }
    while (!go) {}
    double end = now() + 2.0;
    while (now() < end) {
        memcpy(dst[*count % RING], src[*count % PERIOD], FRAME);
        __asm__ volatile("" : : "r"(dst[*count % RING]) : "memory");
        (*count)++;
    }
    return NULL;
}
int main(void) {
    int ns[] = {1, 2, 4, 8, 16};
    for (int k = 0; k < 5; k++) {
        int n = ns[k]; pthread_t t[16]; long c[16] = {0}; go = 0;
        for (int i = 0; i < n; i++) pthread_create(&t[i], NULL, run, &c[i]);
        go = 1; long total = 0;
        for (int i = 0; i < n; i++) { pthread_join(t[i], NULL); total += c[i]; }
        printf("%2d threads: %6.0f frames/s of 1080p BGR memcpy (%5.1f GB/s copied)\n", n, total / 2.0, total / 2.0 * FRAME / 1e9);
    }
    return 0;
}
