#!/usr/bin/env python3
"""Drives a page in headless Chromium over the DevTools protocol, for tests.

    cdp.py DEVTOOLS_PORT STEP...

Steps, in order: `eval:JS` (runs JS in the page, prints its value as JSON), `shot:FILE.png`
(a screenshot of the page), `size:WxH` (the page's viewport, as a window that size would
give it), `sleep:SECONDS`. Waits up to 20 s for the page to be there.
"""
import base64
import json
import sys
import time
import urllib.request

import websocket


def page_socket(port):
    deadline = time.time() + 20
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json", timeout=2) as r:
                pages = [t for t in json.load(r) if t.get("type") == "page"]
            if pages:
                return websocket.create_connection(pages[0]["webSocketDebuggerUrl"], timeout=20)
        except OSError:
            pass
        if time.time() > deadline:
            sys.exit("no page in Chromium within 20 s")
        time.sleep(0.2)


def main():
    port, steps = sys.argv[1], sys.argv[2:]
    ws = page_socket(port)
    ids = iter(range(1, 1 << 30))

    def call(method, **params):
        i = next(ids)
        ws.send(json.dumps({"id": i, "method": method, "params": params}))
        while True:
            m = json.loads(ws.recv())
            if m.get("id") == i:
                if "error" in m:
                    sys.exit(f"{method}: {m['error']}")
                return m.get("result", {})

    for step in steps:
        kind, _, arg = step.partition(":")
        if kind == "eval":
            r = call("Runtime.evaluate", expression=arg, awaitPromise=True, returnByValue=True)
            print(json.dumps(r.get("result", {}).get("value")), flush=True)
        elif kind == "shot":
            r = call("Page.captureScreenshot", format="png")
            with open(arg, "wb") as f:
                f.write(base64.b64decode(r["data"]))
        elif kind == "size":
            w, h = (int(v) for v in arg.split("x"))
            call("Emulation.setDeviceMetricsOverride", width=w, height=h, deviceScaleFactor=1, mobile=False)
        elif kind == "sleep":
            time.sleep(float(arg))
        else:
            sys.exit(f"unknown step {step!r}")


main()
