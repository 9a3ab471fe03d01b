# ruff: noqa: E501 -- wording tables read best one phrase a line
"""Offline Verifier: classify each claim from the Verifier payload alone, then decide.

It reads only what the payload carries: the Executor's structured output, the
Gatekeeper report and the bounded tool trace summary. It never calls a tool.

Rules beyond the evidence bindings, each named in its reason:

- universal scope ("所有", "全部", "整个", "全站", "all", "every", "entire",
  "whole", …) that the claim's own excerpts do not carry is ``overstated``;
- a claim that users are affected ("用户无法访问", "users cannot …", "outage")
  needs an excerpt showing requests failing (an error rate, failed or rejected
  requests, 5xx): a symptom of one component is ``overstated``;
- absolute wording ("宕机", "down", "completely") the evidence lacks is
  ``overstated``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from diagnosis.contracts import (
    ALLOWED_CLASSIFICATIONS,
    ClaimCheck,
    Classification,
    Decision,
    FindingCode,
    ParseStatus,
    RetryRequest,
    TraceSummaryEntry,
    Verdict,
    VerifierOutput,
    VerifierPayload,
)
from diagnosis.i18n import language_override
from diagnosis.wording import PARSE_STATUS_WORDS

PARSED = {ParseStatus.PARSED_V2, ParseStatus.PARSED_V1}
CAUSAL_TYPES = {"root_cause", "contributing_factor"}

# Absolute wording a claim may only use when its evidence says so.
ABSOLUTE_ZH = (
    "宕机",
    "崩溃",
    "挂了",
    "完全不可用",
    "全部失败",
    "彻底",
    "永久",
    "数据丢失",
    "全部请求",
    "所有请求",
    "瘫痪",
)
ABSOLUTE_EN = (
    "down",
    "crash",
    "crashed",
    "outage",
    "completely",
    "totally",
    "always",
    "never",
    "all requests",
    "data loss",
    "dead",
)
UP_WORDS = (
    "升高",
    "上升",
    "增加",
    "增长",
    "飙升",
    "激增",
    "上涨",
    "rose",
    "rise",
    "increase",
    "spike",
    "surge",
    "grew",
    "higher",
)
DOWN_WORDS = ("下降", "降低", "减少", "回落", "fell", "fall", "drop", "decrease", "lower")
HEDGES = ("可能", "也许", "或许", "疑似", "likely", "may ", "might", "possibly", "probably")

# A claim whose scope is universal: its excerpts must carry the same scope word.
UNIVERSAL_ZH = ("所有", "全部", "整个", "全站", "全体", "全量", "每个", "每一个", "一律")
UNIVERSAL_EN = ("all", "every", "entire", "whole", "everything", "everyone", "everybody")
# An excerpt that is an aggregate over a set carries the set's scope itself.
AGGREGATE_WORDING = re.compile(
    r"allocated resources|\b(?:total|totals|sum|summed|aggregate)\b|合计|总计|共计|总量|汇总",
    re.IGNORECASE,
)
_WHOLE_COUNT = re.compile(r"(?<![\d.])(\d+) ?(?:of|/) ?(\d+)(?![\d.])")
# A claim that says users are affected: it needs evidence of failing requests at the entry.
IMPACT_WORDING = re.compile(
    r"(?:用户|客户|访客)[^。，,]{0,8}?(?:无法|不能|访问不了|登录不了|受到?影响|请求失败|打不开)|全站|"
    r"影响(?:所有|全部)?用户|"
    r"\b(?:users?|customers?|clients?)\b[^.。]{0,40}?\b(?:cannot|can't|can not|unable|fail|affected|impacted)|"
    r"\b(?:outage|site[- ]wide|down for (?:users|everyone|customers))\b",
    re.IGNORECASE,
)
# Evidence of impact at the entry: requests (or an endpoint) failing, not one part's symptom.
_REQUESTS = re.compile(
    r"request|requests|http|grpc|status|code=|uri|route|endpoint|api|availability|"
    r"请求|接口|可用率|成功率|错误率",
    re.IGNORECASE,
)
_FAILING = re.compile(
    r"error|errors|fail|failed|failure|5xx|\b5\d\d\b|reject|refused|unavailable|"
    r"失败|错误|拒绝|不可用|成功率",
    re.IGNORECASE,
)


def _texts() -> dict[str, str]:
    """The Verifier's wording in the active language (its reasons name the rule)."""
    return {
        "demoted": _("Gatekeeper 降级了该声明（{codes}），它没有有效的证据绑定"),
        "contradicted": _("工具轨迹显示 {metric} 的方向是 {direction}，与声明相反"),
        "external": _("声明涉及的 {entity} 不在本次工具轨迹中"),
        "overstated": _("绝对措辞：声明使用了证据中没有的绝对措辞（{word}）"),
        "universal": _("范围越界：声明说“{word}”，但它引用的摘录没有这个范围"),
        "impact": _(
            "影响缺少证据：声明说用户受到影响，但摘录只显示单个组件的症状，"
            "没有入口处的错误率或失败请求"
        ),
        "kind_unbound": _(
            "类型缺少证据：摘录显示了所说的现象，但没有一条显示所说的根因类型，"
            "只能作为不带类型的假设"
        ),
        "kind_retry": _(
            "根因的类型（{kinds}）在所引用的摘录中看不到：请引用显示该类型的指标或日志"
            "（例如该服务的 CPU、内存、磁盘、网络序列或错误日志），或改为证据显示的类型"
        ),
        "direct": _("证据绑定有效，摘录直接支持该观察"),
        "root_direct": _("同一服务的指标与日志证据都直接支持该根因"),
        "root_inference": _("证据有效但不足以直接证明因果，只能作为推断"),
        "indirect": _("支持程度为间接，只能作为推断"),
        "bounded": _("可能：{text}"),
        "missing_metrics": _("相关服务的指标查询结果（query_metrics）"),
        "missing_logs": _("相关服务的 ERROR/WARN 日志（query_logs）"),
        "retry_instructions": _(
            "请补充查询相关服务的指标和日志，并只用工具输出中逐字出现的摘录作为证据；"
            "声明中的每个数值、时间和名称都要出现在它引用的摘录里"
        ),
        "parse_retry": _("Executor 输出无法解析：{status}。请输出合法的 executor_evidence_v2 JSON"),
        "none": _("没有可核验的声明"),
    }


