"""Evidence: the tools the Executor calls, their backends, and scenario packs.

- ``tools/``: the tool registry (``diagnosis.evidence.tools``) and one folder per tool
  (``query_metrics``, ``query_logs``, ``lookup_knowledge``): its definition and backends.
- ``registry``: ``tool_specs`` for the model and ``tool_invoke``, which runs a call (or
  replays a recorded one, ``recorded``) and persists it as a ToolInvocation.
- ``packs`` (scenario.yaml and the file list) and ``pack_check`` (every data file
  validated); ``services`` syncs packs into Environments and imports runbooks.
- Shared by the tools: ``common`` (windows, deadlines, clamps, number formats),
  ``formats`` (log and OpenMetrics lines), ``timeutil``, ``topology`` (call edges).
"""
