"""Chronicle: a Cassandra-backed, query-first social archive."""
