// The CUDA context's own cost on this machine, the floor under framepipe's start-up: loads
// the driver, creates device 0's primary context, makes one 1 MiB allocation, and ends,
// either freeing both through the driver (`full`) or leaving them to the kernel (`_exit`).
// Prints the milliseconds each step took; scripts/bench/startup.sh times the whole process.
//
//   gcc -O2 -o gpu-bundle/cudactx scripts/tools/cudactx.c -ldl
//   gpu-bundle/cudactx [full|exit]
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef int (*init_fn)(unsigned);
typedef int (*device_get_fn)(int *, int);
typedef int (*retain_fn)(void **, int);
typedef int (*release_fn)(int);
typedef int (*set_current_fn)(void *);
typedef int (*alloc_fn)(unsigned long long *, size_t);
typedef int (*free_fn)(unsigned long long);

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

#define LOAD(type, name, sym)                                                     \
    type name = (type)dlsym(lib, sym);                                            \
    if (!name) {                                                                  \
        fprintf(stderr, "cudactx: %s missing from libcuda\n", sym);               \
        return 1;                                                                 \
    }

int main(int argc, char **argv) {
    int full = argc > 1 && strcmp(argv[1], "full") == 0;
    double t0 = now_ms();
    void *lib = dlopen("libcuda.so.1", RTLD_NOW);
    if (!lib) {
        fprintf(stderr, "cudactx: no CUDA driver: %s\n", dlerror());
        return 1;
    }
    LOAD(init_fn, cu_init, "cuInit");
    LOAD(device_get_fn, device_get, "cuDeviceGet");
    LOAD(retain_fn, retain, "cuDevicePrimaryCtxRetain");
    LOAD(release_fn, release, "cuDevicePrimaryCtxRelease_v2");
    LOAD(set_current_fn, set_current, "cuCtxSetCurrent");
    LOAD(alloc_fn, mem_alloc, "cuMemAlloc_v2");
    LOAD(free_fn, mem_free, "cuMemFree_v2");
    double t1 = now_ms();
    int dev = 0;
    void *ctx = 0;
    unsigned long long ptr = 0;
    if (cu_init(0) || device_get(&dev, 0) || retain(&ctx, dev) || set_current(ctx)) {
        fprintf(stderr, "cudactx: creating the context failed\n");
        return 1;
    }
    double t2 = now_ms();
    if (mem_alloc(&ptr, 1 << 20)) {
        fprintf(stderr, "cudactx: allocating failed\n");
        return 1;
    }
    double t3 = now_ms();
    if (full) {
        mem_free(ptr);
        release(dev);
    }
    double t4 = now_ms();
    printf("driver loaded %.1f ms, context %.1f ms, allocation %.1f ms, %s %.1f ms\n", t1 - t0,
           t2 - t1, t3 - t2, full ? "freed" : "left", t4 - t3);
    fflush(stdout);
    if (full) return 0;
    _exit(0);
}
