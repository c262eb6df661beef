"""deploy/'s manifests played with the real image (scripts/image.sh test calls this).

The pods come from `standin.py` (the controllers' and kubelet's stand-in) and are run by
`podman kube play`. The camera list is the test's own (files on the claims, UDP streams sent
from this machine to the pods over podman's bridge): nothing is sent to the ConfigMap's
10.0.0.x cameras. Each check prints one line; any failure ends the test with exit 1.

    python3 scripts/image/pods_test.py IMAGE WORKDIR
"""

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import standin  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOKEN = "image-test-token-0123456789abcdef"
FIRST_PORT = 18380
LIVE = {"live-1": 5001, "live-2": 5002, "live-3": 5003, "live-4": 5004}
senders = {}


def check(ok, what):
    print(("ok    " if ok else "FAIL  ") + what, flush=True)
    if not ok:
        raise SystemExit(1)


def sh(*args, **kw):
    return subprocess.run(args, check=True, capture_output=True, text=True, **kw).stdout


def media(path, seconds, size="320x180", rate=10):
    sh("ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i",
       f"testsrc2=s={size}:r={rate}:d={seconds}", "-c:v", "libx264", "-g", str(rate),
       "-bf", "0", "-pix_fmt", "yuv420p", path)


def get(port, path, token=False):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}")
    if token:
        req.add_header("Authorization", f"Bearer {TOKEN}")
    try:
        with urllib.request.urlopen(req, timeout=3) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, ""
    except OSError:
        return None, ""


def inputs_of(port):
    """The inputs a pod's /metrics lists as up."""
    status, text = get(port, "/metrics", token=True)
    if status != 200:
        return None
    return set(re.findall(r'^framepipe_input_up\{input="([^"]+)"\} 1', text, re.M))


def flat(seen):
    """Every pod's inputs in one sorted list (a pod that did not answer adds none)."""
    return sorted(n for s in seen or [] if s for n in s)


def covered(pods, expected, within):
    """Waits until the pods' inputs are `expected`, each in one pod only."""
    seen = None
    end = time.time() + within
    while time.time() < end:
        seen = [inputs_of(FIRST_PORT + i) for i in range(pods)]
        if None not in seen and flat(seen) == sorted(expected):
            return seen
        time.sleep(0.5)
    return seen


def ip_of(pod):
    infra = sh("podman", "pod", "inspect", pod, "--format", "{{.InfraContainerID}}").strip()
    return sh("podman", "inspect", infra, "--format",
              "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}").strip()


def send_live(name, ips, clip):
    """A live camera: the clip looped in real time to every pod's UDP port for it (only the
    pod whose shard holds the camera listens), as `senders[name]`."""
    port = LIVE[name]
    outs = "|".join(f"[f=mpegts:onfail=ignore]udp://{ip}:{port}?pkt_size=1316" for ip in ips)
    senders[name] = (ips, subprocess.Popen(
        ["ffmpeg", "-v", "quiet", "-re", "-stream_loop", "-1", "-i", clip, "-map", "0",
         "-c", "copy", "-f", "tee", outs], stdin=subprocess.DEVNULL))


def stop_senders():
    for _, s in senders.values():
        s.send_signal(signal.SIGINT)
        s.wait()


def aim_again(names, clip):
    """The senders sent to the pods' addresses again: a pod started again has a new one
    (in a cluster too; real cameras are pulled, so only this test's pushing cares)."""
    ips = [ip_of(n) for n in names]
    for name, (before, s) in list(senders.items()):
        if before != ips:
            s.send_signal(signal.SIGINT)
            s.wait()
            send_live(name, ips, clip)


def camera_list(names, files):
    lines = ["# The image test's cameras: files on the claim, streams from this machine."]
    lines += [f"{n} = /recordings/media/{n}.mp4" for n in files]
    lines += [f"{n} = udp://0.0.0.0:{LIVE[n]}" for n in names]
    return "\n".join(lines) + "\n"


def whole(path):
    """Whether a recorded segment decodes without an error; its frames."""
    out = subprocess.run(["ffmpeg", "-v", "error", "-i", path, "-f", "framemd5", "-"],
                         capture_output=True, text=True)
    frames = sum(1 for l in out.stdout.splitlines() if l and not l.startswith("#"))
    return out.returncode == 0 and not out.stderr.strip(), frames


def segments(work):
    found = []
    for dirpath, _, files in os.walk(os.path.join(work, "claims")):
        if "/media" in dirpath:
            continue
        found += [os.path.join(dirpath, f) for f in files if f.endswith(".ts")]
    return found


def wall(image, work):
    kinds = standin.documents(os.path.join(ROOT, "deploy/wall.yaml"))
    config = os.path.join(work, "cameras")
    files = ["file-a", "file-b"]
    first = ["live-1", "live-2", "live-3"]
    standin.write_config_map(config, {"cameras.txt": camera_list(first, files)})
    secrets = {("framepipe-serve-token", "token"): TOKEN}
    pods = standin.stateful_set_pods(kinds["StatefulSet"][0], work, image, config, secrets,
                                     FIRST_PORT)
    clips = os.path.join(work, "clips")
    os.makedirs(clips, exist_ok=True)
    media(os.path.join(clips, "file.mp4"), 120)
    media(os.path.join(clips, "live.ts"), 10)
    for p in pods:
        claim = next(v["hostPath"]["path"] for v in p["spec"]["volumes"]
                     if v["name"] == "recordings")
        os.makedirs(os.path.join(claim, "media"), exist_ok=True)
        for n in files:
            sh("cp", os.path.join(clips, "file.mp4"), os.path.join(claim, "media", f"{n}.mp4"))
    manifest = os.path.join(work, "wall-pods.yaml")
    with open(manifest, "w", encoding="utf-8") as f:
        standin.yaml.safe_dump_all(pods, f)
    sh("podman", "kube", "play", manifest)
    try:
        wall_checks(pods, work, config, files, first, clips)
    except SystemExit:
        for p in pods:
            name = p["metadata"]["name"]
            said = subprocess.run(["podman", "logs", f"{name}-framepipe"], capture_output=True,
                                  text=True)
            said = [l for l in (said.stdout + said.stderr).splitlines() if "level=" not in l]
            print(f"--- {name}'s last lines:\n" + "\n".join(said[-12:]))
        raise
    finally:
        subprocess.run(["podman", "kube", "down", manifest], capture_output=True)
        stop_senders()
    recorded = segments(work)
    bad = [(p, whole(p)) for p in recorded if not whole(p)[0] or whole(p)[1] == 0]
    check(recorded and not bad,
          f"every closed segment decodes whole ({len(recorded)} segments; bad: {bad})")


