"""Small scenario packs written into a temporary folder for the evidence tests."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

NOW = datetime(2026, 3, 2, 10, 40, tzinfo=UTC)
WINDOW_START = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)
DATA_START = datetime(2026, 3, 2, 7, 50, tzinfo=UTC)
CHANGE_AT = datetime(2026, 3, 2, 10, 19, tzinfo=UTC)

SCENARIO_YAML = """\
id: {pack_id}
title: 支付连接池测试
question: pay 从 10:20 开始超时，帮我看看
now: 2026-03-02T10:40:00Z
window:
  start: 2026-03-02T10:00:00Z
  end: 2026-03-02T10:40:00Z
language: zh-CN
services: [pay, gateway]
expected:
  root_cause_service: pay
  root_cause_kind: resource_exhaustion
  must_mention: [连接池]
"""

POOL_RUNBOOK = """\
# 连接池耗尽处理手册

适用于 HikariCP 连接池。

## 现象

支付服务请求超时，日志出现 Connection is not available，连接池活跃连接数达到上限。

## 处理步骤

先确认慢查询，再临时扩大连接池 maximumPoolSize，最后回滚引入长事务的变更。
"""

DEPLOY_RUNBOOK = """\
# Deploy rollback runbook

## When to roll back

Roll back a release when the 5xx error rate doubles within ten minutes of a deploy.

## How to roll back

Run the pipeline's rollback stage and watch the error rate for fifteen minutes.
"""


def _minutes(start: datetime, end: datetime, every: int = 60) -> list[datetime]:
    out = []
    t = start
    while t <= end:
        out.append(t)
        t += timedelta(seconds=every)
    return out


def pack_write(root: Path, *, pack_id: str = "fixture-pool", knowledge: bool = True) -> Path:
    """Write a small but realistic pack: a pool that saturates at 10:19, with noise."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "scenario.yaml").write_text(SCENARIO_YAML.format(pack_id=pack_id), encoding="utf-8")
    metrics = root / "metrics"
    metrics.mkdir(exist_ok=True)
    lines = ["# HELP pool_active Active connections.", "# TYPE pool_active gauge"]
    stamps = _minutes(DATA_START, NOW)
    for i, t in enumerate(stamps):
        value = 20 if t >= CHANGE_AT else 5 + (i % 3)
        lines.append(f'pool_active{{service="pay",pool="main"}} {value} {int(t.timestamp())}')
    lines += ["# TYPE cpu_usage gauge"]
    for i, t in enumerate(stamps):
        value = 0.4 + (i % 5) * 0.01
        lines.append(f'cpu_usage{{service="gateway"}} {value:.2f} {int(t.timestamp())}')
    lines += ["# HELP http_requests Requests.", "# TYPE http_requests counter"]
    total = 0.0
    for t in stamps:
        total += 600 if t >= CHANGE_AT else 6
        lines.append(
            f'http_requests_total{{service="pay",status="500"}} {total:g} {int(t.timestamp())}'
        )
    lines.append("# EOF")
    (metrics / "app.om").write_text("\n".join(lines) + "\n", encoding="utf-8")

    logs = root / "logs"
    logs.mkdir(exist_ok=True)
    records = []
    for i, t in enumerate(_minutes(DATA_START, NOW, every=30)):
        records.append((t, "pay", "INFO", f"POST /pay 200 {10 + i % 7}ms order=O{1000 + i}"))
        if i % 4 == 0:
            records.append((t, "pay", "WARN", f"slow query took {900 + i}ms on table orders"))
    for i, t in enumerate(_minutes(CHANGE_AT + timedelta(seconds=5), NOW, every=10)):
        records.append(
            (
                t,
                "pay",
                "ERROR",
                "HikariPool-1 - Connection is not available, "
                f"request timed out after 30000ms id={i}",
            )
        )
    records.sort(key=lambda r: r[0])
    with (logs / "app.jsonl").open("w", encoding="utf-8") as handle:
        for t, service, level, message in records:
            ts = t.strftime("%Y-%m-%dT%H:%M:%S.000Z")
            handle.write(
                json.dumps({"ts": ts, "service": service, "level": level, "message": message})
                + "\n"
            )
    with (logs / "gateway.log").open("w", encoding="utf-8") as handle:
        for i, t in enumerate(_minutes(DATA_START, NOW, every=60)):
            status = 504 if t >= CHANGE_AT else 200
            stamp = t.strftime("%Y-%m-%dT%H:%M:%SZ")
            handle.write(f'{stamp} INFO "POST /pay" {status} upstream=pay rt={i % 9}\n')
    if knowledge:
        folder = root / "knowledge"
        folder.mkdir(exist_ok=True)
        (folder / "pool-runbook.md").write_text(POOL_RUNBOOK, encoding="utf-8")
        (folder / "deploy-rollback.md").write_text(DEPLOY_RUNBOOK, encoding="utf-8")
    return root


