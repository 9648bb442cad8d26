"""ImageLocality: favors nodes that already hold the pod's container images."""

from scheduling.plugins.imagelocality.image_locality import (
    MAX_CONTAINER_THRESHOLD,
    MIN_THRESHOLD,
    ImageLocality,
    new,
    normalized_image_name,
)

__all__ = [
    "MAX_CONTAINER_THRESHOLD",
    "MIN_THRESHOLD",
    "ImageLocality",
    "new",
    "normalized_image_name",
]
