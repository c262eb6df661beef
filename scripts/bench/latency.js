// Glass-to-glass latency in the browser view (scripts/bench/live.sh): while the page plays
// input "0" (or the picture, for Motion JPEG) the way WAY (framepipe.watch), for SECONDS reads the wall clock that
// scripts/bench/clock_source.py burned into each frame when the frame is presented
// (requestVideoFrameCallback's expected display time; for Motion JPEG, the animation frame
// that first shows it), against the page's clock. Returns p50, p99 and the frames read.
(async (way, seconds) => {
  const via = framepipe.via;
  const c = document.createElement("canvas");
  c.width = 640; c.height = 40;
  const g = c.getContext("2d", {willReadFrequently: true});
  const decode = el => {
    g.drawImage(el, 0, 0);
    const d = g.getImageData(0, 0, 640, 40).data;
    let ms = 0;
    for (let b = 0; b < 24; b++) ms = ms * 2 + (d[(20 * 640 + b * 26 + 13) * 4] > 128 ? 1 : 0);
    return ms;
  };
  const lat = [], end = performance.now() + seconds * 1000;
  const took = (ms, shown) => {
    let l = (Math.floor(performance.timeOrigin + shown) % (1 << 24)) - ms;
    if (l < 0) l += 1 << 24;
    if (l < 10000) lat.push(l);
  };
  const video = document.getElementById("live"), img = document.getElementById("view");
  await new Promise(ok => {
    setTimeout(ok, seconds * 1000 + 1000); // a picture that stops still ends the count
    if (via === "Motion JPEG") {
      let last = -1;
      const tick = t => {
        const ms = decode(img);
        if (ms !== last) { last = ms; took(ms, t); }
        if (performance.now() < end) requestAnimationFrame(tick); else ok();
      };
      requestAnimationFrame(tick);
    } else {
      const cb = (now, meta) => {
        took(decode(video), meta.expectedDisplayTime);
        if (performance.now() < end) video.requestVideoFrameCallback(cb); else ok();
      };
      video.requestVideoFrameCallback(cb);
    }
  });
  lat.sort((a, b) => a - b);
  const p = q => lat[Math.min(lat.length - 1, Math.floor(q * lat.length))];
  return JSON.stringify({way, via, frames: lat.length, p50: p(0.5), p99: p(0.99)});
})(WAY, SECONDS)