def recorded_write(root: Path, records: list[dict]) -> Path:
    folder = root / "recorded"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "invocations.jsonl"
    path.write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8"
    )
    return path


FLEET_YAML = """\
id: {pack_id}
title: fleet of {count} services
question: 哪个服务出问题了？
now: 2026-03-02T10:40:00Z
window:
  start: 2026-03-02T10:00:00Z
  end: 2026-03-02T10:40:00Z
language: zh-CN
"""


def fleet_service_name(index: int) -> str:
    return f"svc-{index:04d}"


def fleet_pack_write(
    root: Path,
    *,
    services: int,
    faulty: tuple[int, ...] = (7,),
    pack_id: str = "fleet",
    every: int = 60,
    seed: int = 13,
) -> Path:
    """A generated fleet: ``services`` services with five noisy series each, one metric
    family per file; the ``faulty`` services' latency, errors and memory shift at 10:19.
    """
    import random

    rng = random.Random(seed)
    root.mkdir(parents=True, exist_ok=True)
    (root / "scenario.yaml").write_text(
        FLEET_YAML.format(pack_id=pack_id, count=services), encoding="utf-8"
    )
    metrics = root / "metrics"
    metrics.mkdir(exist_ok=True)
    stamps = [int(t.timestamp()) for t in _minutes(DATA_START, NOW, every=every)]
    change = int(CHANGE_AT.timestamp())
    families = {
        "latency": ("gauge", "http_request_duration_seconds"),
        "requests": ("counter", "http_requests"),
        "errors": ("counter", "http_errors"),
        "memory": ("gauge", "process_resident_memory_bytes"),
        "cpu": ("gauge", "process_cpu_utilisation"),
    }
    for key, (kind, name) in families.items():
        lines = [f"# TYPE {name} {kind}"]
        for index in range(services):
            svc = fleet_service_name(index)
            broken = index in faulty
            base = {
                "latency": 0.05 + 0.2 * rng.random(),
                "requests": 5 + 50 * rng.random(),
                "errors": 0.01 * rng.random(),
                "memory": (0.2 + rng.random()) * 1024**3,
                "cpu": 0.1 + 0.5 * rng.random(),
            }[key]
            total = 0.0
            for t in stamps:
                after = broken and t >= change
                noise = 1 + 0.05 * (rng.random() - 0.5)
                if key == "latency":
                    value = base * noise * (12 if after else 1)
                elif key == "memory":
                    value = base * noise * (1.8 if after else 1)
                elif key == "cpu":
                    value = base * noise
                else:
                    per_second = base * noise * (40 if after and key == "errors" else 1)
                    total += per_second * every
                    value = total
                suffix = "_total" if kind == "counter" else ""
                lines.append(f'{name}{suffix}{{service="{svc}"}} {value:.6g} {t}')
        lines.append("# EOF")
        (metrics / f"{key}.om").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root
