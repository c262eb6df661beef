// geometry.cu: the filters that change a frame's size (`filter::geometry`), on whole frames
// on the device, of `px` bytes a pixel: packed BGR's 3, or one plane of a YUV frame (a Y,
// U or V plane's 1, NV12's interleaved chroma's 2: `pixel::planes`, which runs each plane
// as its own picture): one thread a pixel of the output frame, reading the input
// frame wherever that pixel comes from (a turn reads a column, a flip the far side), which
// is why they run on the frame its bands assembled rather than on a band. Every kernel is
// integer arithmetic, the same as the CPU's, so the two backends write the same bytes.
//
// `fp_fit_linear` is a detector's resize (`pixel::linear`: OpenCV's `INTER_LINEAR`, placed on
// a model's canvas), not a filter: it runs on whole pictures the detector uploads
// (`backend::fit`).

#include "framepipe.cuh"

// How `fp_geometry_move` finds an output pixel's input pixel (`Move` in kernels.rs).
#define FP_MOVE_CROP 0        // (x + a, y + b)
#define FP_MOVE_PAD 1         // (x - a, y - b), the colour outside the input
#define FP_MOVE_HFLIP 2
#define FP_MOVE_VFLIP 3
#define FP_MOVE_CCLOCK_FLIP 4 // transpose 0
#define FP_MOVE_CLOCK 5       // transpose 1
#define FP_MOVE_CCLOCK 6      // transpose 2
#define FP_MOVE_CLOCK_FLIP 7  // transpose 3

// Pixels moved untouched: crop, pad, the flips and the turns (`Geometry::move_pixels`).
extern "C" __global__ void fp_geometry_move(const u8* __restrict__ src, u8* __restrict__ dst,
                                            int iw, int ih, int ow, int oh, int px,
                                            int how, int a, int b, u32 color) {
    const int ox = blockIdx.x * blockDim.x + threadIdx.x;
    const int oy = blockIdx.y * blockDim.y + threadIdx.y;
    if (ox >= ow || oy >= oh) return;
    int x = ox, y = oy;
    switch (how) {
        case FP_MOVE_CROP: x = ox + a; y = oy + b; break;
        case FP_MOVE_PAD: x = ox - a; y = oy - b; break;
        case FP_MOVE_HFLIP: x = iw - 1 - ox; break;
        case FP_MOVE_VFLIP: y = ih - 1 - oy; break;
        case FP_MOVE_CCLOCK_FLIP: x = oy; y = ox; break;
        case FP_MOVE_CLOCK: x = oy; y = ih - 1 - ox; break;
        case FP_MOVE_CCLOCK: x = iw - 1 - oy; y = ox; break;
        case FP_MOVE_CLOCK_FLIP: x = iw - 1 - oy; y = ih - 1 - ox; break;
    }
    u8* d = dst + ((long long)oy * ow + ox) * px;
    if (x < 0 || x >= iw || y < 0 || y >= ih) {
        for (int c = 0; c < px; ++c) d[c] = (color >> (8 * c)) & 0xff;
        return;
    }
    const u8* s = src + ((long long)y * iw + x) * px;
    for (int c = 0; c < px; ++c) d[c] = s[c];
}

// `scale`'s bilinear sampling (`geometry::bilinear`): `xs` holds, for each output column,
// its first input column and `nx` weights (of 2^FP_SCALE_BITS), `ys` the same for rows
// with `ny`. Each row is weighed along x first and kept whole (as the CPU's row pass), then
// the rows along y, rounded once. Taps past an input's edge carry a weight of 0.
extern "C" __global__ void fp_scale_bilinear(const u8* __restrict__ src, u8* __restrict__ dst,
                                             int iw, int ih, int ow, int oh, int px,
                                             const int* __restrict__ xs, int nx,
                                             const int* __restrict__ ys, int ny) {
    const int ox = blockIdx.x * blockDim.x + threadIdx.x;
    const int oy = blockIdx.y * blockDim.y + threadIdx.y;
    if (ox >= ow || oy >= oh) return;
    const int* tx = xs + ox * (nx + 1);
    const int* ty = ys + oy * (ny + 1);
    u64 acc[3] = {0, 0, 0};
    for (int ky = 0; ky < ny; ++ky) {
        const u32 wy = (u32)ty[1 + ky];
        if (wy == 0) continue;
        const int y = min(ty[0] + ky, ih - 1);
        const u8* line = src + (long long)y * iw * px;
        u32 row[3] = {0, 0, 0};
        for (int kx = 0; kx < nx; ++kx) {
            const u32 wx = (u32)tx[1 + kx];
            const int x = min(tx[0] + kx, iw - 1);
            for (int c = 0; c < px; ++c) row[c] += (u32)line[x * px + c] * wx;
        }
        for (int c = 0; c < px; ++c) acc[c] += (u64)row[c] * wy;
    }
    const u64 round = 1ull << (2 * FP_SCALE_BITS - 1);
    u8* d = dst + ((long long)oy * ow + ox) * px;
    for (int c = 0; c < px; ++c) {
        const u64 v = (acc[c] + round) >> (2 * FP_SCALE_BITS);
        d[c] = v > 255 ? 255 : (u8)v;
    }
}

