// Pointwise filters on packed 8-bit BGR bands. Each kernel reads `src` and writes `dst`
// (distinct device buffers); `n` is the number of bytes (a multiple of 3).
// The arithmetic matches src/filter/reference.rs bit for bit:
//   gray: (B*FP_GRAY_B + G*FP_GRAY_G + R*FP_GRAY_R + half) >> FP_GRAY_SHIFT, OpenCV's
//         fixed-point BGR2GRAY (the constants come from src/filter/mod.rs, as -D options);
//   gain: saturate(round_half_even(v*alpha + beta)) with a separate f32 multiply and add.

// Written against framepipe.cuh like every kernel; these treat a band as a flat run of
// bytes (16 per thread) instead of using FP_PIXEL, since no pixel needs its neighbours.

#include "framepipe.cuh"

#define FP_VEC 16

// Defined by the Rust side (backend/kernels.rs, `shared_constants`) from the reference's
// own constants: a build that does not pass them fails here instead of drifting.
#if !defined(FP_GRAY_B) || !defined(FP_GRAY_G) || !defined(FP_GRAY_R) || !defined(FP_GRAY_SHIFT)
#error "FP_GRAY_* must be passed as -D options (backend/kernels.rs)"
#endif
#define FP_GRAY_HALF (1u << (FP_GRAY_SHIFT - 1))

// Copies `n` bytes between raw device addresses (the benchmark's mapped-memory probe).
extern "C" __global__ void fp_copy_bytes(const u8* __restrict__ src, u8* __restrict__ dst, u64 n) {
    u64 i = fp_thread() * FP_VEC;
    if (i + FP_VEC <= n) {
        *(uint4*)(dst + i) = *(const uint4*)(src + i);
    } else {
        for (; i < n; ++i) dst[i] = src[i];
    }
}

// Declares `src`, `dst` and `n` (the band's bytes) from the band.
#define FP_FLAT(band)                          \
    const u8* __restrict__ src = (band).src;   \
    u8* __restrict__ dst = (band).dst;         \
    const u64 n = fp_bytes(band);

// The original question's kernel: a per-pixel copy, 16 bytes per thread.
FP_KERNEL fp_copy(fp_band band) {
    FP_FLAT(band)
    u64 i = fp_thread() * FP_VEC;
    if (i + FP_VEC <= n) {
        *(uint4*)(dst + i) = *(const uint4*)(src + i);
    } else {
        for (; i < n; ++i) dst[i] = src[i];
    }
}

FP_KERNEL fp_invert(fp_band band) {
    FP_FLAT(band)
    u64 i = fp_thread() * FP_VEC;
    if (i + FP_VEC <= n) {
        uint4 v = *(const uint4*)(src + i);
        v.x = ~v.x; v.y = ~v.y; v.z = ~v.z; v.w = ~v.w;
        *(uint4*)(dst + i) = v;
    } else {
        for (; i < n; ++i) dst[i] = (u8)(255 - src[i]);
    }
}

__device__ __forceinline__ u8 fp_gain1(u8 v, float alpha, float beta) {
    float y = __fadd_rn(__fmul_rn((float)v, alpha), beta);
    return fp_satf(y);
}

FP_KERNEL fp_gain(fp_band band, float alpha, float beta) {
    FP_FLAT(band)
    u64 i = fp_thread() * FP_VEC;
    if (i + FP_VEC <= n) {
        uint4 v = *(const uint4*)(src + i);
        u8* b = (u8*)&v;
#pragma unroll
        for (int k = 0; k < FP_VEC; ++k) b[k] = fp_gain1(b[k], alpha, beta);
        *(uint4*)(dst + i) = v;
    } else {
        for (; i < n; ++i) dst[i] = fp_gain1(src[i], alpha, beta);
    }
}

// 16 pixels (48 bytes, three 16-byte words) per thread.
FP_KERNEL fp_gray(fp_band band) {
    FP_FLAT(band)
    u64 i = fp_thread() * 48;
    if (i + 48 <= n) {
        uint4 w[3];
        w[0] = *(const uint4*)(src + i);
        w[1] = *(const uint4*)(src + i + 16);
        w[2] = *(const uint4*)(src + i + 32);
        u8* p = (u8*)w;
#pragma unroll
        for (int k = 0; k < 48; k += 3) {
            unsigned y = (p[k] * FP_GRAY_B + p[k + 1] * FP_GRAY_G + p[k + 2] * FP_GRAY_R + FP_GRAY_HALF) >> FP_GRAY_SHIFT;
            p[k] = p[k + 1] = p[k + 2] = (u8)y;
        }
        *(uint4*)(dst + i) = w[0];
        *(uint4*)(dst + i + 16) = w[1];
        *(uint4*)(dst + i + 32) = w[2];
    } else {
        for (; i + 3 <= n; i += 3) {
            unsigned y = (src[i] * FP_GRAY_B + src[i + 1] * FP_GRAY_G + src[i + 2] * FP_GRAY_R + FP_GRAY_HALF) >> FP_GRAY_SHIFT;
            dst[i] = dst[i + 1] = dst[i + 2] = (u8)y;
        }
    }
}
