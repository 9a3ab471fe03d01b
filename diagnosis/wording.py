"""What the pages say for the codes the core stores: one catalogue, in gettext.

The core stores what happened as stable codes with parameters (a parse status, a
parse or Gatekeeper finding's ``detail_code`` and ``detail_params``, a routing
note's code, a Composer-guard finding); the pages of ``chat`` and ``audit`` word
each code here in the reader's language, through their template tags
(``chat.templatetags.chat_tags``, ``audit.templatetags.audit_tags``) and the admin.
Nothing here decides anything: the stages that write the codes do not import it,
so a wording change never changes a diagnosis. The one other reader is the offline
Verifier, which names a parse status in words in a retry instruction.

Parameters are the numbers, ids and names a detail names, as stored; ``claim`` and
``item`` number from 1, as pages do; evidence is numbered from 1 as the pages number
it (``evidence_in_sentence``).
"""

from __future__ import annotations

from django.utils.functional import Promise
from django.utils.translation import gettext_lazy as _
from django.utils.translation import pgettext

# What each parse status means, in a reader's language (the audit pages' labels; a retry
# instruction that names why an output did not parse can say it in words).
PARSE_STATUS_WORDS: dict[str, Promise] = {
    "parsed_v2": _("已解析"),
    "parsed_v1": _("已解析（旧格式 v1）"),
    "empty": _("输出为空"),
    "invalid_json": _("输出中没有 JSON"),
    "not_an_object": _("JSON 不是对象"),
    "schema_invalid": _("结构不符合约定"),
    "truncated": _("输出被截断（达到 max_tokens 上限，对象不完整）"),
}

# What a parse finding's (or a stage's) ``detail`` says, as a stable code and its
# parameters, in a reader's language. ``claim`` and ``item`` number from 1, as pages do;
# ``value`` is what the model wrote, as written; ``fields`` are the contract's field paths.
PARSE_DETAILS: dict[str, Promise] = {
    "output_empty": _("输出是空的"),
    "output_no_json": _("输出中找不到 JSON 值"),
    "output_truncated": _("输出在 JSON 对象闭合前就被截断了（可能达到了 max_tokens 上限）"),
    "output_not_object": _("输出的 JSON 值不是对象（JSON 类型：%(type)s）"),
    "output_invalid": _("输出不符合约定"),
    "output_fields_invalid": _("输出中这些字段不符合约定：%(fields)s"),
    "parse_failed": _("解析输出时出错（%(error)s）"),
    "claims_missing": _("输出没有 claims 字段，不是 Executor 的回答"),
    "claims_not_list": _("claims 不是列表：%(value)s"),
    "answer_version_unknown": _("answer_version %(value)s 未知，按 %(read_as)s 读取"),
    "claim_not_object": _("第 %(claim)s 条论断不是对象（%(value)s），已丢弃"),
    "claim_id_missing": _("第 %(claim)s 条论断没有可用的 claim_id（%(value)s），已丢弃"),
    "claim_fields_invalid": _(
        "第 %(claim)s 条论断（%(claim_id)s）的这些字段不符合约定：%(fields)s，已丢弃"
    ),
    "claim_text_missing": _("claim_text 缺失或不是字符串（%(value)s），论断一律降级"),
    "claim_type_unknown": _("claim_type %(value)s 不是已知类型（%(known)s），按 other 处理"),
    "support_level_unknown": _(
        "support_level %(value)s 不是 direct、indirect 或 none，按 direct 检查"
    ),
    "bindings_not_list": _("第 %(claim)s 条论断的 evidence_bindings 不是列表：%(value)s"),
    "binding_not_object": _("这条证据绑定不是对象：%(value)s"),
    "binding_field_missing": _("%(field)s 缺失或不是字符串：%(value)s"),
    "binding_field_not_string": _("%(field)s 不是字符串：%(value)s"),
    "binding_ids_not_integers": _("source_invocation_ids 不是整数列表：%(value)s"),
    "binding_fields_invalid": _("这条证据绑定的这些字段不符合约定：%(fields)s"),
    "items_not_list": _("%(field)s 不是列表（%(value)s），按空列表读取"),
    "item_not_object": _("%(field)s 的第 %(item)s 项不是对象（%(value)s），已丢弃"),
    "item_text_missing": _(
        "%(field)s 的第 %(item)s 项缺少 %(text_field)s 或它不是字符串（%(value)s），已丢弃"
    ),
    "item_empty": _("%(field)s 的第 %(item)s 项是空字符串，已丢弃"),
    "item_not_string": _("%(field)s 的第 %(item)s 项不是字符串（%(value)s），已丢弃"),
    "item_failed": _("%(field)s 的第 %(item)s 项解析出错（%(error)s），已丢弃"),
}

# What each finding says, in a reader's language (a finding is ``code`` or ``code:value``).
GUARD_FINDING_WORDS: dict[str, Promise] = {
    "empty_answer": _("回答为空"),
    "answer_is_json": _("回答是 JSON"),
    "raw_field": _("回答里有内部字段：%(value)s"),
    "new_number": _("回答里出现了撰写输入中没有的数字：%(value)s"),
    "new_time": _("回答里出现了撰写输入中没有的时间：%(value)s"),
    "new_date": _("回答里出现了撰写输入中没有的日期：%(value)s"),
    "new_identifier": _("回答里出现了撰写输入中没有的标识符：%(value)s"),
    "new_service": _("回答里出现了撰写输入中没有的服务：%(value)s"),
}

