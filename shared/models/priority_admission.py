"""The Priority admission plugin over loaded manifests: each pod's spec.priority and
preemptionPolicy from its PriorityClass (the manifests' own classes, the system ones, the
global default), with upstream's errors and a warning for a pod whose priority disagrees."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from shared.models.manifest import ManifestError, Manifests
from shared.models.pod import PREEMPT_LOWER_PRIORITY, Pod
from shared.models.policy import PriorityClass
from shared.models.validation import SYSTEM_PRIORITY_CLASSES


def _pod_error(pod: Pod, path: str, reason: str) -> ManifestError:
    name = pod.key
    return ManifestError(f"Pod {name}: {path}: {reason}", kind="Pod", name=name, path=path)


def resolve_priorities(
    manifests: Manifests, classes: Iterable[PriorityClass] | None = None, *, strict: bool = False
) -> list[str]:
    """Set spec.priority (and preemptionPolicy) of every pod without one from its
    PriorityClass, in place; returns warnings (one line each, naming the pod).

    A pod that carries spec.priority keeps it, and its preemptionPolicy, as kube-scheduler
    reads them: in a real cluster a pod keeps the priority admission gave it, whatever
    happened to its class since (the Kubernetes Pod Priority docs: deleting a class or adding
    a globalDefault "does not change existing pods"). A missing class or a value that differs
    from the class's is a warning. A pod without spec.priority is resolved like the Priority
    admission plugin: a pod without priorityClassName gets the globalDefault class (its name is
    filled in), or priority 0 when there is none; the built-in system-node-critical /
    system-cluster-critical classes always exist; an unknown class is an error, and so is an
    explicit preemptionPolicy that disagrees with the class. ``classes`` defaults to the
    manifests' own PriorityClasses.

    `strict` (admission of a user's write, shared.models.admission): every pod is resolved
    from its class, and one that carries a spec.priority other than the class's is refused,
    as the Priority admission plugin refuses it.

    Known gap: preemptionPolicy has a non-None default in the model, so an explicit
    "PreemptLowerPriority" on a pod whose class says "Never" is taken as unset (upstream
    rejects it); an explicit "Never" that disagrees is rejected as upstream does.
    """
    pcs = list(manifests.priority_classes if classes is None else classes)
    by_name: dict[str, tuple[int, str]] = {
        name: (value, PREEMPT_LOWER_PRIORITY) for name, value in SYSTEM_PRIORITY_CLASSES.items()
    }
    defaults = [pc for pc in pcs if pc.global_default]
    if len(defaults) > 1:
        names = ", ".join(pc.metadata.name for pc in defaults)
        raise ManifestError(
            f"PriorityClass {defaults[1].metadata.name}: globalDefault: Forbidden: "
            f"only one PriorityClass can be marked as globalDefault (found: {names})",
            kind="PriorityClass",
            name=defaults[1].metadata.name,
            path="globalDefault",
        )
    for pc in pcs:
        by_name[pc.metadata.name] = (pc.value, pc.preemption_policy)
    default = defaults[0] if defaults else None
    warnings: list[str] = []

    for pod in manifests.pods:
        spec = pod.spec
        given = spec.priority
        if given is not None and not strict:
            warning = _existing_priority_warning(pod, by_name)
            if warning:
                warnings.append(warning)
            continue
        if spec.priority_class_name:
            found = by_name.get(spec.priority_class_name)
            if found is None:
                raise _pod_error(
                    pod,
                    "spec.priorityClassName",
                    f'no PriorityClass with name "{spec.priority_class_name}" was found',
                )
            value, policy = found
        elif default is not None:
            spec.priority_class_name = default.metadata.name
            value, policy = default.value, default.preemption_policy
        else:
            value, policy = 0, PREEMPT_LOWER_PRIORITY
        if spec.preemption_policy not in (policy, PREEMPT_LOWER_PRIORITY):
            raise _pod_error(
                pod,
                "spec.preemptionPolicy",
                f"the string value of PreemptionPolicy ({spec.preemption_policy}) must not be "
                f"provided in pod spec; priority admission controller computed {policy} from "
                "the given PriorityClass name",
            )
        if given is not None and given != value:
            raise _pod_error(
                pod,
                "spec.priority",
                f"Forbidden: the integer value of priority ({given}) must not be provided in "
                f"pod spec; priority admission controller computed {value} from the given "
                "PriorityClass name",
            )
        spec.priority = value
        spec.preemption_policy = policy
    return warnings


def _existing_priority_warning(pod: Pod, classes: Mapping[str, tuple[int, str]]) -> str:
    """Why a pod's own spec.priority disagrees with its class today ("" when it does not)."""
    spec = pod.spec
    name = spec.priority_class_name
    if name:
        found = classes.get(name)
        if found is None:
            return (
                f"Pod {pod.key}: spec.priorityClassName: no PriorityClass with name "
                f'"{name}" was found; using spec.priority {spec.priority}'
            )
        if found[0] != spec.priority:
            return (
                f"Pod {pod.key}: spec.priority: {spec.priority} differs from PriorityClass "
                f'"{name}" ({found[0]}); using spec.priority {spec.priority}'
            )
    return ""
