"""query_metrics: series from OpenMetrics files or Prometheus, compared window vs baseline.

``definition`` (the tool), ``selector``, ``series`` (grid, units, rates), ``statistics``
(the change statistic), ``render`` (output, summary, fleet view), the backends ``files`` and
``prometheus``, and ``query`` (both backends behind one call).

Both backends produce the same thing: each series evaluated on one time grid
(``step`` apart, aligned to multiples of ``step``, each point the latest sample no
older than Prometheus' 5-minute lookback), so the file backend and a Prometheus
loaded with the same data report the same facts.

One change statistic per series (``shift_measure``): the robust level shift of the
window against the baseline. The strongest run of consecutive window points away from
the baseline median (in units of the baseline's robust scale, MAD or IQR) locates the
shift; its level is the median of the shifted points. Direction, ratio, score and
change point all come from that one level against the baseline median, so "up" never
comes with a ratio below 1.

Each entry of ``summary["series"]``:

- ``service``, ``metric``, ``labels`` (with ``service``), ``rate`` (a counter shown as a
  per-second rate), ``unit`` (``bytes``, ``seconds``, ``bytes/s`` or "", read from the
  name's conventional suffix or a ``unit`` label);
- ``baseline_median``, ``baseline_mean``, ``baseline_points`` (grid points),
  ``baseline_samples`` (raw samples behind them: a sample coarser than the grid fills
  several grid points); ``sparse_baseline`` (fewer than SPARSE_BASELINE_POINTS baseline
  samples: said in the line, score scaled down);
- ``window_level``: the median of the shifted window points (of the whole window when
  there is no shift); ``window_mean``, ``window_max``, ``window_max_at``, ``window_min``,
  ``window_points``: plain descriptions of the window; ``shift_peak``, ``shift_peak_at``:
  the shift's own extreme (maximum up, minimum down) between its ``change_point`` and its
  end, None when flat; the line states it ("max since the change …") when the window's
  extreme is not it (it came before the onset);
- ``direction``: ``up``/``down`` when ``anomaly_score`` >= ANOMALY_THRESHOLD (then
  ``window_level`` is above/below ``baseline_median``), else ``flat``; a series with a
  baseline and no window samples is ``down`` with score ANOMALY_THRESHOLD; in a fleet view
  (no service) a shift must also clear the fleet's noise bar (``render.noise_bar``: the score
  the largest of that many noise scores reaches, for the shift's own samples), else it is
  ``flat`` and not a near miss;
- ``ratio``: ``window_level / baseline_median`` (> 1 for up, < 1 for down), None when the
  baseline median is not positive, the level negative, or the series is new;
- ``new``: no baseline samples, or a zero baseline median that the window left;
- ``anomaly_score``: |window_level − baseline_median| / robust scale, capped at
  ANOMALY_CAP, damped for a sparse baseline (0 without baseline); a noise-free baseline
  (constant or mostly zero) scores at most 100 (100 × the relative change, 100 from zero).
  Series rank by score, then relative change, then the earlier change point;
- ``change_point``: when the shift began (it may lie in the baseline when the window
  starts shifted), ``shift_end``: its last point when it ended inside the window,
  ``sustained_points``: the window grid points of the shift (0 when flat); a shift must
  hold over SUSTAIN_POINTS consecutive samples (2 in short windows), counted in raw
  samples, so one coarse sample repeated over the grid is never a shift;
- ``human``: the human form (``1.95 GiB``, ``230 ms``) of ``baseline_median``,
  ``window_level``, ``window_max``, ``window_min`` when the unit is known;
- ``line``: the excerptable fact line (raw values, each followed by its human form in
  brackets; the means only when they point the same way as the shift), and
  ``trend_line``: bucket means over baseline and window.

Every number in the summary equals its rendering in the line.
"""
