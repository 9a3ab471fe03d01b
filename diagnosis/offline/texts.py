# ruff: noqa: E501 -- wording tables read best one phrase a line
"""The offline engine's wording: Chinese msgids, English in the po file.

Each table is rendered once per language under ``translation.override``; the
engine picks a phrase by key and fills it with ``str.format``.
"""

from __future__ import annotations

from functools import cache

from django.utils.translation import gettext as _
from django.utils.translation import pgettext

from diagnosis.i18n import language_override

PATH_SEP = " → "


@cache
def kind_names(lang: str) -> dict[str, str]:
    """root_cause_kind values as an SRE reads them."""
    with language_override(lang):
        return {
            "cpu": pgettext("root cause kind", "CPU"),
            "memory": pgettext("root cause kind", "内存"),
            "disk": pgettext("root cause kind", "磁盘"),
            "network": pgettext("root cause kind", "网络"),
            "latency": pgettext("root cause kind", "延迟"),
            "errors": pgettext("root cause kind", "错误"),
            "code": pgettext("root cause kind", "代码缺陷"),
            "configuration": pgettext("root cause kind", "配置变更"),
            "dependency": pgettext("root cause kind", "依赖故障"),
            "resource_exhaustion": pgettext("root cause kind", "资源耗尽"),
        }


@cache
def subkind_names(lang: str) -> dict[str, str]:
    """What ran out, as an SRE names it."""
    with language_override(lang):
        return {
            "pool": pgettext("resource kind", "连接池"),
            "memory": pgettext("resource kind", "内存"),
            "disk": pgettext("resource kind", "磁盘空间"),
            "cpu": pgettext("resource kind", "CPU"),
            "threads": pgettext("resource kind", "线程池"),
            "fd": pgettext("resource kind", "文件句柄"),
            "queue": pgettext("resource kind", "队列"),
            "": pgettext("resource kind", "资源"),
        }


@cache
def texts(lang: str) -> dict[str, str]:
    """Every phrase of the Executor's claims, hypotheses, actions and gaps."""
    with language_override(lang):
        return {**_claim_texts(), **_hypothesis_texts(), **_action_texts()}


def _claim_texts() -> dict[str, str]:
    """Symptoms, causes, changes and the cascade."""
    return {
        "metric_up": _("{svc} 的 {metric}{labels} 相对基线升高"),
        "metric_down": _("{svc} 的 {metric}{labels} 相对基线下降"),
        "metric_level": _("{svc} 的 {metric}{labels}"),
        "near_empty": _("已接近耗尽"),
        "near_empty_state": pgettext("offline root state", "已接近耗尽"),
        "root_state_free": _("降至 {value}"),
        "change_root": _("{svc} {when}发生变更（{change}），之后开始出现新的错误「{error}」"),
        "change_when": _("在 {value} "),
        "change_rate": _("，{metric} 同时升高"),
        "change_verdict": _("；这次变更很可能是本次故障的根因"),
        "change_seen": _("{svc} {when}发生变更：{change}"),
        "ratio": _("窗口均值约为基线的 {value} 倍"),
        "ratio_level": _("窗口水平约为基线的 {value} 倍"),
        "baseline_median": _("基线中位数 {value}"),
        "from_zero": _("基线为 0，窗口内新出现"),
        "baseline": _("基线均值 {value}"),
        "peak": _("窗口内最大值 {value}"),
        "low": _("窗口内最小值 {value}"),
        "shift_peak": _("变化后最大值 {value}"),
        "shift_low": _("变化后最小值 {value}"),
        "at": _("（{value}）"),
        "at_before": _("（{value}，早于变化）"),
        "since": _("变化始于 {value}"),
        "at_limit": _("已达到上限"),
        "qualifier_sep": _("，"),
        "details_sep": _("："),
        "detail_sep": _("，"),
        "cascade": _("影响沿调用链传导：{edges}"),
        "cascade_timeout": _("{src} 调用 {dst} 超时"),
        "cascade_error": _("{src} 调用 {dst} 出错"),
        "cascade_sep": pgettext("offline cascade separator", "，"),
        "log_new": _("{svc} 在窗口内出现新的 {level} 日志「{template}」"),
        "log_surge": _("{svc} 的 {level} 日志「{template}」相对基线激增"),
        "count": _("，共 {value} 次"),
        "first": _("，首次出现于 {value}"),
        "end": _("。"),
        "root": _(
            "{svc} 的{sub}耗尽是本次故障的根因：{metric} {state}，同时 {svc} 自身日志报告「{template}」"
        ),
        "root_state_limit": _("达到上限"),
        "root_state_peak": _("升至 {value}"),
        "root_state_up": _("相对基线明显升高"),
        "root_state_down": _("相对基线明显下降"),
        "root_victims": _("；{victims} 的错误日志指向 {svc}"),
        "list_sep": _("、"),
    }


