from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _
from django.utils.translation import pgettext_lazy


class Conversation(models.Model):
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("所有者"),
        on_delete=models.CASCADE,
        related_name="conversations",
    )
    environment = models.ForeignKey(
        "diagnosis.Environment",
        verbose_name=_("环境"),
        on_delete=models.PROTECT,
        related_name="conversations",
    )
    title = models.CharField(_("标题"), max_length=200, blank=True)
    created_at = models.DateTimeField(_("创建时间"), auto_now_add=True)
    updated_at = models.DateTimeField(_("更新时间"), auto_now=True)

    class Meta:
        ordering = ["-updated_at", "-id"]
        verbose_name = pgettext_lazy("singular", "对话")
        verbose_name_plural = pgettext_lazy("plural", "对话")
        indexes = [models.Index(fields=["owner", "-updated_at"], name="conversation_owner_updated")]

    def __str__(self) -> str:
        return self.title or f"#{self.pk}"


class Feedback(models.Model):
    """What the asker thought of one answer: one row per user per session, updatable."""

    session = models.ForeignKey(
        "diagnosis.DiagnosisSession",
        verbose_name=_("诊断会话"),
        on_delete=models.CASCADE,
        related_name="feedback",
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("用户"),
        on_delete=models.CASCADE,
        related_name="answer_feedback",
    )
    helpful = models.BooleanField(_("有帮助"))
    comment = models.TextField(_("评论"), blank=True, max_length=2000)
    created_at = models.DateTimeField(_("创建时间"), auto_now_add=True)
    updated_at = models.DateTimeField(_("更新时间"), auto_now=True)

    class Meta:
        ordering = ["-updated_at", "-id"]
        verbose_name = _("回答反馈")
        verbose_name_plural = pgettext_lazy("plural", "回答反馈")
        constraints = [
            models.UniqueConstraint(fields=["session", "user"], name="feedback_session_user"),
        ]

    def __str__(self) -> str:
        return f"{self.session_id} {'+' if self.helpful else '-'}"
