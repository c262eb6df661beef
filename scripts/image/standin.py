"""The test's stand-in for Kubernetes' controllers and kubelet: NOT the product.

No registry here offers an API server or a kubelet, and `podman kube play` takes Pods but no
StatefulSet or Job. So this does, for `scripts/image.sh test` only, what a cluster would do
with `deploy/wall.yaml` and `deploy/batch.yaml`, and nothing more:

- the StatefulSet controller: one Pod a replica, named NAME-ORDINAL, its host name the same
  (framepipe takes its shard from the `-ORDINAL` ending), a claim a pod from the
  volumeClaimTemplates;
- the Job controller (Indexed): one Pod an index, `JOB_COMPLETION_INDEX` in its environment;
- the kubelet: a ConfigMap volume laid out as the kubelet lays it out (the files are links
  through `..data`, itself a link to a timestamped folder, swapped by renaming a new link over
  it), a Secret's key resolved into the environment, an emptyDir a folder of the pod's own,
  a claim a folder owned as `fsGroup` says (what a provisioner and the kubelet give);
- the Service: each pod's `http` port published on loopback, at a port of its own (podman
  would publish it on every address).

Everything else of a pod (image, args, securityContext, probes' ports) is the manifest's as
written. The pods are handed to `podman kube play` as plain Pod documents.
"""

import copy
import os
import time

import yaml


def documents(path):
    """The manifest's documents, by kind."""
    with open(path, encoding="utf-8") as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    by_kind = {}
    for d in docs:
        by_kind.setdefault(d["kind"], []).append(d)
    return by_kind


def write_config_map(folder, files):
    """The kubelet's layout of a ConfigMap volume in `folder` holding `data` (file -> text),
    made or updated atomically: a new timestamped folder, a `..data_tmp` link to it renamed
    over `..data`, each file a link through `..data`."""
    os.makedirs(folder, exist_ok=True)
    stamp = time.strftime("..%Y_%m_%d_%H_%M_%S.") + str(time.monotonic_ns())
    new = os.path.join(folder, stamp)
    os.mkdir(new)
    for name, text in files.items():
        with open(os.path.join(new, name), "w", encoding="utf-8") as f:
            f.write(text)
    os.chmod(new, 0o755)
    tmp = os.path.join(folder, "..data_tmp")
    if os.path.lexists(tmp):
        os.unlink(tmp)
    os.symlink(stamp, tmp)
    data = os.path.join(folder, "..data")
    old = os.path.realpath(data) if os.path.lexists(data) else None
    os.rename(tmp, os.path.join(folder, "..data"))
    for name in files:
        link = os.path.join(folder, name)
        if not os.path.lexists(link):
            os.symlink(os.path.join("..data", name), link)
    if old and os.path.isdir(old) and os.path.basename(old).startswith(".."):
        for name in os.listdir(old):
            os.unlink(os.path.join(old, name))
        os.rmdir(old)


def owned_folder(path, uid, gid):
    """A folder as a claim or an emptyDir is given to a pod with `fsGroup`: the group's,
    group-writable, set-gid."""
    os.makedirs(path, exist_ok=True)
    os.chown(path, uid, gid)
    os.chmod(path, 0o2775)
    return path


def pod_of(template, name, volumes_at, env=None, secrets=None, host_port=None):
    """A Pod from a pod template: `volumes_at` maps each volume's name to a host folder;
    `env` is added to every container, `secrets` resolves secretKeyRef (name, key) -> value,
    `host_port` publishes the `http` port on loopback."""
    spec = copy.deepcopy(template["spec"])
    spec.pop("affinity", None)  # one node here
    spec["hostname"] = name
    for v in spec.get("volumes", []):
        path = volumes_at[v["name"]]
        for key in ("configMap", "emptyDir", "persistentVolumeClaim"):
            v.pop(key, None)
        v["hostPath"] = {"path": path, "type": "Directory"}
    for c in spec["containers"]:
        c["env"] = [resolved(e, secrets or {}) for e in c.get("env", [])]
        c["env"] += [{"name": k, "value": str(v)} for k, v in (env or {}).items()]
        for p in c.get("ports", []):
            if host_port is not None and p.get("name") == "http":
                p["hostPort"] = host_port
                p["hostIP"] = "127.0.0.1"
    labels = dict(template.get("metadata", {}).get("labels", {}))
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": spec,
    }


def resolved(entry, secrets):
    """An env entry with a Secret's key resolved to its value, as the kubelet does."""
    ref = entry.get("valueFrom", {}).get("secretKeyRef")
    if not ref:
        return entry
    return {"name": entry["name"], "value": secrets[(ref["name"], ref["key"])]}


def template_of(doc, image):
    """A controller's pod template with `image`, and its user and fsGroup."""
    template = copy.deepcopy(doc["spec"]["template"])
    for c in template["spec"]["containers"]:
        c["image"] = image
    context = template["spec"]["securityContext"]
    return template, context["runAsUser"], context["fsGroup"]


def stateful_set_pods(doc, root, image, config_dir, secrets, first_port):
    """The StatefulSet's pods (module doc), their claims and emptyDirs under `root`."""
    s = doc["spec"]
    template, uid, gid = template_of(doc, image)
    pods = []
    for i in range(s["replicas"]):
        name = f"{doc['metadata']['name']}-{i}"
        volumes = {}
        for v in template["spec"].get("volumes", []):
            if "configMap" in v:
                volumes[v["name"]] = config_dir
            elif "emptyDir" in v:
                volumes[v["name"]] = owned_folder(os.path.join(root, name, v["name"]), uid, gid)
        for claim in s.get("volumeClaimTemplates", []):
            claim_name = claim["metadata"]["name"]
            path = os.path.join(root, "claims", f"{claim_name}-{name}")
            volumes[claim_name] = owned_folder(path, 0, gid)
            template_volumes = template["spec"].setdefault("volumes", [])
            if not any(v["name"] == claim_name for v in template_volumes):
                template_volumes.append({"name": claim_name, "persistentVolumeClaim": {}})
        pods.append(pod_of(template, name, volumes, secrets=secrets, host_port=first_port + i))
    return pods


def job_pods(doc, root, image, config_dir, data_dir):
    """The Indexed Job's pods (module doc): `data_dir` is the claim they share."""
    s = doc["spec"]
    template, uid, gid = template_of(doc, image)
    pods = []
    for i in range(s["completions"]):
        name = f"{doc['metadata']['name']}-{i}"
        volumes = {}
        for v in template["spec"]["volumes"]:
            if "configMap" in v:
                volumes[v["name"]] = config_dir
            elif "persistentVolumeClaim" in v:
                volumes[v["name"]] = data_dir
            else:
                volumes[v["name"]] = owned_folder(os.path.join(root, name, v["name"]), uid, gid)
        pods.append(pod_of(template, name, volumes, env={"JOB_COMPLETION_INDEX": i}))
    return pods
