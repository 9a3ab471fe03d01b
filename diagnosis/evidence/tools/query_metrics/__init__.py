"""The query_metrics tool: its definition and backends."""
