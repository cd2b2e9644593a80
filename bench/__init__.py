"""Hourglass benchmarks (`make bench`): precision, sweep scaling, cost, throughput, memory, capacity."""
