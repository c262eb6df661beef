// A 3x3 box blur: the rounded mean of the pixel and its eight neighbours.
// It reads one row above and below, so it declares radius=1:
//   framepipe --filter kernel:examples/box3.cu,radius=1
// Same output as the built-in `blur:3`, bit for bit (tests/gpu.rs checks it). Neighbours
// past the frame's edge come from fp_get's border rule (OpenCV's BORDER_REFLECT_101).
#include "framepipe.cuh"

FP_KERNEL box3(fp_band band) {
    FP_PIXEL(band, x, y);
    int b = 0, g = 0, r = 0;
    for (int dy = -1; dy <= 1; ++dy) {
        for (int dx = -1; dx <= 1; ++dx) {
            fp_bgr v = fp_get(band, x + dx, y + dy);
            b += v.b; g += v.g; r += v.r;
        }
    }
    fp_put(band, x, y, fp_make((b + 4) / 9, (g + 4) / 9, (r + 4) / 9));
}
