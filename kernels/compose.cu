// compose.cu: the mosaic of a run of several inputs, composed on the device. Each band of a
// processed frame (packed BGR, in its band buffer) writes the rows of its input's tile that
// sample it: the frame scaled by nearest neighbour into its place in the tile (pixel centres:
// destination pixel i of m samples source pixel min((2i + 1) * n / 2m, n - 1) of n, the
// formula of `tiles::nearest` on the CPU), and black around it (the letterbox). The tile rows
// above the picture belong to the band holding the frame's first row, those below to the band
// holding its last, so a frame's bands write every row of its tile exactly once.

#include "framepipe.cuh"

// One band's part of a tile (`tiles::Scaler` and `backend::cuda` fill it; `Tile` in
// kernels.rs is its Rust twin).
struct fp_tile {
    u64 canvas;        // the mosaic's first byte (packed BGR)
    int canvas_width;  // the mosaic's width, pixels
    int tile_x, tile_y, tile_w;         // the tile's place and width in the mosaic
    int pic_x, pic_y, pic_w, pic_h;     // the picture's place and size in its tile
    int src_w, src_h;                   // the frame's size
    int first, rows;                    // the tile rows this band writes
    int band_row0;                      // frame row of the band buffer's first row
};

extern "C" __global__ void fp_compose(const u8* __restrict__ band, fp_tile t) {
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int r = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= t.tile_w || r >= t.rows) return;
    const int y = t.first + r;
    u8* d = (u8*)t.canvas + ((long long)(t.tile_y + y) * t.canvas_width + t.tile_x + x) * 3;
    const int px = x - t.pic_x, py = y - t.pic_y;
    if (px < 0 || px >= t.pic_w || py < 0 || py >= t.pic_h) {
        d[0] = 0;
        d[1] = 0;
        d[2] = 0;
        return;
    }
    const long long sx = min((2LL * px + 1) * t.src_w / (2LL * t.pic_w), (long long)t.src_w - 1);
    const long long sy = min((2LL * py + 1) * t.src_h / (2LL * t.pic_h), (long long)t.src_h - 1);
    const u8* s = band + ((sy - t.band_row0) * t.src_w + sx) * 3;
    d[0] = s[0];
    d[1] = s[1];
    d[2] = s[2];
}