def _words() -> tuple[dict[Classification, str], dict[Decision, str]]:
    """Classifications and decisions as the pages name them (the same msgids), so the
    stored summary holds no raw code."""
    classifications = {
        Classification.DIRECT_OBSERVATION: _("直接观测"),
        Classification.REASONABLE_INFERENCE: _("合理推断"),
        Classification.OVERSTATED: _("表述过度"),
        Classification.UNSUPPORTED: _("缺乏支持"),
        Classification.EXTERNAL_UNKNOWN: _("超出证据范围"),
        Classification.CONTRADICTED: _("与证据矛盾"),
    }
    decisions = {
        Decision.PASS: _("证据充分"),
        Decision.LOW_CONFID: _("置信度低"),
        Decision.REJECT: _("无法确认"),
        Decision.RETRY: _("要求重试"),
    }
    return classifications, decisions


_CJK = re.compile(r"[\u4e00-\u9fff]")


def _lang(payload: VerifierPayload) -> str:
    return "zh" if _CJK.search(payload.original_query or "") or not payload.original_query else "en"


def _summary_data(entry: TraceSummaryEntry) -> Any:
    try:
        return json.loads(entry.summary)
    except (TypeError, ValueError):
        return None


def _series_directions(entry: TraceSummaryEntry) -> list[tuple[str, str, str]]:
    """(service, metric, direction) of each series the summary describes."""
    data = _summary_data(entry)
    found: list[tuple[str, str, str]] = []
    if isinstance(data, dict):
        for item in data.get("series") or []:
            if isinstance(item, dict) and item.get("metric"):
                service = str(item.get("service") or _arg(entry, "service"))
                found.append((service, str(item["metric"]), str(item.get("direction") or "")))
        return found
    text = entry.summary or ""
    for match in re.finditer(r'"metric"\s*:\s*"([^"]+)"', text):
        tail = text[match.end() : match.end() + 600]
        direction = re.search(r'"direction"\s*:\s*"(up|down|flat)"', tail)
        if direction:
            found.append((_arg(entry, "service"), match.group(1), direction.group(1)))
    return found


def _arg(entry: TraceSummaryEntry, name: str) -> str:
    args = entry.arguments if isinstance(entry.arguments, dict) else {}
    value = args.get(name)
    return str(value) if value else ""


def _mentions(entry: TraceSummaryEntry, entity: str) -> bool:
    if not entity:
        return False
    needle = entity.lower()
    return needle == _arg(entry, "service").lower() or needle in (entry.summary or "").lower()


def _names(metric: str, text: str) -> bool:
    if len(metric) < 4:
        return False
    return re.search(rf"(?<![\w]){re.escape(metric)}(?![\w])", text) is not None


