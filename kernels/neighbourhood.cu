// Neighbourhood filters on packed 8-bit BGR band buffers. A band buffer holds `rows` rows of
// `width` pixels starting at frame row `row0` of a frame `height` rows tall. Rows and columns
// are reflected like OpenCV's BORDER_REFLECT_101 in frame coordinates, then rows are clamped
// to the buffer (rows near a buffer edge that is not a frame edge are wrong, but never the
// band's own rows; see src/filter/reference.rs, which this file matches bit for bit).
// One thread per pixel, three channels each; a 2D grid over (x, y).

// The border rule (fp_reflect, fp_row) and the band (fp_band) come from framepipe.cuh, the
// header user kernels are written against. The separable passes keep their own signatures
// (they pass 16-bit sums through a scratch buffer); the 3x3 filters take an fp_band.

#include "framepipe.cuh"

#define FP_XY                                              \
    int x = blockIdx.x * blockDim.x + threadIdx.x;         \
    int y = blockIdx.y * blockDim.y + threadIdx.y;         \
    if (x >= width || y >= rows) return;                   \
    const long long at = ((long long)y * width + x) * 3;

// Box blur, row pass: the sum of 2r+1 pixels.
extern "C" __global__ void fp_box_h(const u8* __restrict__ src, u16* __restrict__ tmp,
                                    int width, int rows, int r) {
    FP_XY
    u32 s0 = 0, s1 = 0, s2 = 0;
    const u8* line = src + (long long)y * width * 3;
    for (int d = -r; d <= r; ++d) {
        const u8* p = line + fp_reflect(x + d, width) * 3;
        s0 += p[0]; s1 += p[1]; s2 += p[2];
    }
    tmp[at] = (u16)s0; tmp[at + 1] = (u16)s1; tmp[at + 2] = (u16)s2;
}

// Box blur, column pass: (sum + area/2) / area.
extern "C" __global__ void fp_box_v(const u16* __restrict__ tmp, u8* __restrict__ dst,
                                    int width, int rows, int row0, int height, int r, u32 area) {
    FP_XY
    u32 s0 = 0, s1 = 0, s2 = 0;
    for (int d = -r; d <= r; ++d) {
        const u16* p = tmp + ((long long)fp_row(y, d, rows, row0, height) * width + x) * 3;
        s0 += p[0]; s1 += p[1]; s2 += p[2];
    }
    u32 h = area / 2;
    dst[at] = (u8)((s0 + h) / area); dst[at + 1] = (u8)((s1 + h) / area); dst[at + 2] = (u8)((s2 + h) / area);
}

#if !defined(FP_GAUSS_ROW_SHIFT) || !defined(FP_GAUSS_COL_SHIFT)
#error "FP_GAUSS_*_SHIFT must be passed as -D options (backend/kernels.rs)"
#endif

// Gaussian, row pass: 14-bit weights, keep 8 fractional bits:
// (sum + half) >> FP_GAUSS_ROW_SHIFT (6).
extern "C" __global__ void fp_gauss_h(const u8* __restrict__ src, u16* __restrict__ tmp,
                                      int width, int rows, int r, const u32* __restrict__ w) {
    FP_XY
    u32 s0 = 0, s1 = 0, s2 = 0;
    const u8* line = src + (long long)y * width * 3;
    for (int d = -r; d <= r; ++d) {
        const u8* p = line + fp_reflect(x + d, width) * 3;
        u32 k = w[d + r];
        s0 += k * p[0]; s1 += k * p[1]; s2 += k * p[2];
    }
    const u32 rhalf = 1u << (FP_GAUSS_ROW_SHIFT - 1);
    tmp[at] = (u16)((s0 + rhalf) >> FP_GAUSS_ROW_SHIFT); tmp[at + 1] = (u16)((s1 + rhalf) >> FP_GAUSS_ROW_SHIFT); tmp[at + 2] = (u16)((s2 + rhalf) >> FP_GAUSS_ROW_SHIFT);
}

// Gaussian, column pass: (sum + half) >> FP_GAUSS_COL_SHIFT (22).
extern "C" __global__ void fp_gauss_v(const u16* __restrict__ tmp, u8* __restrict__ dst,
                                      int width, int rows, int row0, int height, int r,
                                      const u32* __restrict__ w) {
    FP_XY
    u32 s0 = 0, s1 = 0, s2 = 0;
    for (int d = -r; d <= r; ++d) {
        const u16* p = tmp + ((long long)fp_row(y, d, rows, row0, height) * width + x) * 3;
        u32 k = w[d + r];
        s0 += k * p[0]; s1 += k * p[1]; s2 += k * p[2];
    }
    const u32 half = 1u << (FP_GAUSS_COL_SHIFT - 1);
    dst[at] = (u8)((s0 + half) >> FP_GAUSS_COL_SHIFT); dst[at + 1] = (u8)((s1 + half) >> FP_GAUSS_COL_SHIFT); dst[at + 2] = (u8)((s2 + half) >> FP_GAUSS_COL_SHIFT);
}

