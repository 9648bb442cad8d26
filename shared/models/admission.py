"""Admission, as the API server applies it to what a user writes: the one place every write path
of standalone mode (`berth apply`, the dashboard's front door) goes through before the store.

- **Priority** (upstream plugin/pkg/admission/priority): spec.priority is computed from the
  pod's class (or the globalDefault, or 0); a pod that sets a different value is refused, so a
  tenant cannot give itself the priority to evict others. A cluster dump read by `berth
  schedule`, or a pod a Kubernetes API server admitted, keeps its own value (not here).
- **DefaultTolerationSeconds**: a pod that does not tolerate `node.kubernetes.io/not-ready`
  or `unreachable` with effect NoExecute gets the toleration for 300 s.
- **Sizes**: annotations at most 256 KiB in total (upstream TotalAnnotationSizeLimitB), a whole
  object at most 1.5 MiB encoded (etcd's request limit), so no object can outgrow a message.
- **Validation** of the fields berth stores without scheduling by them
  (shared.models.strict_validation: names, images, host ports, resource limits, label syntax,
  owner references, restart and DNS policies).
- **uid** is the server's: a user-chosen metadata.uid is replaced (an existing object keeps the
  uid the store gave it).
"""

from __future__ import annotations

from collections.abc import Iterable

from shared.models.codec import encode
from shared.models.manifest import ManifestError, Manifests
from shared.models.meta import new_uid
from shared.models.pod import Pod
from shared.models.policy import PriorityClass
from shared.models.priority_admission import resolve_priorities
from shared.models.schema import KubeObject
from shared.models.strict_validation import first_problem
from shared.models.taints import Toleration

MAX_ANNOTATIONS_BYTES = 256 * 1024
MAX_OBJECT_BYTES = 1536 * 1024
DEFAULT_TOLERATION_SECONDS = 300
NOT_READY = "node.kubernetes.io/not-ready"
UNREACHABLE = "node.kubernetes.io/unreachable"
NO_EXECUTE = "NoExecute"


def admit(manifests: Manifests, classes: Iterable[PriorityClass]) -> list[str]:
    """Admit every object of `manifests` in place (see the module docstring); returns
    warnings, raises ManifestError naming the object and field of the first refusal.
    `classes`: the PriorityClasses in force (stored ones and the manifests' own)."""
    for obj in manifests.objects():
        _check_sizes(obj)
        problem = first_problem(obj)
        if problem:
            kind, where = _named(obj)
            raise ManifestError(f"{kind} {where}: {problem}", kind=kind, name=where)
        obj.metadata.uid = new_uid()
    warnings = resolve_priorities(manifests, classes, strict=True)
    for pod in manifests.pods:
        add_default_tolerations(pod)
    return warnings


def add_default_tolerations(pod: Pod) -> None:
    """Upstream DefaultTolerationSeconds: the not-ready and unreachable NoExecute tolerations
    (300 s) unless the pod tolerates them already (a toleration with that key or none, and
    effect NoExecute or none)."""
    tolerations = pod.spec.tolerations
    for key in (NOT_READY, UNREACHABLE):
        if not any(t.key in (key, "") and t.effect in (NO_EXECUTE, "") for t in tolerations):
            tolerations.append(
                Toleration(
                    key=key,
                    operator="Exists",
                    effect=NO_EXECUTE,
                    toleration_seconds=DEFAULT_TOLERATION_SECONDS,
                )
            )


def _named(obj: KubeObject) -> tuple[str, str]:
    meta = obj.metadata
    return type(obj).__name__, f"{meta.namespace}/{meta.name}" if meta.namespace else meta.name


def _check_sizes(obj: KubeObject) -> None:
    kind, where = _named(obj)
    meta = obj.metadata
    annotations = sum(len(k.encode()) + len(v.encode()) for k, v in meta.annotations.items())
    if annotations > MAX_ANNOTATIONS_BYTES:
        raise ManifestError(
            f"{kind} {where}: metadata.annotations: Too long: must have at most "
            f"{MAX_ANNOTATIONS_BYTES} bytes (has {annotations})",
            kind=kind,
            name=where,
            path="metadata.annotations",
        )
    size = len(encode(obj))
    if size > MAX_OBJECT_BYTES:
        raise ManifestError(
            f"{kind} {where}: Request entity too large: the object is {size} bytes, the limit "
            f"is {MAX_OBJECT_BYTES}",
            kind=kind,
            name=where,
        )
