# ruff: noqa: E501 -- wording tables read best one phrase a line
"""Offline Verifier: classify each claim from the Verifier payload alone, then decide.

It reads only what the payload carries: the Executor's structured output, the
Gatekeeper report and the bounded tool trace summary. It never calls a tool.
"""

from __future__ import annotations

import json
import re
from typing import Any

from diagnosis.contracts import (
    ALLOWED_CLASSIFICATIONS,
    ClaimCheck,
    Classification,
    Decision,
    ParseStatus,
    RetryRequest,
    TraceSummaryEntry,
    Verdict,
    VerifierOutput,
    VerifierPayload,
)

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

T = {
    "zh": {
        "demoted": "Gatekeeper 降级了该声明（{codes}），它没有有效的证据绑定",
        "contradicted": "工具轨迹显示 {metric} 的方向是 {direction}，与声明相反",
        "external": "声明涉及的 {entity} 不在本次工具轨迹中",
        "overstated": "声明使用了证据中没有的绝对措辞（{word}）",
        "direct": "证据绑定有效，摘录直接支持该观察",
        "root_direct": "同一服务的指标与日志证据都直接支持该根因",
        "root_inference": "证据有效但不足以直接证明因果，只能作为推断",
        "indirect": "支持程度为间接，只能作为推断",
        "bounded": "可能：{text}",
        "missing_claims": "没有被接受的直接证据声明",
        "missing_metrics": "相关服务的指标查询结果（query_metrics）",
        "missing_logs": "相关服务的 ERROR/WARN 日志（query_logs）",
        "retry_instructions": "请补充查询相关服务的指标和日志，并只用工具输出中逐字出现的摘录作为证据",
        "parse_retry": "Executor 输出无法解析（{status}），请输出合法的 executor_evidence_v2 JSON",
        "summary": "{n} 条声明：{detail}；决定 {decision}",
        "none": "没有可核验的声明",
    },
    "en": {
        "demoted": "the Gatekeeper demoted this claim ({codes}); it has no valid evidence binding",
        "contradicted": "the tool trace shows {metric} going {direction}, the opposite of the claim",
        "external": "{entity} does not appear in this session's tool trace",
        "overstated": "the claim uses absolute wording ({word}) its evidence does not contain",
        "direct": "valid binding; the excerpt directly shows this observation",
        "root_direct": "metric and log evidence of the same service directly support this cause",
        "root_inference": "the evidence is valid but does not prove causation directly",
        "indirect": "support is indirect; an inference only",
        "bounded": "Likely: {text}",
        "missing_claims": "no accepted claim with direct evidence",
        "missing_metrics": "metric results (query_metrics) for the services involved",
        "missing_logs": "ERROR/WARN logs (query_logs) for the services involved",
        "retry_instructions": "query the metrics and logs of the services involved and use only excerpts copied verbatim from tool output",
        "parse_retry": "the Executor output could not be parsed ({status}); emit valid executor_evidence_v2 JSON",
        "summary": "{n} claims: {detail}; decision {decision}",
        "none": "no claims to check",
    },
}

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


def _absolute_word(text: str, excerpts: str) -> str | None:
    lowered = text.lower()
    excerpt_text = excerpts.lower()
    for word in ABSOLUTE_ZH:
        if word in lowered and word not in excerpt_text:
            return word
    for word in ABSOLUTE_EN:
        pattern = rf"(?<![a-z-]){re.escape(word)}(?![a-z-])"
        if re.search(pattern, lowered) and not re.search(pattern, excerpt_text):
            return word
    return None


def _claims(payload: VerifierPayload) -> list[dict[str, Any]]:
    output = payload.executor_structured_output or {}
    claims = output.get("claims") if isinstance(output, dict) else None
    return [c for c in claims or [] if isinstance(c, dict) and c.get("claim_id")]


def _bindings(claim: dict[str, Any]) -> list[dict[str, Any]]:
    return [b for b in claim.get("evidence_bindings") or [] if isinstance(b, dict)]


