"""Template helpers of the chat: safe Markdown and plain-word labels."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from django import template
from django.utils.functional import Promise
from django.utils.html import escape, format_html
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import get_language, gettext
from django.utils.translation import gettext_lazy as _
from markdown_it import MarkdownIt
from markdown_it.common.utils import escapeHtml
from markdown_it.renderer import RendererHTML
from markdown_it.token import Token
from markdown_it.utils import OptionsDict

from diagnosis.i18n import language_key
from diagnosis.wording import FINDING_DETAILS, WHERE_CHUNK, evidence_in_sentence

register = template.Library()

ALLOWED_LINK_SCHEMES = ("http://", "https://")
HYPHENATED = re.compile(r"[A-Za-z0-9_.]*[A-Za-z0-9_](?:-[A-Za-z0-9_.]+)+")


def _identifiers_whole(escaped: str) -> str:
    # A hyphenated identifier (payment-service) is laid out whole, never split at a hyphen.
    return HYPHENATED.sub(r'<span class="ident">\g<0></span>', escaped)


def _markdown() -> MarkdownIt:
    # Raw HTML is off, so model text can never become markup; links are http(s) only
    # and images are not rendered (they would fetch third-party URLs).
    md = MarkdownIt("commonmark", {"html": False}).enable("table").disable("image")
    # markdown-it-py takes its link check as an assigned attribute
    md.validateLink = lambda url: url.strip().lower().startswith(ALLOWED_LINK_SCHEMES)  # type: ignore[method-assign]

    def link_open(
        renderer: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: Any
    ) -> str:
        tokens[idx].attrSet("rel", "nofollow noopener noreferrer")
        return renderer.renderToken(tokens, idx, options, env)

    md.add_render_rule("link_open", link_open)

    def text(
        renderer: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: Any
    ) -> str:
        return _identifiers_whole(escapeHtml(tokens[idx].content))

    md.add_render_rule("text", text)
    return md


_MD = _markdown()


@register.filter
def identifiers_whole(text: object) -> SafeString:
    """The text escaped, its hyphenated identifiers kept on one line."""
    return mark_safe(_identifiers_whole(escape(str(text or ""))))  # noqa: S308 (escaped first)


@register.filter
def markdown(text: object) -> SafeString:
    """Render Markdown as HTML; the text's own HTML stays escaped text."""
    return mark_safe(_MD.render(str(text or "")))  # noqa: S308 (html disabled, links checked)


CLASSIFICATION_LABELS = {
    "direct_observation": _("直接观测"),
    "reasonable_inference": _("合理推断"),
    "overstated": _("表述过度"),
    "unsupported": _("缺乏支持"),
    "external_unknown": _("超出证据范围"),
    "contradicted": _("与证据矛盾"),
}

PLACEMENT_LABELS = {
    "allowed_claim": _("已确认"),
    "hypothesis": _("降为假设"),
    "missing_info": _("列为待补信息"),
    "evidence_gap": _("证据不成立，列为缺口"),
    "dropped": _("未采用"),
    "superseded_figure": _("同一序列的数值已由另一条结论给出，未在回答中重复"),
}

FINDING_LABELS = {
    "no_bindings": _("没有证据绑定"),
    "unknown_source_id": _("引用的调用不存在"),
    "invocation_not_in_session": _("引用的调用不属于本会话"),
    "tool_name_mismatch": _("工具名与调用不符"),
    "invocation_failed": _("引用的调用没有成功"),
    "excerpt_not_found": _("摘录不在工具输出中"),
    "excerpt_too_short": _("摘录太短"),
    "number_mismatch": _("数字与证据不符"),
    "knowledge_only_binding": _("只有知识库证据"),
    "duplicate_claim_id": _("结论编号重复"),
    "unknown_claim_type": _("未知的结论类型"),
    "malformed_claim": _("结论格式错误"),
    "malformed_binding": _("证据绑定格式错误"),
    "malformed_item": _("条目格式错误"),
    "source_id_mismatch": _("来源编号不一致"),
    "unknown_source_type": _("未知的来源类型"),
    "fragment_too_short": _("摘录片段太短"),
    "too_many_fragments": _("摘录片段太多"),
    "fragments_too_far_apart": _("摘录片段相距太远，不是同一条记录"),
    "invalid_binding_beside_valid": _("有一条证据绑定无效"),
    "claim_fact_unbound": _("陈述中的事实不在摘录中"),
    "claim_not_specific": _("陈述没有指明具体对象"),
    "kind_unbound": _("根因类型没有证据"),
    "hypothesis_kind_unshown": _("假设的类型没有证据"),
    "hypothesis_fact_unbound": _("假设中的事实不在任何工具输出中"),
    "excerpt_is_instruction": _("摘录是指令而不是证据"),
    "internal_error": _("证据校验出错"),
}

