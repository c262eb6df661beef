// text.cu: the text and timestamp filters (filter/text.rs): one frame's text over a band,
// each pixel by `Placed::shade`'s arithmetic, so that both backends give the same bytes.
// The glyphs are font8x8's 8x8 bitmaps (`atlas`: 8 bytes a glyph, bit i of a row its i-th
// pixel from the left), each font pixel a `scale` x `scale` square; the box reaches
// 2 * scale pixels past the text and darkens by FP_TEXT_BOX_DARKEN / 256. `fp_text_planes`
// draws the same text on a YUV frame's planes (`pixel::planes`' arithmetic).

#include "framepipe.cuh"

#define FP_TEXT_MAX 96

// One frame's text at its place (`kernels::TextArgs` is its Rust twin).
struct fp_text {
    int x0, y0;   // the text's top-left pixel, frame coordinates
    int scale;    // picture pixels a font pixel
    int cols;     // characters
    u8 b, g, r;   // the glyphs' colour
    u8 boxed;     // over a darkened box
    u8 chars[FP_TEXT_MAX];  // glyph indices (character - ' ')
};

// Whether frame pixel (x, y) is a stroke of `t` (`Placed::ink`).
__device__ __forceinline__ bool fp_text_ink(const u8* __restrict__ atlas, const fp_text& t,
                                            int x, int y) {
    const int cell = 8 * t.scale;
    const int dx = x - t.x0, dy = y - t.y0;
    if (dx < 0 || dy < 0 || dx >= t.cols * cell || dy >= cell) return false;
    const int glyph = t.chars[dx / cell];
    const int gx = (dx % cell) / t.scale;
    return (atlas[glyph * 8 + dy / t.scale] >> gx) & 1;
}

FP_KERNEL fp_text_draw(fp_band band, const u8* __restrict__ atlas, fp_text t) {
    FP_PIXEL(band, x, y);
    const long long at = ((long long)(y - band.row0) * band.width + x) * 3;
    u8 v[3] = {band.src[at], band.src[at + 1], band.src[at + 2]};
    const int pad = 2 * t.scale, cell = 8 * t.scale;
    const int w = t.cols * cell, h = cell;
    const int dx = x - t.x0, dy = y - t.y0;
    if (dx >= -pad && dy >= -pad && dx < w + pad && dy < h + pad) {
        if (fp_text_ink(atlas, t, x, y)) {
            v[0] = t.b; v[1] = t.g; v[2] = t.r;
        } else if (t.boxed) {
            for (int c = 0; c < 3; ++c)
                v[c] = (u8)((v[c] * (256u - FP_TEXT_BOX_DARKEN) + 128u) >> 8);
        }
    }
    band.dst[at] = v[0]; band.dst[at + 1] = v[1]; band.dst[at + 2] = v[2];
}

// A sample darkened by the box towards `zero` (16 for Y, 128 for U and V).
__device__ __forceinline__ u8 fp_text_darken(u8 v, int zero) {
    const int d = ((int)v - zero) * (256 - FP_TEXT_BOX_DARKEN);
    return (u8)min(max(zero + ((d + 128) >> 8), 0), 255);
}

// `t` drawn in place on a `w` x `h` frame of planes (`chroma`: 0 gray, 1 I420, 2 NV12), one
// thread a pixel of the part of the frame the text and its box cover (`cx0`, `cy0` its
// first pixel, `cw` x `ch`): a stroke takes the colour's Y (`yuv`: Y, U, V), and its U and
// V where the pixel is a chroma sample's top-left one; the box darkens the rest.
FP_KERNEL fp_text_planes(u8* __restrict__ frame, int w, int h, int chroma, int cx0, int cy0,
                         int cw, int ch, const u8* __restrict__ atlas, fp_text t, u32 yuv) {
    const int x = cx0 + blockIdx.x * blockDim.x + threadIdx.x;
    const int y = cy0 + blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= cx0 + cw || y >= cy0 + ch) return;
    const bool ink = fp_text_ink(atlas, t, x, y);
    u8* luma = frame + (long long)y * w + x;
    if (ink) *luma = yuv & 0xff;
    else if (t.boxed) *luma = fp_text_darken(*luma, 16);
    if (chroma == 0 || (x & 1) || (y & 1) || (!ink && !t.boxed)) return;
    const int hw = w / 2, hh = h / 2;
    u8* planes = frame + (long long)w * h;
    const long long at = ((long long)(y / 2) * hw + x / 2) * (chroma == 2 ? 2 : 1);
    const long long v_at = chroma == 2 ? 1 : (long long)hw * hh;
    if (ink) {
        planes[at] = (yuv >> 8) & 0xff;
        planes[at + v_at] = (yuv >> 16) & 0xff;
    } else {
        planes[at] = fp_text_darken(planes[at], 128);
        planes[at + v_at] = fp_text_darken(planes[at + v_at], 128);
    }
}
