"""Real Apache Cassandra nodes for development, tests and benchmarks.

- `fetch`: prerequisites (Java, Maven, disk space), the Maven fetch and the pinned jar checksums;
- `config`: a node's description (`NodeSpec`) and its rendered configuration (cassandra.yaml, logback, JVM command);
- `process`: start (or reuse), stop and status of nodes and loopback clusters;
- `tools`: Cassandra's own tools (nodetool over JMX, sstablepartitions over the data files) run against a node;
- `common`: the errors they raise. Their environment settings come from `api.config.NodeSettings`.
"""
