// text.cu: the text and timestamp filters (filter/text.rs): one frame's text over a band,
// each pixel by `Placed::shade`'s arithmetic, so that both backends give the same bytes.
// The glyphs are font8x8's 8x8 bitmaps (`atlas`: 8 bytes a glyph, bit i of a row its i-th
// pixel from the left), each font pixel a `scale` x `scale` square; the box reaches
// 2 * scale pixels past the text and darkens by FP_TEXT_BOX_DARKEN / 256.

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

FP_KERNEL fp_text_draw(fp_band band, const u8* __restrict__ atlas, fp_text t) {
    FP_PIXEL(band, x, y);
    const long long at = ((long long)(y - band.row0) * band.width + x) * 3;
    u8 v[3] = {band.src[at], band.src[at + 1], band.src[at + 2]};
    const int pad = 2 * t.scale, cell = 8 * t.scale;
    const int w = t.cols * cell, h = cell;
    const int dx = x - t.x0, dy = y - t.y0;
    if (dx >= -pad && dy >= -pad && dx < w + pad && dy < h + pad) {
        bool lit = false;
        if (dx >= 0 && dy >= 0 && dx < w && dy < h) {
            int glyph = t.chars[dx / cell];
            int gx = (dx % cell) / t.scale;
            lit = (atlas[glyph * 8 + dy / t.scale] >> gx) & 1;
        }
        if (lit) {
            v[0] = t.b; v[1] = t.g; v[2] = t.r;
        } else if (t.boxed) {
            for (int c = 0; c < 3; ++c)
                v[c] = (u8)((v[c] * (256u - FP_TEXT_BOX_DARKEN) + 128u) >> 8);
        }
    }
    band.dst[at] = v[0]; band.dst[at + 1] = v[1]; band.dst[at + 2] = v[2];
}
