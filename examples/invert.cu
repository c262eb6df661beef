// The smallest framepipe kernel: every channel becomes 255 - v.
// Run: framepipe --filter kernel:examples/invert.cu
// Same output as the built-in `invert`, bit for bit (tests/gpu.rs checks it).
#include "framepipe.cuh"

FP_KERNEL invert(fp_band band) {
    FP_PIXEL(band, x, y);  // this thread's pixel, in frame coordinates
    fp_bgr v = fp_get(band, x, y);
    fp_put(band, x, y, fp_make(255 - v.b, 255 - v.g, 255 - v.r));
}
