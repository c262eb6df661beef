#!/usr/bin/env python3
"""N WHEP viewers of one address at once (PyPI's aiortc), for scripts/bench/live.sh.

    whep_viewers.py URL N SECONDS

Each offers to receive video (one after another), takes its answer and holds SECONDS, then
ends its session (DELETE); prints one JSON object:
the sessions answered 201, and the RTP packets they received in all (their inbound-rtp
statistics).
"""
import asyncio
import json
import sys
import urllib.parse
import urllib.request

from aiortc import RTCPeerConnection, RTCSessionDescription


def post(url, sdp):
    req = urllib.request.Request(url, data=sdp.encode(), method="POST")
    req.add_header("Content-Type", "application/sdp")
    with urllib.request.urlopen(req, timeout=10) as r:
        return r.status, r.headers.get("Location"), r.read().decode()


def delete(url, location):
    req = urllib.request.Request(urllib.parse.urljoin(url, location), method="DELETE")
    with urllib.request.urlopen(req, timeout=10) as r:
        return r.status


async def viewer(url):
    pc = RTCPeerConnection()
    pc.addTransceiver("video", direction="recvonly")
    await pc.setLocalDescription(await pc.createOffer())
    status, location, answer = await asyncio.get_running_loop().run_in_executor(None, post, url, pc.localDescription.sdp)
    await pc.setRemoteDescription(RTCSessionDescription(sdp=answer, type="answer"))
    return status, location, pc


async def main(url, n, seconds):
    viewers = [await viewer(url) for _ in range(n)]
    await asyncio.sleep(seconds)
    packets = 0
    for _, _, pc in viewers:
        for s in (await pc.getStats()).values():
            if s.type == "inbound-rtp":
                packets += s.packetsReceived
    print(json.dumps({"answered": sum(1 for s, _, _ in viewers if s == 201), "packets": packets}), flush=True)
    for _, location, pc in viewers:
        delete(url, location)
        await pc.close()


asyncio.run(main(sys.argv[1], int(sys.argv[2]), float(sys.argv[3])))