# What each routing note says, in the reader's language (parameters as RouteNote.params).
ROUTE_NOTES: dict[str, Promise] = {
    "verifier_malformed": _("核验器的回答无法使用（%(status)s），结论降为置信度低"),
    "verifier_allowed_demoted_claims": _(
        "核验器认可了证据校验降级的论断 %(claims)s：通过降为置信度低，这些论断不会写进回答"
    ),
    "retry_budget_exhausted": _("重试次数已用完（最多 %(max_retries)s 次），结论降为置信度低"),
    "pass_without_accepted_claims": _("没有一条论断通过证据校验，通过降为置信度低"),
    "scope_unknown_services": _("问题提到了环境中没有的服务（%(services)s）：通过降为置信度低"),
}

# What a Gatekeeper finding's ``detail`` says (``where`` is derived from ``trace_ref`` and
# ``chunk``; ``binding``/``bindings`` are binding indexes as the model wrote them).
FINDING_DETAILS: dict[str, Promise] = {
    **PARSE_DETAILS,
    "tool_name_mismatch": _("证据写的工具是“%(tool)s”，%(trace_ref)s 实际是“%(actual)s”"),
    "invocation_failed": _("%(trace_ref)s（%(tool)s）结束时的状态是“%(status)s”"),
    "too_many_fragments": _("%(where)s：摘录有 %(fragments)s 个片段，最多允许 %(max)s 个"),
    "excerpt_too_short": _(
        "%(where)s：规范化后摘录只有 %(length)s 个字母或数字，至少需要 %(min)s 个"
    ),
    "fragment_too_short": _(
        "%(where)s：第 %(position)s 个片段（共 %(fragments)s 个，“%(text)s”）只有 "
        "%(length)s 个字母或数字，每个片段至少需要 %(min)s 个"
    ),
    "number_mismatch": _("%(where)s：“%(text)s”附近的文字在输出中，但数字不同"),
    "excerpt_not_found": _("%(where)s：输出中没有这段摘录：“%(text)s”"),
    "fragment_not_found": _(
        "%(where)s：输出中没有第 %(position)s 个片段（共 %(fragments)s 个）：“%(text)s”"
    ),
    "fragments_too_far_apart": _(
        "%(where)s：各片段按顺序出现，但彼此相距都超过 %(gap)s 个字符（应是同一条记录，"
        "而不是从输出各处拼凑）"
    ),
    "excerpt_is_instruction": _("%(where)s：摘录读起来是指令或结论（“%(phrase)s”），不是证据"),
    "unknown_trace_ref": _("本会话没有追踪引用为 %(source_id)s 的调用"),
    "unknown_chunk": _("知识块 %(source_id)s 不是本会话的 lookup_knowledge 调用返回的"),
    "unknown_invocation": _("调用 %(invocation)s 不存在"),
    "unknown_source_type": _(
        "来源类型“%(source_type)s”既不是 tool_trace 也不是 lookup_evidence_block"
    ),
    "invocation_not_in_session": _("调用 %(invocation)s 属于另一个会话"),
    "source_id_mismatch": _(
        "来源 %(source_id)s 不是调用 %(invocation)s（%(trace_ref)s，%(tool)s）"
    ),
    "claim_fact_unbound": _("“%(fact)s”不在任何已绑定的摘录中（%(bindings)s）"),
    "claim_not_specific": _(
        "论断没有指明证据可以绑定的服务、数字、时间或标识符；确认的论断必须指明具体对象"
    ),
    "kind_unbound": _(
        "论断给出的根因类型“%(kind)s”在它所引用的关于 %(entity)s 的指标或日志摘录中都看不到"
        "（%(bindings)s）"
    ),
    "hypothesis_kind_unshown": _(
        "第 %(hypothesis)s 条假设给出的根因类型“%(kind)s”在本次会话关于 %(entity)s 的指标、日志或"
        "链路输出中都看不到；该假设保留，但不带类型"
    ),
    "hypothesis_text_fact_unbound": _(
        "第 %(hypothesis)s 条假设写出的“%(fact)s”不在本次会话的任何工具输出中；该假设不进入回答"
    ),
    "hypothesis_basis_fact_unbound": _(
        "第 %(hypothesis)s 条假设的依据写出的“%(fact)s”不在本次会话的任何工具输出中；"
        "该依据不进入回答"
    ),
    "no_bindings": _("论断没有任何证据绑定"),
    "unknown_claim_type": _("论断类型“%(claim_type)s”"),
    "duplicate_claim_id": _("前面已有一条论断的编号是 %(claim_id)s；这一条被降级"),
    "knowledge_only_binding": _(
        "直接论断需要一条指向 query_metrics 或 query_logs 的有效证据绑定；"
        "运行手册的文字不能证实当前正在发生的事"
    ),
    "invalid_binding_beside_valid": _(
        "其中 %(bindings)s 无效：确认的论断不会因为它的其他证据绑定有效就被信任"
    ),
    "gatekeeper_failed": _("证据校验出错（%(error)s），所有论断都被降级"),
    "claim_check_failed": _("检查这条论断时出错（%(error)s）"),
}

# The location a detail names: an invocation, or a knowledge chunk of one.
WHERE_CHUNK = _("%(trace_ref)s 中的知识块 %(chunk)s")


def evidence_in_sentence(index: object) -> str:
    """A binding's index (as the model wrote it, from 0) as a sentence names it.

    Evidence is numbered from 1 as the pages number it; in English a sentence says
    "evidence 1" where a heading says "Evidence 1" (``chat_tags.evidence_label``).
    """
    try:
        number = int(str(index)) + 1
    except ValueError:
        return str(index)
    return pgettext("in a sentence", "证据 %(n)s") % {"n": number}
