"""The lookup_knowledge tool: its definition and backends."""
