"""Evidence tools (query_metrics, query_logs, lookup_knowledge), their backends and scenario packs.

The public surface is :mod:`diagnosis.evidence.registry` (``tool_specs``, ``tool_invoke``),
:mod:`diagnosis.evidence.trace_summary`, :mod:`diagnosis.evidence.packs` and
:mod:`diagnosis.evidence.services`.
"""