// `scale`'s area sampling (`geometry::area`): the mean over the output pixel's footprint,
// each input pixel weighed by how much of it the footprint covers (in units of
// 1/(ow*oh) of an input pixel), rounded once.
extern "C" __global__ void fp_scale_area(const u8* __restrict__ src, u8* __restrict__ dst,
                                         int iw, int ih, int ow, int oh, int px) {
    const int ox = blockIdx.x * blockDim.x + threadIdx.x;
    const int oy = blockIdx.y * blockDim.y + threadIdx.y;
    if (ox >= ow || oy >= oh) return;
    const u64 xlo = (u64)ox * iw, xhi = (u64)(ox + 1) * iw;
    const u64 ylo = (u64)oy * ih, yhi = (u64)(oy + 1) * ih;
    u64 sum[3] = {0, 0, 0};
    for (u64 y = ylo / oh; y < (yhi + oh - 1) / oh; ++y) {
        const u64 wy = min((y + 1) * oh, yhi) - max(y * oh, ylo);
        for (u64 x = xlo / ow; x < (xhi + ow - 1) / ow; ++x) {
            const u64 wx = min((x + 1) * ow, xhi) - max(x * ow, xlo);
            const u8* s = src + (y * iw + x) * px;
            for (int c = 0; c < px; ++c) sum[c] += (u64)s[c] * wx * wy;
        }
    }
    const u64 total = (u64)iw * ih;
    u8* d = dst + ((long long)oy * ow + ox) * px;
    for (int c = 0; c < px; ++c) d[c] = (u8)((sum[c] + total / 2) / total);
}

// OpenCV's INTER_LINEAR resize of a packed BGR `src` (iw x ih) to sw x sh, placed at
// (left, top) of the BGR canvas `dst` (cw x ch) whose other pixels are `pad`
// (`pixel::linear`). `taps`: sw (a, b, w) triples across, then sh down, w of 1 << 11.
// One thread a canvas pixel; the same integer arithmetic as the CPU's, one rounding.
extern "C" __global__ void fp_fit_linear(const u8* __restrict__ src, u8* __restrict__ dst,
                                         int iw, int cw, int ch, int sw, int sh, int left,
                                         int top, int pad, const int* __restrict__ taps) {
    const int ox = blockIdx.x * blockDim.x + threadIdx.x;
    const int oy = blockIdx.y * blockDim.y + threadIdx.y;
    if (ox >= cw || oy >= ch) return;
    u8* d = dst + ((long long)oy * cw + ox) * 3;
    const int x = ox - left, y = oy - top;
    if (x < 0 || x >= sw || y < 0 || y >= sh) {
        d[0] = d[1] = d[2] = (u8)pad;
        return;
    }
    const long long one = 1LL << 11, half = 1LL << 21;
    const int* tx = taps + 3 * x;
    const int* ty = taps + 3 * (sw + y);
    const u8* ra = src + (long long)ty[0] * iw * 3;
    const u8* rb = src + (long long)ty[1] * iw * 3;
    for (int c = 0; c < 3; ++c) {
        const long long a = ra[tx[0] * 3 + c] * (one - tx[2]) + ra[tx[1] * 3 + c] * (long long)tx[2];
        const long long b = rb[tx[0] * 3 + c] * (one - tx[2]) + rb[tx[1] * 3 + c] * (long long)tx[2];
        long long v = (a * (one - ty[2]) + b * ty[2] + half) >> 22;
        d[c] = (u8)(v < 0 ? 0 : (v > 255 ? 255 : v));
    }
}
