"""The query_logs tool: its definition and backends."""
