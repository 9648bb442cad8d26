"""ImageLocality (upstream pkg/scheduler/framework/plugins/imagelocality).

For every container and init container whose image (":latest" added when the name has no tag)
a node already has, the node earns the image size scaled by its spread:
int64(float64(size) * numNodesWithImage / totalNodes). The sum is clamped to
[23 MiB, 1000 MiB x number of containers] and mapped linearly onto 0..100 with integer math.

Vectorized: per image the (rows, scaled size) pair is computed once per node-set generation
(NodeColumns.images() is rebuilt whenever nodes change) and cached; a Score call adds those
pairs into one column for the pod's images and maps it onto the rows being scored.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import numpy as np
from numpy.typing import NDArray

from scheduling.framework.columns import NodeColumns, Rows
from scheduling.framework.cycle_state import CycleState
from scheduling.framework.interfaces import MAX_NODE_SCORE, Handle, ScorePlugin
from scheduling.framework.signature import NODE_LOCAL, Reuse
from scheduling.framework.status import Status
from scheduling.plugins import names
from shared.models import Pod

MB = 1024 * 1024
MIN_THRESHOLD = 23 * MB
MAX_CONTAINER_THRESHOLD = 1000 * MB

ImageIndex = dict[str, tuple[NDArray[np.intp], NDArray[np.int64]]]


def normalized_image_name(name: str) -> str:
    """The CRI name: ":latest" appended when the last ":" is not after the last "/"."""
    if name.rfind(":") <= name.rfind("/"):
        return name + ":latest"
    return name


def scaled_image_scores(
    rows: NDArray[np.intp], sizes: NDArray[np.int64], total_nodes: int
) -> tuple[NDArray[np.intp], NDArray[np.int64]]:
    """(distinct rows, size scaled by spread) for one image name.

    A node listing the name twice counts once, with its last size (upstream builds a map).
    """
    if rows.size > 1 and (rows[1:] == rows[:-1]).any():
        last = np.ones(rows.size, dtype=np.bool_)
        last[:-1] = rows[1:] != rows[:-1]
        rows, sizes = rows[last], sizes[last]
    spread = rows.size / total_nodes
    return rows, (sizes.astype(np.float64) * spread).astype(np.int64)


def calculate_priority(sum_scores: NDArray[np.int64], num_containers: int) -> NDArray[np.int64]:
    max_threshold = MAX_CONTAINER_THRESHOLD * num_containers
    clamped = np.clip(sum_scores, MIN_THRESHOLD, max_threshold)
    return MAX_NODE_SCORE * (clamped - MIN_THRESHOLD) // (max_threshold - MIN_THRESHOLD)


class ImageLocality:
    name: ClassVar[str] = names.IMAGE_LOCALITY
    # The image spread it scales by changes only with nodes (which rebuild every entry).
    signature_reuse: ClassVar[Reuse] = NODE_LOCAL

    def __init__(self) -> None:
        self._index: ImageIndex | None = None
        self._scaled: dict[str, tuple[NDArray[np.intp], NDArray[np.int64]] | None] = {}

    def _scaled_image(
        self, nodes: NodeColumns, image: str
    ) -> tuple[NDArray[np.intp], NDArray[np.int64]] | None:
        index = nodes.images()
        if index is not self._index:
            self._index = index
            self._scaled = {}
        if image not in self._scaled:
            entry = index.get(image)
            self._scaled[image] = (
                None if entry is None else scaled_image_scores(entry[0], entry[1], len(nodes))
            )
        return self._scaled[image]

    def score(
        self, state: CycleState, pod: Pod, nodes: NodeColumns, rows: Rows
    ) -> NDArray[np.int64] | Status:
        containers = [*pod.spec.init_containers, *pod.spec.containers]
        sums: NDArray[np.int64] | None = None
        for container in containers:
            scaled = self._scaled_image(nodes, normalized_image_name(container.image))
            if scaled is None:
                continue
            if sums is None:
                sums = np.zeros(len(nodes), dtype=np.int64)
            sums[scaled[0]] += scaled[1]
        if sums is None:
            return np.zeros(nodes.size_of(rows), dtype=np.int64)
        return calculate_priority(sums[rows], len(containers))


def new(args: object | None, handle: Handle) -> ImageLocality:
    return ImageLocality()


if TYPE_CHECKING:
    _score: type[ScorePlugin] = ImageLocality