def _claim_direction(text: str) -> str | None:
    lowered = text.lower()
    up = any(w in lowered for w in UP_WORDS)
    down = any(w in lowered for w in DOWN_WORDS)
    if up and not down:
        return "up"
    if down and not up:
        return "down"
    return None


def _word_not_carried(
    text: str, excerpts: str, zh_words: tuple[str, ...], en_words: tuple[str, ...]
) -> str | None:
    """The first of the words that the claim uses and none of its excerpts carries."""
    lowered = text.lower()
    excerpt_text = excerpts.lower()
    for word in zh_words:
        if word in lowered and word not in excerpt_text:
            return word
    for word in en_words:
        pattern = rf"(?<![a-z-]){re.escape(word)}(?![a-z-])"
        if re.search(pattern, lowered) and not re.search(pattern, excerpt_text):
            return word
    return None


def _absolute_word(text: str, excerpts: str) -> str | None:
    return _word_not_carried(text, excerpts, ABSOLUTE_ZH, ABSOLUTE_EN)


def _is_aggregate(excerpts: str) -> bool:
    """The excerpt itself states a figure over a whole set: a total, kubectl's
    "Allocated resources" block (a sum over every pod of the node), "3 of 3" or "3/3"."""
    if AGGREGATE_WORDING.search(excerpts):
        return True
    return any(m.group(1) == m.group(2) for m in _WHOLE_COUNT.finditer(excerpts))


def _universal_word(text: str, excerpts: str) -> str | None:
    """A universal scope word of the claim that none of its excerpts carries.

    A claim about a whole set does not overstate an excerpt that is itself an
    aggregate over that set: the total is what the output says.
    """
    if _is_aggregate(excerpts):
        return None
    return _word_not_carried(text, excerpts, UNIVERSAL_ZH, UNIVERSAL_EN)


def _shows_impact(excerpts: str) -> bool:
    """Some excerpt shows requests failing (error rate, failed requests, 5xx)."""
    return any(_REQUESTS.search(line) and _FAILING.search(line) for line in excerpts.splitlines())


def _claims(payload: VerifierPayload) -> list[dict[str, Any]]:
    output = payload.executor_structured_output or {}
    claims = output.get("claims") if isinstance(output, dict) else None
    return [c for c in claims or [] if isinstance(c, dict) and c.get("claim_id")]


def _bindings(claim: dict[str, Any]) -> list[dict[str, Any]]:
    return [b for b in claim.get("evidence_bindings") or [] if isinstance(b, dict)]


@dataclass(frozen=True)
class _Claim:
    """One claim as the Verifier reads it, with the trace entries and excerpts it binds."""

    claim_id: str
    text: str
    entity: str
    claim_type: str
    support: str
    bound: list[TraceSummaryEntry]
    excerpts: str

    @classmethod
    def read(cls, claim: dict[str, Any], payload: VerifierPayload) -> _Claim:
        traces = {e.trace_ref: e for e in payload.tool_trace_summary}
        bindings = _bindings(claim)
        return cls(
            claim_id=str(claim.get("claim_id")),
            text=str(claim.get("claim_text") or ""),
            entity=str(claim.get("entity") or ""),
            claim_type=str(claim.get("claim_type") or ""),
            support=str(claim.get("support_level") or "direct"),
            bound=[
                traces[str(b.get("source_id"))]
                for b in bindings
                if str(b.get("source_id")) in traces
            ],
            excerpts="\n".join(str(b.get("evidence_excerpt") or "") for b in bindings),
        )


def claim_check(claim: dict[str, Any], payload: VerifierPayload) -> ClaimCheck:
    c = _Claim.read(claim, payload)
    # The opposite of what the trace shows is a contradiction, accepted or not.
    contradicted = _contradiction(c, payload)
    if contradicted is not None:
        return contradicted
    in_trace = bool(c.bound) or any(_mentions(e, c.entity) for e in payload.tool_trace_summary)
    if payload.gatekeeper.verdict_for(c.claim_id) != Verdict.ACCEPTED:
        return _not_accepted(c, payload, in_trace)
    if c.entity and not in_trace and c.entity.lower() not in c.excerpts.lower():
        return _check(c, Classification.EXTERNAL_UNKNOWN, _texts()["external"], entity=c.entity)
    return _overstatement(c) or _support(c)


