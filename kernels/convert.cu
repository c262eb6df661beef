// convert.cu: a band between its own pixel format and the packed BGR every filter works on,
// with OpenCV 4.6's `cvtColor` arithmetic (COLOR_YUV2BGR_I420 / _NV12 / _YUY2,
// COLOR_BGR2YUV_I420), as `filter::reference::yuv` defines it. The fixed-point constants
// come from that module as -D definitions, so the two can't drift.
//
// A band buffer in a format holds just the band's rows, laid out as a frame of that many rows
// (planes one after another); 4:2:0 bands start on even rows, so their chroma rows are their
// own. Format numbers are `PixelFormat::code` (src/pixel.rs).

#include "framepipe.cuh"

#if !defined(FP_YUV_SHIFT) || !defined(FP_YUV_CY) || !defined(FP_YUV_CUB) || !defined(FP_YUV_CUG) || !defined(FP_YUV_CVG) || !defined(FP_YUV_CVR) || !defined(FP_YUV_CRY) || !defined(FP_YUV_CGY) || !defined(FP_YUV_CBY) || !defined(FP_YUV_CRU) || !defined(FP_YUV_CGU) || !defined(FP_YUV_CBU) || !defined(FP_YUV_CGV) || !defined(FP_YUV_CBV)
#error "FP_YUV_* must be passed as -D options (backend/kernels.rs)"
#endif

#define FP_FMT_BGR24 0
#define FP_FMT_I420 1
#define FP_FMT_NV12 2
#define FP_FMT_YUYV 3
#define FP_FMT_YUV422P 4
#define FP_FMT_YUV444P 5
#define FP_FMT_GRAY 6

__device__ __forceinline__ u8 fp_clamp8(int v) { return (u8)min(max(v, 0), 255); }

// One pixel: (Y, U, V) to B, G, R at `out`.
__device__ __forceinline__ void fp_yuv_to_bgr(int y, int u, int v, u8* out) {
    const int half = 1 << (FP_YUV_SHIFT - 1);
    const int uu = u - 128, vv = v - 128;
    const int yy = max(y - 16, 0) * FP_YUV_CY;
    out[0] = fp_clamp8((yy + half + FP_YUV_CUB * uu) >> FP_YUV_SHIFT);
    out[1] = fp_clamp8((yy + half + FP_YUV_CVG * vv + FP_YUV_CUG * uu) >> FP_YUV_SHIFT);
    out[2] = fp_clamp8((yy + half + FP_YUV_CVR * vv) >> FP_YUV_SHIFT);
}

__device__ __forceinline__ u8 fp_luma(const u8* p) {
    const int yy = FP_YUV_CRY * p[2] + FP_YUV_CGY * p[1] + FP_YUV_CBY * p[0];
    return fp_clamp8((yy + (1 << (FP_YUV_SHIFT - 1)) + (16 << FP_YUV_SHIFT)) >> FP_YUV_SHIFT);
}

__device__ __forceinline__ void fp_chroma(const u8* p, u8* u, u8* v) {
    const int b = p[0], g = p[1], r = p[2];
    const int add = (1 << (FP_YUV_SHIFT - 1)) + (128 << FP_YUV_SHIFT);
    *u = fp_clamp8((FP_YUV_CRU * r + FP_YUV_CGU * g + FP_YUV_CBU * b + add) >> FP_YUV_SHIFT);
    *v = fp_clamp8((FP_YUV_CBU * r + FP_YUV_CGV * g + FP_YUV_CBV * b + add) >> FP_YUV_SHIFT);
}

// `src`: `rows` rows of a `width`-wide band in format `fmt`; `dst`: the same rows, BGR.
// One thread per pixel.
extern "C" __global__ void fp_to_bgr(const u8* __restrict__ src, u8* __restrict__ dst, int width,
                                     int rows, int fmt) {
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int r = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= width || r >= rows) return;
    const long long w = width, px = (long long)r * w + x, area = w * rows;
    int y = src[px], u = 128, v = 128;
    switch (fmt) {
        case FP_FMT_I420: {
            const long long c = (long long)(r / 2) * (w / 2) + x / 2;
            u = src[area + c];
            v = src[area + area / 4 + c];
            break;
        }
        case FP_FMT_NV12: {
            const long long c = area + (long long)(r / 2) * w + (x & ~1);
            u = src[c];
            v = src[c + 1];
            break;
        }
        case FP_FMT_YUYV: {
            const long long pair = ((long long)r * w + (x & ~1)) * 2;
            y = src[px * 2];
            u = src[pair + 1];
            v = src[pair + 3];
            break;
        }
        case FP_FMT_YUV422P: {
            const long long c = (long long)r * (w / 2) + x / 2;
            u = src[area + c];
            v = src[area + area / 2 + c];
            break;
        }
        case FP_FMT_YUV444P:
            u = src[area + px];
            v = src[2 * area + px];
            break;
        case FP_FMT_BGR24:
            dst[px * 3] = src[px * 3];
            dst[px * 3 + 1] = src[px * 3 + 1];
            dst[px * 3 + 2] = src[px * 3 + 2];
            return;
        default:  // FP_FMT_GRAY: luma with neutral chroma
            break;
    }
    fp_yuv_to_bgr(y, u, v, dst + px * 3);
}

