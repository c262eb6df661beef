#!/usr/bin/env python3
"""An independent WHEP client (PyPI's aiortc), for tests.

    whep_client.py URL SECONDS [CODEC|audio]

Offers to receive video (ICE gathered first: no trickle), POSTs the offer to URL
(`application/sdp`), takes the answer, receives for SECONDS, then DELETEs the session.
Prints one JSON object: the answer's status, the frames received, their size, and the MD5
of each frame's I420 planes (as ffmpeg's framemd5 hashes a decoded frame). CODEC (say
VP8) offers only that codec.
"""
import asyncio
import hashlib
import json
import sys
import urllib.parse
import urllib.request

from aiortc import RTCPeerConnection, RTCRtpReceiver, RTCSessionDescription


def http(method, url, body=None):
    req = urllib.request.Request(url, data=body, method=method)
    if body is not None:
        req.add_header("Content-Type", "application/sdp")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, {k.lower(): v for k, v in r.headers.items()}, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, {k.lower(): v for k, v in e.headers.items()}, e.read().decode()


def i420_md5(frame):
    """The MD5 of a decoded frame's planes, rows without their padding (framemd5's)."""
    frame = frame.reformat(format="yuv420p")
    md5 = hashlib.md5()
    for plane in frame.planes:
        data = bytes(plane)
        for row in range(plane.height):
            md5.update(data[row * plane.line_size:row * plane.line_size + plane.width])
    return md5.hexdigest()


async def main(url, seconds, codec):
    pc = RTCPeerConnection()
    transceiver = pc.addTransceiver("video", direction="recvonly")
    sound = {"frames": 0, "samples": 0, "rate": 0}
    if codec == "audio":
        pc.addTransceiver("audio", direction="recvonly")
        codec = None
    if codec:
        codecs = RTCRtpReceiver.getCapabilities("video").codecs
        transceiver.setCodecPreferences([c for c in codecs if c.mimeType.lower() == "video/" + codec.lower()])
    frames = []
    done = asyncio.Event()

    @pc.on("track")
    def on_track(track):
        async def hear():
            while True:
                try:
                    frame = await track.recv()
                except Exception:
                    return
                sound["frames"] += 1
                sound["samples"] += frame.samples
                sound["rate"] = frame.sample_rate

        if track.kind == "audio":
            asyncio.ensure_future(hear())
            return

        async def read():
            while True:
                try:
                    frame = await track.recv()
                except Exception:
                    return
                frames.append((frame.width, frame.height, i420_md5(frame)))

        asyncio.ensure_future(read())

    await pc.setLocalDescription(await pc.createOffer())
    status, headers, answer = await asyncio.get_running_loop().run_in_executor(
        None, http, "POST", url, pc.localDescription.sdp.encode()
    )
    out = {"status": status}
    if status != 201:
        out["said"] = answer
        print(json.dumps(out))
        await pc.close()
        return
    await pc.setRemoteDescription(RTCSessionDescription(sdp=answer, type="answer"))
    try:
        await asyncio.wait_for(done.wait(), seconds)
    except asyncio.TimeoutError:
        pass
    location = urllib.parse.urljoin(url, headers.get("location", ""))
    parts = urllib.parse.urlsplit(url)
    if parts.query:
        location += "?" + parts.query
    out["deleted"] = http("DELETE", location)[0]
    out["frames"] = len(frames)
    out["sizes"] = sorted({f"{w}x{h}" for w, h, _ in frames})
    out["md5"] = [m for _, _, m in frames]
    out["sound"] = sound
    await pc.close()
    print(json.dumps(out))


asyncio.run(main(sys.argv[1], float(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else None))
