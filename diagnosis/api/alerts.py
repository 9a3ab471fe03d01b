"""The Alertmanager webhook: a firing alert group starts a diagnosis."""

from __future__ import annotations

from django.utils.translation import gettext_lazy as _
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from diagnosis.alerts.services import alertmanager_notification_ingest
from diagnosis.api.auth import IsReceiver, ReceiverTokenAuthentication
from diagnosis.api.base import TAG_ALERTS, ApiView
from diagnosis.api.errors import error_responses
from diagnosis.api.serializers import (
    SLUG,
    AlertIngestSerializer,
    RawTextField,
    Rfc3339DateTimeField,
    StrictChoiceField,
    StrictIntegerField,
    schema_pattern,
)

WEBHOOK_VERSION = "4"


class AlertmanagerWebhookApi(ApiView):
    authentication_classes = [ReceiverTokenAuthentication]
    permission_classes = [IsReceiver]

    class InputSerializer(serializers.Serializer):
        class AlertSerializer(serializers.Serializer):
            status = serializers.ChoiceField(choices=["firing", "resolved"])
            labels = serializers.DictField(child=RawTextField())
            annotations = serializers.DictField(child=RawTextField(), required=False, default=dict)
            startsAt = Rfc3339DateTimeField()
            endsAt = Rfc3339DateTimeField(required=False, allow_null=True)
            generatorURL = RawTextField(required=False)
            fingerprint = RawTextField(required=False)

            class Meta:
                ref_name = "AlertmanagerAlert"

        version = StrictChoiceField(
            choices=[WEBHOOK_VERSION],
            error_messages={"invalid_choice": _("只支持第 4 版 webhook 负载。")},
            help_text="The payload version; Alertmanager sends 4.",
        )
        groupKey = RawTextField(allow_blank=False, max_length=5000)
        truncatedAlerts = StrictIntegerField(required=False, default=0)
        status = serializers.ChoiceField(choices=["firing", "resolved"])
        receiver = RawTextField(required=False)
        groupLabels = serializers.DictField(child=RawTextField(), required=False, default=dict)
        commonLabels = serializers.DictField(child=RawTextField(), required=False, default=dict)
        commonAnnotations = serializers.DictField(
            child=RawTextField(), required=False, default=dict
        )
        externalURL = RawTextField(required=False)
        alerts = AlertSerializer(many=True, allow_empty=True)

        class Meta:
            ref_name = "AlertmanagerWebhook"

    OutputSerializer = AlertIngestSerializer

    @extend_schema(
        operation_id="alertmanager_webhook",
        tags=[TAG_ALERTS],
        summary="Alertmanager webhook (payload version 4)",
        description="Starts one diagnosis per firing alert group, keyed by receiver, groupKey "
        "and the group's earliest startsAt: a repeat notification starts nothing new (200, "
        "`duplicate`), a resolved notification starts nothing (200, `resolved`). The question "
        "is built from the labels and annotations; the window starts before startsAt.",
        parameters=[
            OpenApiParameter(
                "receiver",
                {"type": "string", "pattern": schema_pattern(SLUG)},
                OpenApiParameter.PATH,
                description="Receiver slug.",
            )
        ],
        request=InputSerializer,
        responses={
            202: OpenApiResponse(AlertIngestSerializer, description="A diagnosis was started."),
            200: OpenApiResponse(AlertIngestSerializer, description="Nothing new was started."),
            **error_responses(400, 401, 404, 413, 429),
        },
    )
    def post(self, request: Request, receiver: str) -> Response:
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        result = alertmanager_notification_ingest(
            receiver=request.auth, notification=serializer.validated_data
        )
        return Response(
            self.OutputSerializer(result).data,
            status=status.HTTP_202_ACCEPTED if result.started else status.HTTP_200_OK,
        )
