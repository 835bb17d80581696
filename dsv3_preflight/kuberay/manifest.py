"""The facts of a KubeRay manifest: what a RayJob or RayCluster (``ray.io/v1``) asks of Kubernetes, with the line
each setting stands on.

:func:`parse_manifests` turns the text of a (multi-document) YAML file into :class:`ManifestFacts`: one
:class:`RayManifest` per RayJob or RayCluster, its worker groups with their Ray container (the first container of
the pod, as KubeRay uses it), volumes and mounts, and for a RayJob its entrypoint, runtime environment and
lifecycle settings. Values come from PyYAML's safe loader; lines from ``yaml.compose_all`` on the same text, so a
finding can name ``file:line``. Pure: no file is read here (the probe reads it through ``inputs``).
"""
from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any, TypedDict

#: volume sources whose data outlives the pod (a PVC, a network file system, a bucket through CSI)
SHARED_VOLUMES = frozenset({"persistentVolumeClaim", "nfs", "cephfs", "glusterfs", "azureFile", "csi", "iscsi",
                            "fc", "flexVolume", "quobyte", "portworxVolume", "vsphereVolume", "awsElasticBlockStore",
                            "gcePersistentDisk", "azureDisk", "rbd", "storageos", "scaleIO", "flocker"})
#: a volume kept on the node, not in the pod: it survives the pod, but each node has its own
NODE_VOLUMES = frozenset({"hostPath", "local"})
GPU_RESOURCE = "nvidia.com/gpu"


class Mount(TypedDict):
    path: str
    volume: str
    line: int | None


class Volume(TypedDict):
    name: str
    source: str              # the volume source's key: "persistentVolumeClaim", "emptyDir", "hostPath", ...
    medium: str | None       # emptyDir's medium ("Memory" for a tmpfs)
    size_limit: str | None   # emptyDir's sizeLimit as written
    claim: str | None        # persistentVolumeClaim's claimName
    line: int | None


class Container(TypedDict):
    name: str
    index: int
    env: dict[str, str | None]     # literal values; None for valueFrom (not known from the manifest)
    env_from: list[str]            # configMapRef/secretRef names whose variables the manifest does not show
    gpu_limit: int | None
    gpu_request: int | None
    mounts: list[Mount]
    line: int | None


class Group(TypedDict):
    role: str                  # "head" or "worker"
    name: str
    yq: str                    # the group's path for yq, from the document root
    replicas: int | None       # a head group is one pod
    min_replicas: int | None
    max_replicas: int | None
    num_gpus_param: str | None  # rayStartParams num-gpus, as written
    containers: list[Container]
    volumes: list[Volume]
    line: int | None


class JobSpec(TypedDict):
    entrypoint: str | None
    shutdown_after_job_finishes: bool | None
    active_deadline_seconds: int | None
    backoff_limit: int | None
    submission_mode: str | None
    cluster_selector: dict[str, str] | None   # a job run on an existing cluster (no rayClusterSpec)
    runtime_env_vars: dict[str, str]
    runtime_env_error: str | None
    lines: dict[str, int]                      # spec key -> line


class RayManifest(TypedDict):
    kind: str            # "RayJob" or "RayCluster"
    name: str
    document: int        # index of the YAML document in the file (yq's document_index)
    line: int
    autoscaling: bool
    groups: list[Group]
    job: JobSpec | None


class OtherDocument(TypedDict):
    document: int
    kind: str
    name: str
    line: int


class ManifestFacts(TypedDict, total=False):
    given: bool
    path: str
    error: str
    manifests: list[RayManifest]
    others: list[OtherDocument]


class ManifestError(ValueError):
    """The text is not YAML this reader understands (the message says where)."""


# -- the composed tree: lines ----------------------------------------------------------------------------------


def _child(node: Any, key: str | int) -> Any:
    import yaml

    if isinstance(node, yaml.MappingNode) and isinstance(key, str):
        return next((v for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == key), None)
    if isinstance(node, yaml.SequenceNode) and isinstance(key, int) and 0 <= key < len(node.value):
        return node.value[key]
    return None


def line_of(node: Any, *path: str | int) -> int | None:
    """The 1-based line of the value at ``path`` below ``node`` (None when it is not there)."""
    for key in path:
        node = _child(node, key)
        if node is None:
            return None
    return int(node.start_mark.line) + 1


# -- typed reading of the loaded values ------------------------------------------------------------------------


