"""The scheduling framework: extension points, the cycle, NodeColumns, nominated pods, extenders."""