def wall_checks(pods, work, config, files, first, clips):
    names = [p["metadata"]["name"] for p in pods]
    ips = [ip_of(n) for n in names]
    for n in first:
        send_live(n, ips, os.path.join(clips, "live.ts"))
    for i, name in enumerate(names):
        status = None
        end = time.time() + 20
        while status != 200 and time.time() < end:
            status, _ = get(FIRST_PORT + i, "/healthz")
            time.sleep(0.3)
        check(status == 200, f"{name}: /healthz answers 200 on 127.0.0.1:{FIRST_PORT + i}")
        status, _ = get(FIRST_PORT + i, "/metrics")
        check(status == 401, f"{name}: /metrics refuses a request without the token ({status})")
    seen = covered(len(pods), files + first, 30)
    check(flat(seen) == sorted(files + first),
          f"each camera runs in one pod only, every one covered: {seen}")
    for i, name in enumerate(names):
        logs = subprocess.run(["podman", "logs", f"{name}-framepipe"], capture_output=True,
                              text=True).stderr
        check(f"shard {i + 1}/3" in logs or f"shard {i}/" in logs,
              f"{name}: took its shard from its host name")
    time.sleep(3)
    seen = covered(len(pods), files + first, 10)
    owners = {os.stat(p).st_uid for p in segments(work) + parts(work)}
    check(owners == {10001}, f"recordings are written as uid 10001 on the claims ({owners})")
    # A pod holding a live camera killed with SIGKILL and started again.
    victim = next(i for i, s in enumerate(seen) if s & {"live-1", "live-2"})
    name = names[victim]
    before = set(parts(work))
    sh("podman", "kill", "--signal", "KILL", f"{name}-framepipe")
    time.sleep(1)
    subprocess.run(["podman", "start", f"{name}-framepipe"], capture_output=True)
    aim_again(names, os.path.join(clips, "live.ts"))
    again = covered(len(pods), files + first, 30)
    check(again and again[victim] == seen[victim],
          f"{name}, killed with SIGKILL and started again, resumes {sorted(seen[victim])}")
    time.sleep(3)
    check(set(parts(work)) - before, f"{name}: new segments are being written after the restart")
    # The ConfigMap edited: live-3 gone, live-4 new; the kubelet swaps ..data.
    second = ["live-1", "live-2", "live-4"]
    send_live("live-4", [ip_of(n) for n in names], os.path.join(clips, "live.ts"))
    standin.write_config_map(config, {"cameras.txt": camera_list(second, files)})
    seen = covered(len(pods), files + second, 30)
    check(flat(seen) == sorted(files + second),
          f"the ConfigMap's swap changes the inputs while the pods run: {seen}")


def parts(work):
    found = []
    for dirpath, _, files in os.walk(os.path.join(work, "claims")):
        found += [os.path.join(dirpath, f) for f in files if ".part" in f]
    return found


def batch(image, work):
    kinds = standin.documents(os.path.join(ROOT, "deploy/batch.yaml"))
    config = os.path.join(work, "files")
    data = standin.owned_folder(os.path.join(work, "data"), 0, 10001)
    os.makedirs(os.path.join(data, "in"), exist_ok=True)
    standin.owned_folder(os.path.join(data, "out"), 10001, 10001)
    names = [f"day-{k}" for k in range(1, 7)]
    for n in names:
        media(os.path.join(data, "in", f"{n}.mp4"), 2, size="160x90", rate=25)
    listing = "".join(f"{n} = /data/in/{n}.mp4\n" for n in names)
    standin.write_config_map(config, {"files.txt": listing})
    pods = standin.job_pods(kinds["Job"][0], work, image, config, data)
    manifest = os.path.join(work, "batch-pods.yaml")
    with open(manifest, "w", encoding="utf-8") as f:
        standin.yaml.safe_dump_all(pods, f)
    sh("podman", "kube", "play", manifest)
    try:
        codes = [sh("podman", "wait", f"{p['metadata']['name']}-framepipe").strip()
                 for p in pods]
        check(codes == ["0"] * len(pods), f"the Job's {len(pods)} pods exit 0 ({codes})")
        written = sorted(os.listdir(os.path.join(data, "out")))
        check(written == sorted(f"{n}.mp4" for n in names),
              f"every file is written once, by the index that holds it ({written})")
        frames = [whole(os.path.join(data, "out", f)) for f in written]
        check(all(ok and n == 50 for ok, n in frames), f"each output decodes whole: {frames}")
    finally:
        subprocess.run(["podman", "kube", "down", manifest], capture_output=True)


def main():
    image, work = sys.argv[1], sys.argv[2]
    started = time.time()
    batch(image, os.path.join(work, "batch"))
    wall(image, os.path.join(work, "wall"))
    print(json.dumps({"pods_seconds": round(time.time() - started, 1)}))


if __name__ == "__main__":
    main()