def _hypothesis_texts() -> dict[str, str]:
    """Hypotheses, their basis and the evidence each needs."""
    return {
        "basis_free": _("{metric} 已接近耗尽"),
        "basis_change": _("新的错误出现在一次变更之后"),
        "basis_downstream": _("它的错误指向 {services} 且晚于后者出现"),
        "hyp_resource": _("{svc} 的{sub}可能已饱和或耗尽，可能是本次故障的根因"),
        "hyp_change": _("{svc} 最近的发布或配置变更可能引入了错误，可能是本次故障的根因"),
        "hyp_code": _("{svc} 自身新出现的程序错误可能是本次故障的根因"),
        "hyp_latency": _("{svc} 自身处理变慢可能是本次故障的根因，调用方因此超时"),
        "hyp_errors": _("{svc} 自身的错误可能是本次故障的根因"),
        "hyp_dependency": _("{svc} 的错误可能只是其依赖（{targets}）故障的连锁反应"),
        "hyp_dependency_target": _(
            "{svc} 可能是根因：{blamers} 的错误日志指向它，但没有查到它自身的数据"
        ),
        "hyp_other": _("{svc} 也出现了异常，可能与本次故障有关"),
        "hyp_kind": _("（类型：{kind}）"),
        "hyp_kind_either": _(
            "（类型：{kind}或{other}——{why}，现有证据无法区分两者；能区分它们的是{what}）"
        ),
        "kind_why_together": _("两者同时开始变化、幅度相当"),
        "kind_why_network": _("这里没有能显示网络问题的计数器，网络延迟在服务上只表现为延迟升高"),
        "kind_why_code": _("不抛出异常的代码缺陷，如提前返回或错误的状态码，同样只表现为错误增多"),
        "kind_tell_together": _("更细粒度的采样，看哪一个先变化"),
        "kind_tell_network": _("重传、丢包或往返时延等网络计数器，或调用方的客户端延迟"),
        "kind_tell_code": _("它的异常日志与堆栈，或最近的发布记录"),
        "kind_why_resource_exhaustion": _(
            "客户端时间是被调方的服务端时间加上两者之间的网络与客户端连接池的等待，两者都只表现为这段等待变长"
        ),
        "kind_tell_resource_exhaustion": _(
            "两者之间的重传或往返时延等网络计数器，以及它的客户端连接池的占用与等待"
        ),
        "basis_alt_resource_exhaustion": _(
            "{svc} 没有客户端连接池的指标，无法排除等待连接池的排队"
        ),
        "client_gap": _(
            "{svc} 等待 {callee} 的时间变长：{svc} 的 {wait} 升高，而 {callee} 自身的 {flat} 平稳；增加的时间花在 {svc} 与 {callee} 之间的网络或 {svc} 的客户端连接池上，而非 {callee}"
        ),
        "hyp_alternative": _("{svc} 的故障也可能是{other}而不是{kind}：现有证据与两者同样相符"),
        "basis_alt_network": _("{svc} 没有网络计数器（重传、丢包、往返时延），无法排除网络问题"),
        "basis_alt_code": _("{svc} 的错误没有伴随资源变化，无法排除不抛出异常的代码缺陷"),
        "hyp_fault": _("{svc} 自身的{kind}问题可能是本次故障的根因"),
        "hyp_path": _("；传播路径：{path}"),
        "path_sep": PATH_SEP,
        "basis_localised": _("沿调用关系：它调用的服务没有同时出现能解释它的异常"),
        "basis_unobserved": _("它调用的 {services} 没有任何观测数据，无法排除异常来自那里"),
        "basis_explains": _("调用方 {services} 的异常与它同时出现，可由它解释"),
        "basis_inherited": _("它调用的 {services} 同时异常，足以解释它的异常"),
        "basis_client_gap": _(
            "它调用 {services} 的客户端延迟升高，而 {services} 自身的服务端延迟平稳：增加的时间花在两者之间的网络或它的客户端连接池上，而非 {services}"
        ),
        "hyp_secondary": _("{svc} 的异常可能是受 {root} 影响的连锁反应"),
        "hyp_runbook": _("运行手册《{title}》描述的情况可能与 {svc} 当前的症状相符"),
        "basis_up_ratio": _("{metric} 明显高于基线（窗口均值约为基线的 {ratio} 倍）"),
        "basis_down_ratio": _("{metric} 明显低于基线（窗口均值约为基线的 {ratio} 倍）"),
        "basis_up_level": _("{metric} 明显高于基线（窗口水平约为基线的 {ratio} 倍）"),
        "basis_down_level": _("{metric} 明显低于基线（窗口水平约为基线的 {ratio} 倍）"),
        "basis_from_zero": _("{metric} 基线为 0，窗口内出现"),
        "basis_up": _("{metric} 明显高于基线"),
        "basis_down": _("{metric} 明显低于基线"),
        "basis_level": _("{metric} 相对基线异常"),
        "basis_slight": _("{metric} 相对基线略有变化"),
        "basis_instances": _("只出现在 {total} 个实例中的 {n} 个（{names}）"),
        "basis_limit": _("{metric} 已达到上限"),
        "basis_logs": _("{n} 类新出现或激增的错误或告警日志"),
        "basis_logs_quote": _("{n} 类新出现或激增的错误或告警日志，如「{message}」"),
        "basis_resource_log": _("日志报告{sub}问题"),
        "basis_early": _("异常开始得最早（{time}）"),
        "basis_blamed": _("{services} 的错误日志指向它"),
        "basis_victim": _("它的错误日志都是调用其他服务失败"),
        "basis_none": _("相对基线略有异常"),
        "basis_runbook": _("知识库检索命中该手册章节（{heading}）；手册只是参考，不代表本次已发生"),
        "need_resource": _("{svc} 的资源使用指标（连接池、内存、磁盘、CPU）与其上限"),
        "need_logs": _("{svc} 的 ERROR/WARN 日志"),
        "need_change": _("{svc} 最近的发布与配置变更记录"),
        "need_trace": _("{svc} 与其调用方之间的调用链或依赖延迟"),
        "need_metrics": _("{svc} 的延迟与错误率指标"),
        "basis_sep": _("；"),
    }