def _map(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and re.fullmatch(r"\s*\d+\s*", value):
        return int(value)
    return None


def _bool(value: Any) -> bool | None:
    return value if isinstance(value, bool) else None


def _container(raw: dict[str, Any], index: int, node: Any) -> Container:
    env: dict[str, str | None] = {}
    for item in _list(raw.get("env")):
        item = _map(item)
        if isinstance(item.get("name"), str):
            value = item.get("value")
            env[item["name"]] = None if "valueFrom" in item else ("" if value is None else str(value))
    env_from = [str(ref.get("name")) for item in _list(raw.get("envFrom")) for kind in ("configMapRef", "secretRef")
                if (ref := _map(_map(item).get(kind)))]
    resources = _map(raw.get("resources"))
    mounts = [Mount(path=str(m.get("mountPath")), volume=str(m.get("name")),
                    line=line_of(node, "volumeMounts", i))
              for i, m in enumerate(_list(raw.get("volumeMounts"))) if isinstance(m, dict) and m.get("mountPath")]
    return Container(name=str(raw.get("name") or f"#{index}"), index=index, env=env, env_from=env_from,
                     gpu_limit=_int(_map(resources.get("limits")).get(GPU_RESOURCE)),
                     gpu_request=_int(_map(resources.get("requests")).get(GPU_RESOURCE)),
                     mounts=mounts, line=line_of(node))


def _volume(raw: dict[str, Any], node: Any) -> Volume:
    source = next((k for k in raw if k != "name"), "")
    empty = _map(raw.get("emptyDir"))
    return Volume(name=str(raw.get("name")), source=source,
                  medium=str(empty["medium"]) if empty.get("medium") else None,
                  size_limit=str(empty["sizeLimit"]) if empty.get("sizeLimit") is not None else None,
                  claim=_map(raw.get("persistentVolumeClaim")).get("claimName"), line=line_of(node))


def _group(raw: dict[str, Any], node: Any, role: str, yq: str, index: int) -> Group:
    pod = _map(_map(raw.get("template")).get("spec"))
    pod_node = _child(_child(node, "template"), "spec")
    containers = [_container(c, i, _child(_child(pod_node, "containers"), i))
                  for i, c in enumerate(_list(pod.get("containers"))) if isinstance(c, dict)]
    volumes = [_volume(v, _child(_child(pod_node, "volumes"), i))
               for i, v in enumerate(_list(pod.get("volumes"))) if isinstance(v, dict)]
    params = _map(raw.get("rayStartParams"))
    gpus_param = params.get("num-gpus")
    return Group(role=role, name=str(raw.get("groupName") or ("head" if role == "head" else f"worker group {index}")),
                 yq=yq, replicas=1 if role == "head" else _int(raw.get("replicas")),
                 min_replicas=_int(raw.get("minReplicas")), max_replicas=_int(raw.get("maxReplicas")),
                 num_gpus_param=None if gpus_param is None else str(gpus_param),
                 containers=containers, volumes=volumes, line=line_of(node))


def _groups(spec: dict[str, Any], node: Any, root: str) -> list[Group]:
    groups = []
    if isinstance(spec.get("headGroupSpec"), dict):
        groups.append(_group(spec["headGroupSpec"], _child(node, "headGroupSpec"), "head", f"{root}.headGroupSpec", 0))
    for i, raw in enumerate(_list(spec.get("workerGroupSpecs"))):
        if isinstance(raw, dict):
            groups.append(_group(raw, _child(_child(node, "workerGroupSpecs"), i), "worker",
                                 f"{root}.workerGroupSpecs[{i}]", i))
    return groups


def _runtime_env(text: Any) -> tuple[dict[str, str], str | None]:
    """The env_vars of a runtimeEnvYAML block (or why it cannot be read)."""
    import yaml

    if text is None:
        return {}, None
    try:
        value = yaml.safe_load(str(text))
    except yaml.YAMLError as exc:
        return {}, f"runtimeEnvYAML is not YAML: {str(exc).splitlines()[0]}"
    env = _map(_map(value).get("env_vars"))
    return {str(k): str(v) for k, v in env.items()}, None


JOB_KEYS = ("entrypoint", "shutdownAfterJobFinishes", "activeDeadlineSeconds", "backoffLimit", "runtimeEnvYAML",
            "rayClusterSpec", "clusterSelector", "submissionMode")


def _job(spec: dict[str, Any], node: Any) -> JobSpec:
    env, env_error = _runtime_env(spec.get("runtimeEnvYAML"))
    lines = {k: line for k in JOB_KEYS if (line := line_of(node, k)) is not None}
    selector = _map(spec.get("clusterSelector")) or None
    return JobSpec(entrypoint=str(spec["entrypoint"]) if spec.get("entrypoint") is not None else None,
                   shutdown_after_job_finishes=_bool(spec.get("shutdownAfterJobFinishes")),
                   active_deadline_seconds=_int(spec.get("activeDeadlineSeconds")),
                   backoff_limit=_int(spec.get("backoffLimit")),
                   submission_mode=str(spec["submissionMode"]) if spec.get("submissionMode") else None,
                   cluster_selector={str(k): str(v) for k, v in selector.items()} if selector else None,
                   runtime_env_vars=env, runtime_env_error=env_error, lines=lines)


def _ray_manifest(doc: dict[str, Any], node: Any, index: int) -> RayManifest:
    kind = str(doc.get("kind"))
    meta = _map(doc.get("metadata"))
    name = str(meta.get("name") or (f"{meta['generateName']}*" if meta.get("generateName") else f"document {index}"))
    spec, spec_node = _map(doc.get("spec")), _child(node, "spec")
    if kind == "RayJob":
        cluster, cluster_node, root = _map(spec.get("rayClusterSpec")), _child(spec_node, "rayClusterSpec"), \
            ".spec.rayClusterSpec"
        job: JobSpec | None = _job(spec, spec_node)
    else:
        cluster, cluster_node, root, job = spec, spec_node, ".spec", None
    return RayManifest(kind=kind, name=name, document=index, line=line_of(node) or 1,
                       autoscaling=bool(cluster.get("enableInTreeAutoscaling")),
                       groups=_groups(cluster, cluster_node, root), job=job)


def _documents(text: str) -> Iterator[tuple[int, Any, Any]]:
    import yaml

    try:
        values = list(yaml.safe_load_all(text))
        nodes = list(yaml.compose_all(text, Loader=yaml.SafeLoader))
    except RecursionError:
        raise ManifestError("nested too deeply to parse") from None
    except yaml.YAMLError as exc:
        raise ManifestError(f"invalid YAML: {' '.join(str(exc).split())}") from None
    nodes = [n for n in nodes if n is not None]
    values = [v for v in values if v is not None]
    yield from ((i, v, n) for i, (v, n) in enumerate(zip(values, nodes)))


def parse_manifests(text: str, path: str) -> ManifestFacts:
    """Every RayJob and RayCluster of ``text`` (and the other documents, named), or :class:`ManifestError`."""
    from dsv3_preflight.inputs import DEFAULT_MAX_DEPTH, depth

    manifests: list[RayManifest] = []
    others: list[OtherDocument] = []
    for index, doc, node in _documents(text):
        if depth(doc) > DEFAULT_MAX_DEPTH:
            raise ManifestError(f"document {index} is nested deeper than {DEFAULT_MAX_DEPTH} levels")
        if not isinstance(doc, dict):
            raise ManifestError(f"document {index} (line {line_of(node)}) is a YAML {type(doc).__name__}, "
                                "not a Kubernetes object")
        kind, api = str(doc.get("kind")), str(doc.get("apiVersion") or "")
        if kind in ("RayJob", "RayCluster") and api.startswith("ray.io/"):
            manifests.append(_ray_manifest(doc, node, index))
        else:
            others.append(OtherDocument(document=index, kind=kind, line=line_of(node) or 1,
                                        name=str(_map(doc.get("metadata")).get("name") or "")))
    if not manifests:
        found = ", ".join(f"{o['kind']} (line {o['line']})" for o in others) or "no document"
        raise ManifestError(f"no RayJob or RayCluster (apiVersion ray.io/v1) in it: {found}")
    return ManifestFacts(given=True, path=path, manifests=manifests, others=others)


# -- shared readings the rules use -----------------------------------------------------------------------------


def ray_container(group: Group) -> Container | None:
    """The container Ray runs in: KubeRay's first container of the pod."""
    return group["containers"][0] if group["containers"] else None


def volume_of(group: Group, mount: Mount) -> Volume | None:
    return next((v for v in group["volumes"] if v["name"] == mount["volume"]), None)


def pods(group: Group, autoscaling: bool) -> int:
    """How many pods the group can have: replicas (maxReplicas when the autoscaler may grow it)."""
    if group["role"] == "head":
        return 1
    counts = [group["replicas"] or 0]
    if autoscaling and group["max_replicas"] is not None:
        counts.append(group["max_replicas"])
    return max(counts)


def gpus_per_pod(group: Group) -> int:
    container = ray_container(group)
    if container is None:
        return 0
    return container["gpu_limit"] or container["gpu_request"] or 0


def entrypoint(manifest: RayManifest) -> str:
    """A RayJob's entrypoint ("" for a RayCluster or a job without one)."""
    return (manifest["job"]["entrypoint"] if manifest["job"] else None) or ""


def job_line(manifest: RayManifest, key: str) -> int | None:
    """The line of a RayJob's spec key (None when it is not written)."""
    return manifest["job"]["lines"].get(key) if manifest["job"] else None


def runtime_env_var(manifest: RayManifest, name: str) -> str | None:
    return manifest["job"]["runtime_env_vars"].get(name) if manifest["job"] else None
