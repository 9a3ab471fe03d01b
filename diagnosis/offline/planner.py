"""Offline Planner: services, time window and symptoms read from the question itself."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Any

from django.utils.translation import gettext

from diagnosis.contracts import PlannerOutput, TimeWindow
from diagnosis.evidence.tools import tool_names
from diagnosis.i18n import language_override
from diagnosis.llm.base import PlannerRequest

from .common import lang_key, time_format, time_parse

DEFAULT_LOOKBACK = timedelta(minutes=30)
# An SRE reports when they noticed; causes often start a little earlier.
ONSET_LEAD = timedelta(minutes=10)

# A token that names a service even when the environment does not list it.
SERVICE_TOKEN = re.compile(
    r"(?<![\w-])([a-z][a-z0-9]*(?:-[a-z0-9]+)*-(?:service|svc|api|server|gateway|worker|db))(?![\w-])",
    re.IGNORECASE,
)

# symptom -> keywords (lower-case; Chinese and English)
SYMPTOM_KEYWORDS: dict[str, tuple[str, ...]] = {
    "timeout": ("超时", "timeout", "timed out", "time out", "time-out"),
    "errors": (
        "5xx",
        "500",
        "502",
        "503",
        "504",
        "错误",
        "报错",
        "失败",
        "异常",
        "error",
        "fail",
        "exception",
    ),
    "latency": ("延迟", "变慢", "很慢", "慢", "卡", "响应时间", "latency", "slow", "p99", "p95"),
    "memory": ("内存", "oom", "memory", "heap", "堆", "泄漏", "泄露", "leak"),
    "disk": ("磁盘", "disk", "空间", "no space", "存储", "storage", "inode"),
    "cpu": ("cpu", "负载", "load"),
    "connection": ("连接池", "连接", "connection", "pool"),
    "restart": ("重启", "restart", "crash", "崩溃", "宕机", "挂了", "crashloop"),
    "change": (
        "发布",
        "上线",
        "部署",
        "deploy",
        "release",
        "版本",
        "回滚",
        "rollback",
        "配置",
        "config",
    ),
    "traffic": ("流量", "qps", "请求量", "traffic"),
}

_CN_NUM = {"一": 1, "两": 2, "二": 2, "三": 3, "四": 4, "五": 5, "六": 6, "十": 10, "半": 0.5}
_RELATIVE_EN = re.compile(
    r"\b(?:last|past|previous|recent)\s+(\d+(?:\.\d+)?|an?|one|two|three|half an?)?\s*"
    r"(minutes?|mins?|m|hours?|hrs?|h)\b",
    re.IGNORECASE,
)
_RELATIVE_ZH = re.compile(
    r"(?:过去|最近|近|前)\s*(\d+(?:\.\d+)?|[一两二三四五六十半]+)?\s*(?:个)?\s*(分钟|小时|钟头)"
)
_HALF_HOUR_ZH = re.compile(r"(?:过去|最近|近)\s*半\s*(?:个)?\s*(?:小时|钟头)")
_CLOCK = re.compile(r"(?<!\d)([01]?\d|2[0-3])\s*(?:[:：]|点)\s*([0-5]\d)(?:\s*分)?(?!\d)")
_CLOCK_HOUR_ZH = re.compile(r"(?<!\d)([01]?\d|2[0-3])\s*点(?:\s*(?:钟|整))?(?![\d半])")
_DATE = re.compile(r"(\d{4})-(\d{2})-(\d{2})")
_RANGE_SEP = re.compile(r"^\s*(?:到|至|~|～|-|–|—|to|until|till|and)\s*$", re.IGNORECASE)


def _cn_number(text: str | None) -> float:
    if not text:
        return 1
    try:
        return float(text)
    except ValueError:
        pass
    if text in {"a", "an", "one"}:
        return 1
    if text.startswith("half"):
        return 0.5
    if text == "two":
        return 2
    if text == "three":
        return 3
    total = 0.0
    if "十" in text:
        head, _, tail = text.partition("十")
        total = (_CN_NUM.get(head, 1) if head else 1) * 10 + (_CN_NUM.get(tail, 0) if tail else 0)
        return total
    return sum(_CN_NUM.get(ch, 0) for ch in text) or 1


def _relative_lookback(question: str) -> timedelta | None:
    if _HALF_HOUR_ZH.search(question):
        return timedelta(minutes=30)
    match = _RELATIVE_ZH.search(question)
    if match:
        amount = _cn_number(match.group(1))
        unit = match.group(2)
        return timedelta(hours=amount) if unit in {"小时", "钟头"} else timedelta(minutes=amount)
    match = _RELATIVE_EN.search(question)
    if match:
        amount = _cn_number((match.group(1) or "").lower() or None)
        unit = match.group(2).lower()
        if unit.startswith("h"):
            return timedelta(hours=amount)
        return timedelta(minutes=amount)
    return None


def _clock_times(question: str) -> list[tuple[int, int, int, int]]:
    """(hour, minute, match start, match end) of each clock time in the question, in order."""
    found = [
        (int(m.group(1)), int(m.group(2)), m.start(), m.end()) for m in _CLOCK.finditer(question)
    ]
    taken = [(s, e) for _, _, s, e in found]
    for m in _CLOCK_HOUR_ZH.finditer(question):
        if not any(s <= m.start() < e for s, e in taken):
            found.append((int(m.group(1)), 0, m.start(), m.end()))
    return sorted(found, key=lambda item: item[2])


def _at(now: datetime, hour: int, minute: int, date: tuple[int, int, int] | None) -> datetime:
    if date:
        base = now.replace(year=date[0], month=date[1], day=date[2])
        return base.replace(hour=hour, minute=minute, second=0, microsecond=0)
    moment = now.replace(hour=hour, minute=minute, second=0, microsecond=0)
    if moment > now:  # "10:20" asked at 00:10 means yesterday
        moment -= timedelta(days=1)
    return moment


def window_from_question(
    question: str, now: datetime
) -> tuple[datetime, datetime, datetime | None] | None:
    """(start, end, reported onset) from times in the question, or None when it names none."""
    date_match = _DATE.search(question)
    date = (
        (int(date_match.group(1)), int(date_match.group(2)), int(date_match.group(3)))
        if date_match
        else None
    )
    clocks = _clock_times(question)
    if clocks:
        hour, minute, _, end_pos = clocks[0]
        try:
            onset = _at(now, hour, minute, date)
        except ValueError:
            onset = None
        if onset is not None:
            end = now
            if len(clocks) > 1:
                between = question[end_pos : clocks[1][2]]
                if _RANGE_SEP.match(between) or re.fullmatch(r"\s*(?:到|至|~|-|to)\s*", between):
                    try:
                        candidate = _at(now, clocks[1][0], clocks[1][1], date)
                    except ValueError:
                        candidate = None
                    if candidate and candidate > onset:
                        end = min(candidate + timedelta(minutes=5), now)
            if onset >= end:
                return None
            return onset - ONSET_LEAD, end, onset
    lookback = _relative_lookback(question)
    if lookback:
        return now - lookback, now, None
    return None


def services_from_text(text: str, known: list[str]) -> list[str]:
    """Known services named in ``text`` (any case) plus service-looking tokens, in text order."""
    lowered = text.lower()
    hits: list[tuple[int, str]] = []
    for name in known:
        if not name:
            continue
        match = re.search(rf"(?<![\w-]){re.escape(name.lower())}(?![\w-])", lowered)
        if match:
            hits.append((match.start(), name))
    known_lower = {k.lower() for k in known}
    for match in SERVICE_TOKEN.finditer(text):
        token = match.group(1)
        if token.lower() not in known_lower:
            hits.append((match.start(), token.lower()))
    ordered: list[str] = []
    for _, name in sorted(hits, key=lambda item: (item[0], item[1])):
        if name not in ordered:
            ordered.append(name)
    return ordered


def symptoms_from_text(text: str) -> list[str]:
    lowered = text.lower()
    found = []
    for symptom, words in SYMPTOM_KEYWORDS.items():
        for word in words:
            if word.isascii() and word.replace(" ", "").isalnum():
                # words need a word start; codes such as 5xx only no digit before them
                before = r"(?<!\d)" if word[0].isdigit() else r"(?<![a-z0-9])"
                if re.search(rf"{before}{re.escape(word)}", lowered):
                    found.append(symptom)
                    break
            elif word in lowered:
                found.append(symptom)
                break
    return found


def _alert_text(alert: dict[str, Any] | None) -> tuple[str, list[str]]:
    if not isinstance(alert, dict):
        return "", []
    raw_labels, raw_annotations = alert.get("labels"), alert.get("annotations")
    labels: dict[str, Any] = raw_labels if isinstance(raw_labels, dict) else {}
    annotations: dict[str, Any] = raw_annotations if isinstance(raw_annotations, dict) else {}
    named = [
        str(labels[key])
        for key in ("service", "app", "job", "service_name", "container")
        if isinstance(labels.get(key), str) and labels.get(key)
    ]
    text = " ".join(
        str(v) for v in [*labels.values(), *annotations.values()] if isinstance(v, str | int)
    )
    return text, named


def plan_build(request: PlannerRequest) -> PlannerOutput:
    with language_override(lang_key(request.language)):
        return _plan(request)


def _plan(request: PlannerRequest) -> PlannerOutput:
    known = sorted({s for s in request.services if isinstance(s, str) and s})
    alert_text, alert_services = _alert_text(request.alert)

    services = services_from_text(request.question, known)
    for name in alert_services:
        if name not in services:
            services.append(name)
    if not services:
        for turn in reversed(request.history or []):
            previous = services_from_text(str(turn.get("question", "")), known)
            if previous:
                services = previous
                break

    now = time_parse(request.now)
    window: TimeWindow | None = None
    notes: list[str] = []
    if now is not None:
        parsed = window_from_question(request.question, now)
        if parsed is None and request.alert:
            starts = time_parse((request.alert or {}).get("startsAt"))
            if starts is not None and starts < now:
                parsed = (starts - ONSET_LEAD, now, starts)
        if parsed is not None:
            start, end, onset = parsed
            window = TimeWindow(start=time_format(start), end=time_format(end))
            if onset is not None:
                note = gettext("用户报告的开始时间 {onset}，窗口提前 10 分钟")
                notes.append(note.format(onset=time_format(onset)))
        elif request.window and request.window.get("start") and request.window.get("end"):
            window = TimeWindow(start=request.window["start"], end=request.window["end"])
        else:
            window = TimeWindow(start=time_format(now - DEFAULT_LOOKBACK), end=time_format(now))
    elif request.window and request.window.get("start") and request.window.get("end"):
        window = TimeWindow(start=request.window["start"], end=request.window["end"])

    symptoms = symptoms_from_text(f"{request.question} {alert_text}")
    focus = [_focus_texts()[s] for s in symptoms] or [
        gettext("各服务相对自身基线最异常的指标与日志")
    ]
    if not services:
        notes.append(gettext("问题未点名服务：检查环境中的全部服务"))
    return PlannerOutput(
        services=services,
        window=window,
        symptoms=symptoms,
        focus=focus,
        tools=list(tool_names()),  # every registered tool: the Executor picks among them
        notes=gettext("；").join(notes),
    )


def _focus_texts() -> dict[str, str]:
    """What to look at for each symptom the question names."""
    return {
        "timeout": gettext("请求延迟与超时日志，以及连接池/线程池是否饱和"),
        "errors": gettext("错误率与新出现或激增的 ERROR 日志模板"),
        "latency": gettext("延迟指标相对基线的变化，以及下游依赖的慢调用"),
        "memory": gettext("内存使用、GC 与 OOM 相关指标和日志"),
        "disk": gettext("磁盘使用率、剩余空间与写入失败日志"),
        "cpu": gettext("CPU 使用率与限流指标"),
        "connection": gettext("连接池活跃/等待连接数与获取连接失败的日志"),
        "restart": gettext("重启次数、OOM 终止与崩溃日志"),
        "change": gettext("发布或配置变更时间点前后的错误变化"),
        "traffic": gettext("请求量相对基线的变化"),
    }
