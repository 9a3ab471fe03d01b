"""Reviews of diagnosis sessions, and the audit trail of every reviewer action."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _
from django.utils.translation import pgettext_lazy


class Review(models.Model):
    """A reviewer's judgement of one session: did the diagnosis deserve trust?"""

    class Verdict(models.TextChoices):
        CORRECT = "correct", _("正确")
        PARTLY_CORRECT = "partly_correct", _("部分正确")
        WRONG = "wrong", pgettext_lazy("review verdict", "错误")
        UNSAFE = "unsafe", _("不安全")

    # Verdicts that make every allowed claim of the session a claim not to make again.
    REJECTING_VERDICTS = (Verdict.WRONG, Verdict.UNSAFE)

    session = models.ForeignKey(
        "diagnosis.DiagnosisSession",
        verbose_name=_("诊断会话"),
        on_delete=models.CASCADE,
        related_name="reviews",
    )
    reviewer = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("审核人"),
        on_delete=models.PROTECT,
        related_name="diagnosis_reviews",
    )
    verdict = models.CharField(
        pgettext_lazy("review verdict", "结论"), max_length=20, choices=Verdict.choices
    )
    notes = models.TextField(_("备注"), blank=True)
    created_at = models.DateTimeField(_("审核时间"), auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = _("审核")
        verbose_name_plural = pgettext_lazy("plural", "审核")
        indexes = [models.Index(fields=["session", "-created_at"], name="review_session_created")]

    def __str__(self) -> str:
        return f"{self.get_verdict_display()} #{self.session_id}"


class ClaimReview(models.Model):
    """Whether the reviewer agrees with the Verifier's classification of one claim."""

    review = models.ForeignKey(
        Review, verbose_name=_("审核"), on_delete=models.CASCADE, related_name="claim_reviews"
    )
    claim_id = models.CharField(_("论断 ID"), max_length=100)
    agrees_with_verifier = models.BooleanField(_("同意核验结论"))
    note = models.TextField(pgettext_lazy("claim review note", "说明"), blank=True)

    class Meta:
        ordering = ["review", "id"]
        verbose_name = _("论断审核")
        verbose_name_plural = pgettext_lazy("plural", "论断审核")
        constraints = [
            models.UniqueConstraint(fields=["review", "claim_id"], name="claimreview_review_claim")
        ]

    def __str__(self) -> str:
        return f"{self.claim_id}: {'✓' if self.agrees_with_verifier else '✗'}"


class AuditEvent(models.Model):
    """Who did what to which record, when: written only through ``audit_event_record``."""

    class Action(models.TextChoices):
        REVIEW_RECORDED = "review_recorded", _("记录审核")
        SESSION_EXPORTED = "session_exported", _("导出回归用例")
        API_KEY_CREATED = "api_key_created", _("创建 API 密钥")
        API_KEY_REVOKED = "api_key_revoked", _("吊销 API 密钥")
        ALERT_RECEIVER_TOKEN_ROTATED = "alert_receiver_token_rotated", _("轮换告警接收器令牌")

    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("操作人"),
        on_delete=models.SET_NULL,
        related_name="audit_events",
        null=True,
        blank=True,
    )
    # Kept even when the user is gone; "system" for commands run without a user.
    actor_label = models.CharField(_("操作人名称"), max_length=150)
    action = models.CharField(_("动作"), max_length=40, choices=Action.choices)
    target_type = models.CharField(_("对象类型"), max_length=100)
    target_id = models.CharField(_("对象 ID"), max_length=100)
    details = models.JSONField(_("详情"), default=dict, blank=True)
    created_at = models.DateTimeField(_("时间"), auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = _("审计事件")
        verbose_name_plural = pgettext_lazy("plural", "审计事件")
        indexes = [models.Index(fields=["target_type", "target_id"], name="auditevent_target")]

    def __str__(self) -> str:
        return f"{self.actor_label} {self.action} {self.target_type}:{self.target_id}"