def claim_check(claim: dict[str, Any], payload: VerifierPayload, lang: str) -> ClaimCheck:
    t = T[lang]
    claim_id = str(claim.get("claim_id"))
    text = str(claim.get("claim_text") or "")
    entity = str(claim.get("entity") or "")
    claim_type = str(claim.get("claim_type") or "")
    traces = {e.trace_ref: e for e in payload.tool_trace_summary}
    bindings = _bindings(claim)
    bound = [traces[str(b.get("source_id"))] for b in bindings if str(b.get("source_id")) in traces]
    excerpts = "\n".join(str(b.get("evidence_excerpt") or "") for b in bindings)

    # The opposite of what the trace shows is a contradiction, accepted or not.
    direction = _claim_direction(text)
    if direction:
        candidates = bound or [e for e in payload.tool_trace_summary if _mentions(e, entity)]
        for entry in candidates:
            for service, metric, actual in _series_directions(entry):
                if _names(metric, text) and (not entity or service in {"", entity}):
                    if actual and actual != direction and actual in {"up", "down", "flat"}:
                        return ClaimCheck(
                            claim_id=claim_id,
                            classification=Classification.CONTRADICTED,
                            reason=t["contradicted"].format(metric=metric, direction=actual),
                        )

    verdict = payload.gatekeeper.verdict_for(claim_id)
    in_trace = bool(bound) or any(_mentions(e, entity) for e in payload.tool_trace_summary)
    if verdict != Verdict.ACCEPTED:
        if entity and not in_trace:
            return ClaimCheck(
                claim_id=claim_id,
                classification=Classification.EXTERNAL_UNKNOWN,
                reason=t["external"].format(entity=entity),
            )
        codes = []
        for result in payload.gatekeeper.claims:
            if result.claim_id == claim_id:
                codes = sorted({f.code for f in result.findings})
        return ClaimCheck(
            claim_id=claim_id,
            classification=Classification.UNSUPPORTED,
            reason=t["demoted"].format(codes=", ".join(codes) or "-"),
        )

    if entity and not in_trace and entity.lower() not in excerpts.lower():
        return ClaimCheck(
            claim_id=claim_id,
            classification=Classification.EXTERNAL_UNKNOWN,
            reason=t["external"].format(entity=entity),
        )
    word = _absolute_word(text, excerpts)
    if word:
        return ClaimCheck(
            claim_id=claim_id,
            classification=Classification.OVERSTATED,
            reason=t["overstated"].format(word=word),
        )
    bounded = t["bounded"].format(text=text) if not any(h in text for h in HEDGES) else text
    if str(claim.get("support_level") or "direct") != "direct":
        return ClaimCheck(
            claim_id=claim_id,
            classification=Classification.REASONABLE_INFERENCE,
            reason=t["indirect"],
            bounded_wording=bounded,
        )
    if claim_type in CAUSAL_TYPES:
        tools_for_entity = {e.tool_name for e in bound if not entity or _mentions(e, entity)}
        if {"query_metrics", "query_logs"} <= tools_for_entity:
            return ClaimCheck(
                claim_id=claim_id,
                classification=Classification.DIRECT_OBSERVATION,
                reason=t["root_direct"],
            )
        return ClaimCheck(
            claim_id=claim_id,
            classification=Classification.REASONABLE_INFERENCE,
            reason=t["root_inference"],
            bounded_wording=bounded,
        )
    if str(claim.get("support_level") or "direct") != "direct":
        return ClaimCheck(
            claim_id=claim_id,
            classification=Classification.REASONABLE_INFERENCE,
            reason=t["indirect"],
            bounded_wording=bounded,
        )
    return ClaimCheck(
        claim_id=claim_id, classification=Classification.DIRECT_OBSERVATION, reason=t["direct"]
    )


def _missing_evidence(payload: VerifierPayload, lang: str) -> list[str]:
    t = T[lang]
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
    lang = _lang(payload)
    t = T[lang]
    status = payload.executor_output_parse_status
    first_attempt = payload.retry_context is None
    checks = [claim_check(c, payload, lang) for c in _claims(payload)]
    by_id = {c.claim_id: c for c in checks}
    claims = _claims(payload)

    retry: RetryRequest | None = None
    if status not in PARSED:
        if first_attempt:
            decision = Decision.RETRY
            retry = RetryRequest(
                missing_evidence=_missing_evidence(payload, lang),
                instructions=t["parse_retry"].format(status=status.value),
            )
        elif status == ParseStatus.SCHEMA_INVALID:
            decision = Decision.REJECT
        else:
            decision = Decision.LOW_CONFID
        checks = [
            c.model_copy(update={"classification": Classification.UNSUPPORTED})
            if c.classification in ALLOWED_CLASSIFICATIONS
            else c
            for c in checks
        ]
    else:
        classes = [c.classification for c in checks]
        direct = sum(1 for c in classes if c == Classification.DIRECT_OBSERVATION)
        allowed = sum(1 for c in classes if c in ALLOWED_CLASSIFICATIONS)
        weak_root = any(
            str(claim.get("claim_type")) == "root_cause"
            and by_id[str(claim["claim_id"])].classification not in ALLOWED_CLASSIFICATIONS
            for claim in claims
        )
        demoted_root = any(
            str(claim.get("claim_type")) == "root_cause"
            and payload.gatekeeper.verdict_for(str(claim["claim_id"])) != Verdict.ACCEPTED
            for claim in claims
        )
        if Classification.CONTRADICTED in classes:
            decision = Decision.REJECT
        elif allowed == 0:
            if first_attempt:
                decision = Decision.RETRY
                retry = RetryRequest(
                    missing_evidence=_missing_evidence(payload, lang),
                    instructions=t["retry_instructions"],
                )
            else:
                decision = Decision.LOW_CONFID
        elif direct >= 1 and not demoted_root and not weak_root:
            decision = Decision.PASS
        else:
            decision = Decision.LOW_CONFID

    counts: dict[str, int] = {}
    for check in checks:
        counts[check.classification.value] = counts.get(check.classification.value, 0) + 1
    detail = ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or t["none"]
    return VerifierOutput(
        decision=decision,
        claim_checks=checks,
        extra_facts=_extra_facts(payload),
        retry_request=retry,
        summary=t["summary"].format(n=len(checks), detail=detail, decision=decision.value),
    )
