// framepipe.cuh: what a framepipe kernel sees of a frame.
//
// framepipe cuts every frame into horizontal bands, each on its own CUDA stream, and runs the
// filter chain on each band's buffer: the band's own rows plus `radius` rows of halo above
// and below (fewer at the frame's top and bottom). This header hides all of that. A kernel
// gets its pixel in *frame* coordinates and reads neighbours with OpenCV's default border
// (BORDER_REFLECT_101) at the frame's edges; a read past the band's buffer is clamped to it,
// which only ever affects halo rows as long as the kernel reads no farther than the radius
// it declares (`radius=R` after `kernel:FILE`; `framepipe check-kernel` proves it).
//
// A whole user kernel (see examples/):
//
//     #include "framepipe.cuh"
//     FP_KERNEL my_invert(fp_band band) {
//         FP_PIXEL(band, x, y);                  // this thread's pixel; returns if none
//         fp_bgr v = fp_get(band, x, y);
//         fp_put(band, x, y, fp_make(255 - v.b, 255 - v.g, 255 - v.r));
//     }
//
// The first parameter is always `fp_band`; any further `float` or `int` parameters are set
// by name on the command line: `kernel:edges.cu,strength=2`. Pixels are packed 8-bit BGR.
// framepipe's own kernels (kernels/*.cu) are written against this header too.

#ifndef FRAMEPIPE_CUH
#define FRAMEPIPE_CUH

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;

// A kernel's declaration: `FP_KERNEL name(fp_band band, ...)`.
#define FP_KERNEL extern "C" __global__ void

// One band buffer and its place in the frame (passed by value to every kernel).
struct fp_band {
    const u8* src;  // the band's input rows, packed BGR, `width * 3` bytes a row
    u8* dst;        // where the kernel writes, same layout
    int width;      // frame width, pixels
    int rows;       // rows in this buffer (the band's own and its halo)
    int row0;       // frame row of the buffer's first row
    int height;     // frame height, rows
};

// One pixel: blue, green, red.
struct fp_bgr {
    u8 b, g, r;
};

// OpenCV's BORDER_REFLECT_101 of index `p` into 0..n-1: ..., 2, 1 | 0, 1, ..., n-1 | n-2, ...
__device__ __forceinline__ int fp_reflect(int p, int n) {
    if (n == 1) return 0;
    while (p < 0 || p >= n) p = p < 0 ? -p : 2 * n - 2 - p;
    return p;
}

// The buffer row that holds frame row `y` after the border rule, clamped to the buffer.
__device__ __forceinline__ int fp_buffer_row(const fp_band& b, int y) {
    int r = fp_reflect(y, b.height) - b.row0;
    return min(max(r, 0), b.rows - 1);
}

// The buffer row holding frame row `row0 + by + dy` (by: a buffer row), reflected, clamped.
__device__ __forceinline__ int fp_row(int by, int dy, int rows, int row0, int height) {
    int r = fp_reflect(row0 + by + dy, height) - row0;
    return min(max(r, 0), rows - 1);
}

// Byte offset of pixel (x, y), frame coordinates, after the border rule.
__device__ __forceinline__ long long fp_offset(const fp_band& b, int x, int y) {
    return ((long long)fp_buffer_row(b, y) * b.width + fp_reflect(x, b.width)) * 3;
}

// Declares `x` and `y`, this thread's pixel in frame coordinates, for a kernel launched one
// thread per pixel of the buffer (framepipe does that for every user kernel). Threads
// outside the buffer return.
#define FP_PIXEL(band, x, y)                                         \
    const int x = blockIdx.x * blockDim.x + threadIdx.x;             \
    const int fp_by_ = blockIdx.y * blockDim.y + threadIdx.y;        \
    if (x >= (band).width || fp_by_ >= (band).rows) return;          \
    const int y = (band).row0 + fp_by_

// The pixel at (x, y) in frame coordinates, any x and y: the border rule applies.
__device__ __forceinline__ fp_bgr fp_get(const fp_band& b, int x, int y) {
    const u8* p = b.src + fp_offset(b, x, y);
    fp_bgr v;
    v.b = p[0]; v.g = p[1]; v.r = p[2];
    return v;
}

// Channel `c` (0 blue, 1 green, 2 red) of the pixel at (x, y), as an int.
__device__ __forceinline__ int fp_get_c(const fp_band& b, int x, int y, int c) {
    return b.src[fp_offset(b, x, y) + c];
}

// Writes this thread's own pixel (x, y as FP_PIXEL declared them).
__device__ __forceinline__ void fp_put(const fp_band& b, int x, int y, fp_bgr v) {
    u8* p = b.dst + ((long long)(y - b.row0) * b.width + x) * 3;
    p[0] = v.b; p[1] = v.g; p[2] = v.r;
}

// Saturates to 0..255 (the way OpenCV's saturate_cast does for integers).
__device__ __forceinline__ u8 fp_sat(int v) {
    return (u8)min(max(v, 0), 255);
}

// Rounds half to even, then saturates (OpenCV's saturate_cast<uchar>(float)).
__device__ __forceinline__ u8 fp_satf(float v) {
    return (u8)fminf(fmaxf(rintf(v), 0.0f), 255.0f);
}

// A pixel from three ints, each saturated.
__device__ __forceinline__ fp_bgr fp_make(int b, int g, int r) {
    fp_bgr v;
    v.b = fp_sat(b); v.g = fp_sat(g); v.r = fp_sat(r);
    return v;
}

// For kernels that treat a band as a flat run of bytes (framepipe's pointwise filters):
// the band's length in bytes, and this thread's index in a 1D launch.
__device__ __forceinline__ u64 fp_bytes(const fp_band& b) {
    return (u64)b.width * b.rows * 3;
}

__device__ __forceinline__ u64 fp_thread() {
    return (u64)blockIdx.x * blockDim.x + threadIdx.x;
}

#endif  // FRAMEPIPE_CUH
