"""query_logs: log lines from pack files or Loki, clustered into templates with drain3.

``definition`` (the tool), ``filter`` (what a call asks for), ``masking`` and ``clustering``
(lines into templates), ``render`` (output and summary), the backends ``files`` (with
``linescan`` and ``logscan``) and ``loki``.

The file backend streams every file in blocks of whole lines (memory does not grow with
the file); each matching line lands in a template cluster that keeps counts for the window
and the baseline, first/last seen and a few verbatim sample lines.

``service`` is a service name, or ``/regex/`` for every service whose whole name the
expression matches (on Loki a ``service=~`` stream selector). Without a service, or with a
selector, the query is fleet-wide: the templates of every service are ranked together
(new or surging errors first, each with its service), in one pass over the files or one
query per range on Loki.

Summary keys (``BackendOutput.summary``):

- ``window``, ``baseline``: the two ranges compared, RFC 3339 ``start``/``end``.
- ``total_window``, ``total_baseline``: matching lines in each range.
- ``templates``: the shown templates, most unusual first, each with ``template``,
  ``service``, ``level``, ``count_window``, ``count_baseline``, ``first_seen``,
  ``last_seen``, ``is_new``, ``surge_ratio``, ``line`` (its output line) and ``samples``.
- ``omitted``: templates ranked below the shown ones.
- ``fleet`` (fleet-wide queries with data only): ``services`` (services with a matching
  line), ``lines_window``, ``lines_baseline``, ``templates`` (all templates),
  ``new_or_surging`` (templates new in the window or surging, see ``template_surging``),
  ``new_or_surging_services`` (services with such a template), ``line`` (the output's
  ``fleet:`` totals line), ``services_ranked``: up to ``MAX_TEMPLATES_SHOWN`` of those
  services, most unusual first, each with ``service``, ``new_or_surging``,
  ``lines_window``, ``lines_baseline`` and ``line``, and ``services_omitted`` (the rest).
  The names follow ``query_metrics``' fleet summary.
  On Loki past its line limit, ``lines_window``/``lines_baseline`` are Loki's exact counts
  while services and per-service figures come from the lines it returned (lower bounds).

Big unfiltered file scans are counted by masked line, in parallel, by ``logscan`` (same
result as the line-by-line scan of ``linescan``).
"""