def _check(
    c: _Claim,
    classification: Classification,
    reason: str,
    bounded: str | None = None,
    **values: str,
) -> ClaimCheck:
    reason = reason.format(**values) if values else reason
    if bounded is None:
        return ClaimCheck(claim_id=c.claim_id, classification=classification, reason=reason)
    return ClaimCheck(
        claim_id=c.claim_id, classification=classification, reason=reason, bounded_wording=bounded
    )


def _contradiction(c: _Claim, payload: VerifierPayload) -> ClaimCheck | None:
    """A series the claim names moved the other way in the trace."""
    direction = _claim_direction(c.text)
    if not direction:
        return None
    candidates = c.bound or [e for e in payload.tool_trace_summary if _mentions(e, c.entity)]
    for entry in candidates:
        for service, metric, actual in _series_directions(entry):
            if _names(metric, c.text) and (not c.entity or service in {"", c.entity}):
                if actual and actual != direction and actual in {"up", "down", "flat"}:
                    reason = _texts()["contradicted"]
                    return _check(
                        c, Classification.CONTRADICTED, reason, metric=metric, direction=actual
                    )
    return None


def _not_accepted(c: _Claim, payload: VerifierPayload, in_trace: bool) -> ClaimCheck:
    """A claim the Gatekeeper demoted: outside the trace, or unsupported with its codes."""
    t = _texts()
    if c.entity and not in_trace:
        return _check(c, Classification.EXTERNAL_UNKNOWN, t["external"], entity=c.entity)
    codes = _codes(payload, c.claim_id)
    if codes == [FindingCode.KIND_UNBOUND.value]:
        # what it observed holds; only its kind says more than the excerpts show
        return _check(c, Classification.OVERSTATED, t["kind_unbound"])
    return _check(c, Classification.UNSUPPORTED, t["demoted"], codes=", ".join(codes) or "-")


def _codes(payload: VerifierPayload, claim_id: str) -> list[str]:
    """The Gatekeeper's finding codes of one claim, sorted."""
    for result in payload.gatekeeper.claims:
        if result.claim_id == claim_id:
            return sorted({f.code for f in result.findings})
    return []


def _overstatement(c: _Claim) -> ClaimCheck | None:
    """Universal scope, user impact or absolute wording that the excerpts do not carry."""
    t = _texts()
    scope = _universal_word(c.text, c.excerpts)
    if scope:
        return _check(c, Classification.OVERSTATED, t["universal"], word=scope)
    if IMPACT_WORDING.search(c.text) and not _shows_impact(c.excerpts):
        return _check(c, Classification.OVERSTATED, t["impact"])
    word = _absolute_word(c.text, c.excerpts)
    if word:
        return _check(c, Classification.OVERSTATED, t["overstated"], word=word)
    return None


def _support(c: _Claim) -> ClaimCheck:
    """An accepted claim: a direct observation, or an inference worded as one."""
    t = _texts()
    hedged = any(h in c.text for h in HEDGES)
    bounded = c.text if hedged else t["bounded"].format(text=c.text)
    if c.support != "direct":
        return _check(c, Classification.REASONABLE_INFERENCE, t["indirect"], bounded)
    if c.claim_type in CAUSAL_TYPES:
        tools = {e.tool_name for e in c.bound if not c.entity or _mentions(e, c.entity)}
        if {"query_metrics", "query_logs"} <= tools:
            return _check(c, Classification.DIRECT_OBSERVATION, t["root_direct"])
        return _check(c, Classification.REASONABLE_INFERENCE, t["root_inference"], bounded)
    return _check(c, Classification.DIRECT_OBSERVATION, t["direct"])


def _missing_evidence(payload: VerifierPayload) -> list[str]:
    t = _texts()
    wanted: list[str] = []
    output = payload.executor_structured_output or {}
    for hypothesis in (output.get("hypotheses") or []) if isinstance(output, dict) else []:
        if isinstance(hypothesis, dict):
            for item in hypothesis.get("needed_evidence") or []:
                if isinstance(item, str) and item.strip():
                    wanted.append(item.strip())
    tools_ok = {e.tool_name for e in payload.tool_trace_summary if e.status == "ok"}
    if "query_metrics" not in tools_ok:
        wanted.append(t["missing_metrics"])
    if "query_logs" not in tools_ok:
        wanted.append(t["missing_logs"])
    if not wanted:
        wanted = [t["missing_metrics"], t["missing_logs"]]
    return list(dict.fromkeys(wanted))[:6]


