"""`berth bench`: the benchmarks of the whole stack and their reports."""