// `src`: `rows` BGR rows of a `width`-wide band; `dst`: the same rows in `fmt` (I420, NV12
// or gray). One thread per 2x2 block (4:2:0: the block's chroma is its top-left pixel's, as
// OpenCV's) or per pixel (gray).
extern "C" __global__ void fp_from_bgr(const u8* __restrict__ src, u8* __restrict__ dst,
                                       int width, int rows, int fmt) {
    const int bx = blockIdx.x * blockDim.x + threadIdx.x;
    const int by = blockIdx.y * blockDim.y + threadIdx.y;
    const long long w = width, area = w * rows;
    if (fmt == FP_FMT_GRAY) {
        if (bx >= width || by >= rows) return;
        const long long px = by * w + bx;
        dst[px] = fp_luma(src + px * 3);
        return;
    }
    if (bx >= width / 2 || by >= rows / 2) return;
    const int x = bx * 2, r = by * 2;
    for (int dy = 0; dy < 2; ++dy) {
        for (int dx = 0; dx < 2; ++dx) {
            const long long px = (long long)(r + dy) * w + x + dx;
            dst[px] = fp_luma(src + px * 3);
        }
    }
    u8 u, v;
    fp_chroma(src + ((long long)r * w + x) * 3, &u, &v);
    if (fmt == FP_FMT_NV12) {
        const long long c = area + (long long)by * w + x;
        dst[c] = u;
        dst[c + 1] = v;
    } else {
        const long long c = (long long)by * (w / 2) + bx;
        dst[area + c] = u;
        dst[area + area / 4 + c] = v;
    }
}

// `src`: `rows` rows of a `width`-wide 4:2:0 band in `fin` (I420 or NV12); `dst`: the same
// rows in `fout`, the other one. The samples are kept as they are: only the chroma's layout
// changes (`pixel::repack_420`). One thread per 2x2 block.
extern "C" __global__ void fp_repack420(const u8* __restrict__ src, u8* __restrict__ dst,
                                        int width, int rows, int fin) {
    const int bx = blockIdx.x * blockDim.x + threadIdx.x;
    const int by = blockIdx.y * blockDim.y + threadIdx.y;
    if (bx >= width / 2 || by >= rows / 2) return;
    const long long w = width, area = w * rows, x = bx * 2, r = by * 2;
    for (int dy = 0; dy < 2; ++dy) {
        const long long px = (r + dy) * w + x;
        dst[px] = src[px];
        dst[px + 1] = src[px + 1];
    }
    const long long planar = (long long)by * (w / 2) + bx, paired = area + (long long)by * w + x;
    if (fin == FP_FMT_NV12) {
        dst[area + planar] = src[paired];
        dst[area + area / 4 + planar] = src[paired + 1];
    } else {
        dst[paired] = src[area + planar];
        dst[paired + 1] = src[area + area / 4 + planar];
    }
}

// `src`: a packed BGR frame of `width` x `height`; `dst`: the same frame laid out for a
// model by `tables` (`pixel::lookup`): output channel c (R, G, B; B, G, R where `bgr`) of
// pixel i becomes the `element`-byte entry c * 256 + value of `tables`, at element
// c * n + i (`planar`) or 3 * i + c. One thread per pixel.
extern "C" __global__ void fp_lay_out(const u8* __restrict__ src, u8* __restrict__ dst,
                                      int width, int height, int planar, int element,
                                      const u8* __restrict__ tables, int bgr) {
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= width || y >= height) return;
    const long long n = (long long)width * height, i = (long long)y * width + x;
    const u8* px = src + i * 3;
    for (int c = 0; c < 3; ++c) {
        const u8* t = tables + (c * 256 + px[bgr ? c : 2 - c]) * element;
        u8* o = dst + (planar ? c * n + i : i * 3 + c) * element;
        for (int k = 0; k < element; ++k) o[k] = t[k];
    }
}
