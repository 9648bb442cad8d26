"""Render deploy/helm/berth offline (helm-python-sdk) and index the manifests."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import helm_python
import yaml

CHART_DIR = Path(__file__).resolve().parents[2] / "deploy" / "helm" / "berth"
RELEASE = "berth"
NAMESPACE = "sched"
COMPONENTS = ("queue", "scheduler", "binder", "agent")
KUBE_VERSION = "1.30.0"


@dataclass(frozen=True, slots=True)
class Manifest:
    template: str
    doc: dict[str, Any]

    @property
    def kind(self) -> str:
        return str(self.doc["kind"])

    @property
    def api_version(self) -> str:
        return str(self.doc["apiVersion"])

    @property
    def name(self) -> str:
        return str(self.doc["metadata"]["name"])

    @property
    def labels(self) -> dict[str, str]:
        return dict(self.doc["metadata"].get("labels") or {})

    @property
    def component(self) -> str | None:
        return self.labels.get("app.kubernetes.io/component")


class Rendered:
    """The manifests of one render, by kind and component."""

    def __init__(self, files: Mapping[str, str]) -> None:
        self.files = dict(files)
        self.manifests = [
            Manifest(template, doc)
            for template, text in sorted(files.items())
            if template.endswith(".yaml")
            for doc in yaml.safe_load_all(text)
            if doc
        ]

    def __iter__(self) -> Iterator[Manifest]:
        return iter(self.manifests)

    def kinds(self, kind: str) -> list[Manifest]:
        return [m for m in self.manifests if m.kind == kind]

    def get(self, kind: str, component: str | None = None) -> Manifest:
        found = [m for m in self.kinds(kind) if component is None or m.component == component]
        assert len(found) == 1, f"{len(found)} {kind} for {component}: {[m.name for m in found]}"
        return found[0]

    def find(self, kind: str, component: str) -> Manifest | None:
        found = [m for m in self.kinds(kind) if m.component == component]
        return found[0] if found else None

    def config_yaml(self) -> str:
        return str(self.get("ConfigMap").doc["data"]["config.yaml"])

    def container(self, component: str) -> dict[str, Any]:
        deployment = self.get("Deployment", component)
        (container,) = deployment.doc["spec"]["template"]["spec"]["containers"]
        return dict(container)

    def env(self, component: str) -> dict[str, Any]:
        """name -> value (plain values) or the valueFrom mapping."""
        return {
            item["name"]: item.get("value", item.get("valueFrom"))
            for item in self.container(component)["env"]
        }


def chart() -> helm_python.Chart:
    return helm_python.Chart.load(CHART_DIR)


def render(
    values: dict[str, Any] | None = None, *, name: str = RELEASE, namespace: str = NAMESPACE
) -> Rendered:
    files = chart().render(values or {}, name=name, namespace=namespace, is_install=True)
    return Rendered(files)