TOOL_STATUS_LABELS = {
    "running": _("进行中"),
    "ok": _("成功"),
    "no_data": _("无数据"),
    "error": _("错误"),
    "timeout": _("超时"),
}


@register.filter
def classification_label(value: str) -> str:
    return str(CLASSIFICATION_LABELS.get(value, value or _("未分类")))


@register.filter
def placement_label(value: str) -> str:
    return str(PLACEMENT_LABELS.get(value, value or _("未采用")))


@register.filter
def finding_label(value: str) -> str:
    return str(FINDING_LABELS.get(value, value))


@register.filter
def tool_status_label(value: str) -> str:
    return str(TOOL_STATUS_LABELS.get(value, value))


@register.filter
def evidence_label(index: object) -> str:
    """How a person reads a binding's index (as the model wrote it, from 0): 证据 1, 证据 2."""
    try:
        number = int(str(index)) + 1
    except ValueError:
        return str(index)
    return gettext("证据 %(n)s") % {"n": number}


# Parameters of a coded note that are binding indexes: shown as evidence is numbered.
_EVIDENCE_PARAMS = frozenset({"binding", "bindings"})


def _param_shown(name: str, value: object, labels: Mapping[str, Mapping[str, object]]) -> str:
    items = value if isinstance(value, list) else [value]
    if name in _EVIDENCE_PARAMS:
        return gettext("、").join(evidence_in_sentence(item) for item in items)
    named = labels.get(name, {})
    return gettext("、").join(str(named.get(str(item), item)) for item in items)


def coded_text(
    messages: Mapping[str, Promise],
    code: object,
    params: object,
    labels: Mapping[str, Mapping[str, object]] | None = None,
) -> str:
    """A note stored as a code and its parameters, worded in the active language.

    ``labels`` name the parameters that are codes themselves (a status) by their label.
    "" when the note has no code this catalogue knows (older rows): the page shows the
    stored text, labelled with the language it was recorded in.
    """
    message = messages.get(str(code)) if code else None
    params = {} if params is None else params  # a note without parameters stores none
    if message is None or not isinstance(params, Mapping):
        return ""
    shown = {str(k): _param_shown(str(k), v, labels or {}) for k, v in params.items()}
    if "trace_ref" in shown:
        where = str(WHERE_CHUNK) % shown if "chunk" in shown else shown["trace_ref"]
        shown.setdefault("where", where)
    try:
        return str(message) % shown
    except (KeyError, TypeError, ValueError):
        return ""


def _field(item: object, name: str) -> object:
    return item.get(name) if isinstance(item, Mapping) else getattr(item, name, None)


@register.filter
def finding_detail(finding: object) -> str:
    """A Gatekeeper finding's detail in the page's language ("" when stored as text only)."""
    return coded_text(
        FINDING_DETAILS,
        _field(finding, "detail_code"),
        _field(finding, "detail_params"),
        {"status": TOOL_STATUS_LABELS},
    )


@register.filter
def duration(seconds: int) -> str:
    minutes, secs = divmod(int(seconds or 0), 60)
    return f"{minutes}:{secs:02d}"


# The languages stored text is recorded in (a session's answer language, or English for
# the Gatekeeper's and the router's own notes), as the UI names them.
LANGUAGE_NAMES = {"zh": _("中文"), "en": _("英文")}


@register.filter
def lang_code(language: str) -> str:
    """The HTML ``lang`` of text recorded in ``language`` ("zh" or "en")."""
    return language_key(language or "zh")


@register.simple_tag
def recorded_in(language: str) -> SafeString | str:
    """A note that stored text reads in ``language`` when the UI is in another one.

    Model text and recorded notes stay as they were recorded; the reader is told in the
    UI's language which language they are in.
    """
    recorded = lang_code(language)
    if recorded == language_key(get_language() or "zh"):
        return ""
    return format_html(
        '<span class="recorded-in">{}</span>',
        _("（原文：%(language)s）") % {"language": LANGUAGE_NAMES[recorded]},
    )
