"""The benchmarks still measure what they say (smoke runs and their arithmetic, no timing)."""
