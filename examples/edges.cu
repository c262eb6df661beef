// Coloured edges: the Sobel gradient's size per channel, scaled by `strength`, over a
// darkened copy of the picture (`keep` of it, 0 to 1).
//   framepipe --filter kernel:examples/edges.cu,radius=1,strength=0.5,keep=0.3
// Save the file while framepipe runs and the new version takes over at the next frame.
#include "framepipe.cuh"

FP_KERNEL edges(fp_band band, float strength, float keep) {
    FP_PIXEL(band, x, y);
    int out[3];
    for (int c = 0; c < 3; ++c) {
        // Sobel in x and y: the 3x3 neighbourhood, so radius=1.
        int gx = fp_get_c(band, x + 1, y - 1, c) + 2 * fp_get_c(band, x + 1, y, c) + fp_get_c(band, x + 1, y + 1, c)
               - fp_get_c(band, x - 1, y - 1, c) - 2 * fp_get_c(band, x - 1, y, c) - fp_get_c(band, x - 1, y + 1, c);
        int gy = fp_get_c(band, x - 1, y + 1, c) + 2 * fp_get_c(band, x, y + 1, c) + fp_get_c(band, x + 1, y + 1, c)
               - fp_get_c(band, x - 1, y - 1, c) - 2 * fp_get_c(band, x, y - 1, c) - fp_get_c(band, x + 1, y - 1, c);
        float v = keep * fp_get_c(band, x, y, c) + strength * (abs(gx) + abs(gy));
        out[c] = __float2int_rn(v);
    }
    fp_put(band, x, y, fp_make(out[0], out[1], out[2]));
}