def _extra_facts(payload: VerifierPayload) -> list[str]:
    """Confirmed-sounding sentences of a v1 ``user_facing_answer`` that no claim carries."""
    output = payload.executor_structured_output or {}
    answer = output.get("user_facing_answer") if isinstance(output, dict) else None
    if not isinstance(answer, str) or not answer.strip():
        return []
    claim_texts = " ".join(str(c.get("claim_text") or "") for c in _claims(payload))
    facts = []
    for sentence in re.split(r"(?<=[。！？.!?])\s*|\n+", answer):
        sentence = sentence.strip()
        if len(sentence) < 6 or any(h in sentence for h in HEDGES) or sentence in claim_texts:
            continue
        if any(
            w in sentence.lower() for w in ("根因", "原因是", "导致", "root cause", "caused by")
        ):
            facts.append(sentence)
    return facts[:5]


def verify_run(payload: VerifierPayload) -> VerifierOutput:
    with language_override(_lang(payload)):
        return _verify(payload)


def _verify(payload: VerifierPayload) -> VerifierOutput:
    checks = [claim_check(c, payload) for c in _claims(payload)]
    if payload.executor_output_parse_status not in PARSED:
        decision, retry = _unparsed_decision(payload)
        checks = [
            c.model_copy(update={"classification": Classification.UNSUPPORTED})
            if c.classification in ALLOWED_CLASSIFICATIONS
            else c
            for c in checks
        ]
    else:
        decision, retry = _parsed_decision(payload, checks)
    return VerifierOutput(
        decision=decision,
        claim_checks=checks,
        extra_facts=_extra_facts(payload),
        retry_request=retry,
        summary=_summary(checks, decision),
    )


def _unparsed_decision(payload: VerifierPayload) -> tuple[Decision, RetryRequest | None]:
    """Output that did not parse: one retry, then a reject (invalid schema) or low confidence."""
    status = payload.executor_output_parse_status
    if payload.retry_context is None:
        return Decision.RETRY, RetryRequest(
            missing_evidence=_missing_evidence(payload),
            instructions=_texts()["parse_retry"].format(status=PARSE_STATUS_WORDS[status.value]),
        )
    if status == ParseStatus.SCHEMA_INVALID:
        return Decision.REJECT, None
    return Decision.LOW_CONFID, None


def _parsed_decision(
    payload: VerifierPayload, checks: list[ClaimCheck]
) -> tuple[Decision, RetryRequest | None]:
    """A contradiction rejects; nothing allowed retries once; a pass needs a direct
    observation and no root cause that was demoted or not allowed."""
    by_id = {c.claim_id: c for c in checks}
    classes = [c.classification for c in checks]
    roots = [
        str(c["claim_id"]) for c in _claims(payload) if str(c.get("claim_type")) == "root_cause"
    ]
    weak_root = any(by_id[r].classification not in ALLOWED_CLASSIFICATIONS for r in roots)
    demoted_root = any(payload.gatekeeper.verdict_for(r) != Verdict.ACCEPTED for r in roots)
    if Classification.CONTRADICTED in classes:
        return Decision.REJECT, None
    unkinded = [
        str(c.get("root_cause_kind"))
        for c in _claims(payload)
        if FindingCode.KIND_UNBOUND.value in _codes(payload, str(c.get("claim_id")))
    ]
    if unkinded and payload.retry_context is None:
        # a kind the evidence does not show is asked for once: the evidence may be there
        return Decision.RETRY, RetryRequest(
            missing_evidence=_missing_evidence(payload),
            instructions=_texts()["kind_retry"].format(kinds=", ".join(dict.fromkeys(unkinded))),
        )
    if not any(c in ALLOWED_CLASSIFICATIONS for c in classes):
        if payload.retry_context is None:
            return Decision.RETRY, RetryRequest(
                missing_evidence=_missing_evidence(payload),
                instructions=_texts()["retry_instructions"],
            )
        return Decision.LOW_CONFID, None
    direct = Classification.DIRECT_OBSERVATION in classes
    if direct and not demoted_root and not weak_root:
        return Decision.PASS, None
    return Decision.LOW_CONFID, None


def _summary(checks: list[ClaimCheck], decision: Decision) -> str:
    """How many claims got each classification and the decision, in words."""
    classifications, decisions = _words()
    counts = {c: sum(1 for check in checks if check.classification == c) for c in Classification}
    detail = _("，").join(f"{classifications[c]} {n}" for c, n in counts.items() if n)
    summary = ngettext(
        "{n} 条声明：{detail}；核验结论：{decision}",
        "{n} 条声明：{detail}；核验结论：{decision}",
        len(checks),
    )
    return summary.format(
        n=len(checks), detail=detail or _texts()["none"], decision=decisions[decision]
    )