// The rows (ys) and columns (xs) of the 3x3 neighbourhood of (x, y), with the border rule
// applied: declares `ys` and `xs` in the calling kernel.
// `src`, `dst`, `at` and the buffer's geometry come from the band.
#define FP_3X3                                                              \
    const u8* __restrict__ src = band.src;                                  \
    u8* __restrict__ dst = band.dst;                                        \
    const int width = band.width, rows = band.rows, row0 = band.row0, height = band.height; \
    FP_XY                                                                   \
    int ys[3] = {fp_row(y, -1, rows, row0, height), y, fp_row(y, 1, rows, row0, height)}; \
    int xs[3] = {fp_reflect(x - 1, width), x, fp_reflect(x + 1, width)};

__device__ __forceinline__ int fp_px(const u8* src, int width, int y, int x, int c) {
    return src[((long long)y * width + x) * 3 + c];
}

// Sobel magnitude: round_half_even((min(|gx|,255) + min(|gy|,255)) / 2).
FP_KERNEL fp_sobel(fp_band band) {
    FP_3X3
    for (int c = 0; c < 3; ++c) {
        int p[3][3];
        for (int i = 0; i < 3; ++i)
            for (int j = 0; j < 3; ++j) p[i][j] = fp_px(src, width, ys[i], xs[j], c);
        int gx = p[0][2] + 2 * p[1][2] + p[2][2] - p[0][0] - 2 * p[1][0] - p[2][0];
        int gy = p[2][0] + 2 * p[2][1] + p[2][2] - p[0][0] - 2 * p[0][1] - p[0][2];
        u32 s = min(abs(gx), 255) + min(abs(gy), 255);
        u32 q = s >> 1;
        dst[at + c] = (u8)(((s & 1) && (q & 1)) ? q + 1 : q);
    }
}

// Unsharp mask: saturate(round_half_even(v*keep + blur*take)), blur = 3x3 [1 2 1]^2 / 16.
FP_KERNEL fp_sharpen(fp_band band, float keep, float take) {
    FP_3X3
    for (int c = 0; c < 3; ++c) {
        u32 s = 0;
        const u32 k[3] = {1, 2, 1};
        for (int i = 0; i < 3; ++i)
            for (int j = 0; j < 3; ++j) s += k[i] * k[j] * fp_px(src, width, ys[i], xs[j], c);
        u32 blur = (s + 8) >> 4;
        float v = (float)fp_px(src, width, y, x, c);
        float o = __fadd_rn(__fmul_rn(v, keep), __fmul_rn((float)blur, take));
        dst[at + c] = fp_satf(o);  // round half to even, saturate
    }
}

// 3x3 median per channel (a sorting network).
#define FP_SORT(a, b) { int lo = min(a, b); b = max(a, b); a = lo; }
FP_KERNEL fp_median3(fp_band band) {
    FP_3X3
    for (int c = 0; c < 3; ++c) {
        int p0 = fp_px(src, width, ys[0], xs[0], c), p1 = fp_px(src, width, ys[0], xs[1], c),
            p2 = fp_px(src, width, ys[0], xs[2], c), p3 = fp_px(src, width, ys[1], xs[0], c),
            p4 = fp_px(src, width, ys[1], xs[1], c), p5 = fp_px(src, width, ys[1], xs[2], c),
            p6 = fp_px(src, width, ys[2], xs[0], c), p7 = fp_px(src, width, ys[2], xs[1], c),
            p8 = fp_px(src, width, ys[2], xs[2], c);
        FP_SORT(p1, p2); FP_SORT(p4, p5); FP_SORT(p7, p8);
        FP_SORT(p0, p1); FP_SORT(p3, p4); FP_SORT(p6, p7);
        FP_SORT(p1, p2); FP_SORT(p4, p5); FP_SORT(p7, p8);
        FP_SORT(p0, p3); FP_SORT(p5, p8); FP_SORT(p4, p7);
        FP_SORT(p3, p6); FP_SORT(p1, p4); FP_SORT(p2, p5);
        FP_SORT(p4, p7); FP_SORT(p4, p2); FP_SORT(p6, p4);
        FP_SORT(p4, p2);
        dst[at + c] = (u8)p4;
    }
}