def _action_texts() -> dict[str, str]:
    """Recommended actions with their reasons, and what is missing."""
    return {
        "act_pool": _(
            "检查 {svc} 的连接池配置（最大连接数、获取超时）及慢查询或连接泄漏，必要时临时扩大连接池或限流"
        ),
        "act_memory": _(
            "检查 {svc} 的内存增长与堆转储，排查内存泄漏；必要时滚动重启或提高内存限制"
        ),
        "act_disk": _("清理 {svc} 的磁盘空间（日志、临时文件、binlog）或扩容，并确认写入恢复"),
        "act_cpu": _("检查 {svc} 的 CPU 使用与限流，必要时扩容或降低负载"),
        "act_threads": _("检查 {svc} 的线程池饱和情况与阻塞调用，必要时扩大线程池或限流"),
        "act_fd": _("检查 {svc} 的文件句柄使用与泄漏，必要时提高上限"),
        "act_queue": _("检查 {svc} 的队列积压与消费速度，必要时扩容消费者"),
        "act_resource": _("检查 {svc} 的资源使用与上限，必要时扩容"),
        "act_change": _("核对 {svc} 最近的发布或配置变更，考虑回滚"),
        "act_network": _(
            "检查 {svc} 的网络路径：重传、DNS 解析、连接错误，以及它与上下游之间的链路"
        ),
        "act_configuration": _("对比 {svc} 在故障开始时的配置或发布变更，并回滚该变更"),
        "act_code": _("查看 {svc} 新出现异常的堆栈与最近的代码变更，考虑回滚"),
        "act_latency": _("排查 {svc} 的慢调用（数据库、外部依赖），必要时扩容或降级"),
        "act_errors": _("查看 {svc} 错误日志的详细上下文，确认错误来源"),
        "act_dependency": _("确认 {svc} 的依赖（{targets}）是否恢复，并检查超时与重试配置"),
        "act_other": _("继续观察 {svc} 的指标与日志变化"),
        "act_runbook": _("参考运行手册《{title}》中的排查步骤核实"),
        "reason_root": _("证据显示 {svc} 最可能是根因"),
        "reason_hyp": _("用于证实或排除 {svc} 作为根因"),
        "reason_runbook": _("知识库中与当前症状最相关的手册"),
        "miss_call": _("{tool}（{target}）未能返回结果（状态：{status}）"),
        "miss_nodata": _("没有查到 {svc} 的指标或日志数据"),
        "miss_no_root": _("尚无直接证据确认根因：没有同一服务的资源指标与其自身错误日志同时指向它"),
        "miss_no_anomaly": _("在所查服务中没有发现相对基线的明显异常"),
        "miss_no_signal": _(
            "根因未定：没有服务出现持续的变化；能确定它的是覆盖故障开始时刻的时间窗口、其他指标族（资源、错误、调用边）或各服务的错误日志"
        ),
        "miss_tied": _(
            "根因未定：{services} 的证据不分先后（起始时间、变化幅度、能解释的调用方都相同）；能区分它们的是它们之间的调用关系（调用链或调用边指标）、更细粒度的采样（谁先变化）或各自的错误日志与资源指标"
        ),
        "miss_calls_unknown": _(
            "调用关系未知：{services} 的异常都在 {svc} 的延迟或错误出现之后才开始，可能是受其影响，也可能与它无关；服务拓扑、调用链或调用边指标能确认它们之间是否有调用"
        ),
        "miss_unobserved": _(
            "根因未定：{svc} 的异常可能来自它调用的 {services}，而 {services} 没有任何指标或日志数据；能确定它的是 {services} 的指标、日志或调用链"
        ),
        "miss_weak": _("{services} 仅有轻微波动（相对基线变化不大），不足以说明与本次故障有关"),
        "miss_knowledge": _("知识库中没有找到与当前症状相关的手册"),
        "all_services": _("全部服务"),
    }
