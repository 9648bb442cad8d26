"""What the cross-node plugins (InterPodAffinity, PodTopologySpread) share: parsed label
selectors and affinity terms, the PodIndex over bound pods, and the ClusterObjects protocol."""

from scheduling.framework.cluster_objects import (
    EMPTY_CLUSTER,
    ClusterObjects,
    HasClusterObjects,
    StaticClusterObjects,
    cluster_objects_of,
    namespace_labels,
)
from scheduling.plugins.podindex.index import (
    PREFERRED_AFFINITY,
    PREFERRED_ANTI_AFFINITY,
    REQUIRED_AFFINITY,
    REQUIRED_ANTI_AFFINITY,
    PodIndex,
    PodQuery,
    TermHits,
    domain_array,
    domain_sums,
)
from scheduling.plugins.podindex.selectors import (
    EVERYTHING,
    LabelQuery,
    Requirement,
    SelectorError,
    equality_query,
    parse_label_selector,
    query_matches,
)
from scheduling.plugins.podindex.terms import (
    AffinityTerm,
    PodAffinityTerms,
    WeightedAffinityTerm,
    has_preferred_terms,
    parse_pod_terms,
    parse_term,
)

__all__ = [
    "EMPTY_CLUSTER",
    "EVERYTHING",
    "PREFERRED_AFFINITY",
    "PREFERRED_ANTI_AFFINITY",
    "REQUIRED_AFFINITY",
    "REQUIRED_ANTI_AFFINITY",
    "AffinityTerm",
    "ClusterObjects",
    "HasClusterObjects",
    "LabelQuery",
    "PodAffinityTerms",
    "PodIndex",
    "PodQuery",
    "Requirement",
    "SelectorError",
    "StaticClusterObjects",
    "TermHits",
    "WeightedAffinityTerm",
    "cluster_objects_of",
    "domain_array",
    "domain_sums",
    "equality_query",
    "has_preferred_terms",
    "namespace_labels",
    "parse_label_selector",
    "parse_pod_terms",
    "parse_term",
    "query_matches",
]
