"""What a Gatekeeper finding's ``detail`` says, as a stable code and its parameters.

A finding stores its English ``detail`` (exports, the API, older rows) and, next to it,
``detail_code`` and ``detail_params``; a page words the code through gettext in its
own language (``chat.templatetags.chat_tags.finding_detail``). Parameters are the
numbers, ids and names the detail names, as stored: ``binding``/``bindings`` are
binding indexes as the model wrote them (pages number evidence from 1), ``where`` is
derived from ``trace_ref`` and ``chunk``. The findings parsing writes (a malformed claim
or binding, a dropped item, an unusable output) are worded here too (``PARSE_DETAILS``),
so one catalogue words every finding a report holds.
"""

from __future__ import annotations

from django.utils.functional import Promise
from django.utils.translation import gettext_lazy as _
from django.utils.translation import pgettext

from diagnosis.flow.parsing import PARSE_DETAILS

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
