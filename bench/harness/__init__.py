"""Shared pieces of the benchmark suite: progress lines, machine facts, statistics, processes,
result files and plots. Benchmarks import these; nothing here knows about a particular benchmark."""
