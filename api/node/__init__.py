"""Real Apache Cassandra nodes for development, tests and benchmarks (see manager.py)."""
