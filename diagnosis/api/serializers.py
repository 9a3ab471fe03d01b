"""Request and response bodies of the API (the components of its OpenAPI schema)."""

from __future__ import annotations

import inspect
import re
from typing import Any, ClassVar

from django.core.validators import URLValidator
from django.utils.translation import gettext_lazy as _
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.settings import api_settings

from diagnosis.contracts import FAILURE_CODES
from diagnosis.models import DiagnosisSession

# "Has a visible character and no NUL", written so the schema's (ECMA) pattern and
# Python's strip() and DRF's NUL check agree.
NOT_BLANK = r"^[^\x00]*[^\s\x00\x1c-\x1f\x85][^\x00]*$"
NO_NUL = r"^[^\x00]*$"
NOT_BLANK_ERROR = {"invalid": _("这个字段需要可见的文字，且不能包含 NUL 字符。")}


class StrictInputSerializer(serializers.Serializer):
    """Request bodies say what they mean: an unknown field or a non-string text is a 400.

    DRF ignores unknown keys and turns ``123`` into ``"123"``; an integrator who
    misspells ``callback_url`` or sends the wrong type would never learn of it.
    """

    components: ClassVar[set[str]] = set()  # their schema names, for the schema hook below

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        meta = getattr(cls, "Meta", None)
        name = getattr(meta, "ref_name", None) or cls.__name__.removesuffix("Serializer")
        StrictInputSerializer.components.add(name)

    def run_validation(self, data: Any = serializers.empty) -> Any:
        if self.parent is None and not isinstance(data, dict):
            # DRF says "No data provided" (untranslated) for null, another text for a list.
            raise serializers.ValidationError(
                {api_settings.NON_FIELD_ERRORS_KEY: [_("请求体必须是一个 JSON 对象。")]}
            )
        return super().run_validation(data)

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict):
            errors: dict[str, list[Any]] = {}
            for key in data:
                if key not in self.fields:
                    errors[str(key)] = [_("未知字段。")]
            for name, field in self.fields.items():
                value = data.get(name)
                if not isinstance(field, serializers.CharField) or value is None:
                    continue
                if not isinstance(value, str):
                    errors[name] = [_("必须是字符串。")]
                elif "\x00" in value:  # one message, not DRF's two
                    errors[name] = [_("不能包含 NUL 字符。")]
            if errors:
                raise serializers.ValidationError(errors)
        return super().to_internal_value(data)


STRICT_DOC = inspect.getdoc(StrictInputSerializer)


class _JsonTextField(serializers.RegexField):
    """Only a JSON string (DRF takes 123 as "123"), and a NUL refused with one message
    (DRF's checks would add a second)."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            raise serializers.ValidationError(_("必须是字符串。"))
        if "\x00" in data:
            raise serializers.ValidationError(_("不能包含 NUL 字符。"))
        return str(super().to_internal_value(data))


class StrictTextField(_JsonTextField):
    """Text with a visible character and no NUL."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("error_messages", NOT_BLANK_ERROR)
        super().__init__(NOT_BLANK, **kwargs)


class StrictIntegerField(serializers.IntegerField):
    """Only a JSON integer (DRF also takes "5", 5.0 and true)."""

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, bool) or not isinstance(data, int):
            raise serializers.ValidationError(_("必须是整数。"))
        return int(super().to_internal_value(data))


class StrictChoiceField(serializers.ChoiceField):
    """One of the choices, as the JSON string itself (DRF also takes 4 for "4")."""

    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, str):
            self.fail("invalid_choice", input=data)
        return super().to_internal_value(data)


class RawTextField(_JsonTextField):
    """Text taken as sent: any string without NUL, not trimmed, blank allowed. For text
    another system sends (Alertmanager's payload) and opaque values (a cursor)."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("allow_blank", True)
        kwargs.setdefault("trim_whitespace", False)
        super().__init__(NO_NUL, **kwargs)


@extend_schema_field(
    {"type": "string", "format": "uri", "pattern": "^[Hh][Tt][Tt][Pp][Ss]?://", "maxLength": 500}
)
class HttpUrlField(serializers.URLField):
    """An http(s) URL, with one message when it is not one (URLField alone adds a second)."""

    def __init__(self, **kwargs: Any) -> None:
        serializers.CharField.__init__(self, **kwargs)
        self.validators.append(
            URLValidator(schemes=["http", "https"], message=self.error_messages["invalid"])
        )


_BLANK_STRING = {"type": "string", "maxLength": 0}


def _takes_blank(schema: Any) -> bool:
    if not isinstance(schema, dict) or schema.get("type") != "string":
        return False
    return "minLength" not in schema and bool(re.search(schema.get("pattern", ""), ""))


def _blank_branch_folded(node: Any) -> None:
    """``oneOf: [text, blank]`` → ``text`` wherever ``text`` already takes "" itself.

    drf-spectacular writes ``allow_blank`` as a second ``oneOf`` branch; when the first
    one also matches "" (no minLength, a pattern "" matches), "" matches both and so,
    by oneOf's rule, neither: the schema would refuse the blank the API takes.
    """
    if isinstance(node, list):
        for item in node:
            _blank_branch_folded(item)
        return
    if not isinstance(node, dict):
        return
    branches = node.get("oneOf")
    if isinstance(branches, list) and len(branches) == 2 and _BLANK_STRING in branches:
        (text,) = [b for b in branches if b != _BLANK_STRING]
        if _takes_blank(text):
            del node["oneOf"]
            node.update(text)
    for value in node.values():
        _blank_branch_folded(value)


def strict_request_bodies(result: dict, generator: Any, request: Any, public: bool) -> dict:
    """drf-spectacular hook: the schema says exactly what the request bodies take.

    StrictInputSerializer's bodies take no other properties (and its docstring is no
    description of theirs); a text that may be blank is one schema, not an ambiguous oneOf.
    """
    schemas = result.get("components", {}).get("schemas", {})
    for name in StrictInputSerializer.components:
        for component in (name, f"{name}Request"):
            if isinstance(schemas.get(component), dict):
                schemas[component]["additionalProperties"] = False
                if schemas[component].get("description") == STRICT_DOC:
                    del schemas[component]["description"]
    _blank_branch_folded(result)  # components and the parameters in paths
    return result


class DiagnosisSummarySerializer(serializers.Serializer):
    id = serializers.UUIDField(help_text="The diagnosis's public id.")
    status = serializers.ChoiceField(choices=DiagnosisSession.Status.choices)
    stage = serializers.ChoiceField(choices=DiagnosisSession.Stage.choices)
    source = serializers.ChoiceField(choices=DiagnosisSession.Source.choices)
    environment = serializers.CharField(help_text="Environment slug.")
    question = serializers.CharField()
    language = serializers.CharField()
    decision = serializers.ChoiceField(
        choices=DiagnosisSession.Decision.choices, allow_null=True, help_text="Null until done."
    )
    root_cause_status = serializers.ChoiceField(
        choices=DiagnosisSession.RootCause.choices,
        allow_null=True,
        help_text="Whether the answer confirms a root cause, only hypothesises one, or neither. "
        "Null until done.",
    )
    answer_source = serializers.ChoiceField(
        choices=DiagnosisSession.AnswerSource.choices, allow_null=True
    )
    attempt_count = serializers.IntegerField()
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)


class DiagnosisContextSerializer(serializers.Serializer):
    services = serializers.ListField(child=serializers.CharField())
    window = serializers.DictField(
        allow_null=True, help_text="{start, end} in RFC 3339: the window the run used or was given."
    )


class ProgressEventSerializer(serializers.Serializer):
    sequence = serializers.IntegerField()
    kind = serializers.CharField(help_text="stage, tool_call, tool_result, info or error.")
    stage = serializers.CharField(allow_blank=True)
    message = serializers.CharField(allow_blank=True)
    data = serializers.DictField()
    at = serializers.DateTimeField()


class BindingSerializer(serializers.Serializer):
    source_type = serializers.CharField(allow_blank=True)
    source_id = serializers.CharField(allow_blank=True)
    tool_name = serializers.CharField(allow_blank=True)
    invocation_id = serializers.IntegerField(
        allow_null=True,
        help_text="The tool invocation this binding cites (GET /tool-invocations/{id}).",
    )
    excerpt = serializers.CharField(allow_blank=True)
    valid = serializers.BooleanField(help_text="The Gatekeeper accepted this binding.")


class GatekeeperVerdictSerializer(serializers.Serializer):
    verdict = serializers.CharField(allow_blank=True, help_text="accepted or demoted.")
    findings = serializers.ListField(child=serializers.DictField())


class VerifierCheckSerializer(serializers.Serializer):
    classification = serializers.CharField(
        allow_blank=True,
        help_text="direct_observation, reasonable_inference, overstated, unsupported, "
        "external_unknown or contradicted; empty when the Verifier gave none.",
    )
    reason = serializers.CharField(allow_blank=True)


class ClaimFactSerializer(serializers.Serializer):
    text = serializers.CharField()
    kind = serializers.CharField(help_text="number, time, date, identifier or service.")
    start = serializers.IntegerField(help_text="Span in the claim's text.")
    end = serializers.IntegerField()
    binding = serializers.IntegerField(
        allow_null=True, help_text="Index in `bindings` of the binding that binds it."
    )
    via = serializers.CharField(
        allow_null=True, help_text="excerpt or argument (the cited invocation's arguments)."
    )


class ClaimSerializer(serializers.Serializer):
    claim_id = serializers.CharField(allow_blank=True)
    text = serializers.CharField(allow_blank=True)
    type = serializers.CharField(allow_blank=True)
    entity = serializers.CharField(allow_blank=True)
    support_level = serializers.CharField(allow_blank=True)
    placement = serializers.CharField(
        allow_blank=True,
        help_text="Where the Composer filter put it: allowed_claim, hypothesis, missing_info, "
        "dropped.",
    )
    gatekeeper = GatekeeperVerdictSerializer()
    verifier = VerifierCheckSerializer()
    bindings = BindingSerializer(many=True)
    facts = ClaimFactSerializer(
        many=True,
        help_text="gatekeeper_v2: each number, time, date and identifier of the claim's text "
        "and the binding that binds it (binding null: unbound). Empty for older sessions.",
    )


class HypothesisSerializer(serializers.Serializer):
    text = serializers.CharField()
    basis = serializers.CharField(allow_blank=True)
    entity = serializers.CharField(allow_null=True, allow_blank=True)


class ActionSerializer(serializers.Serializer):
    text = serializers.CharField()
    reason = serializers.CharField(allow_blank=True)


class ExecutorProposalsSerializer(serializers.Serializer):
    hypotheses = HypothesisSerializer(many=True)
    recommended_actions = ActionSerializer(many=True)
    missing_info = serializers.ListField(child=serializers.CharField())


class ComposerSerializer(serializers.Serializer):
    status = serializers.CharField(allow_null=True)
    source = serializers.CharField(allow_null=True)
    guard_findings = serializers.ListField(child=serializers.CharField())


class RouteNoteSerializer(serializers.Serializer):
    text = serializers.CharField(help_text="The note as recorded (English).")
    code = serializers.CharField(
        allow_null=True,
        help_text="A stable code (verifier_malformed, verifier_allowed_demoted_claims, "
        "retry_budget_exhausted, pass_without_accepted_claims, scope_unknown_services); "
        "null for sessions recorded before codes.",
    )
    params = serializers.DictField(help_text="The numbers, ids and names the note names.")


class RoutingSerializer(serializers.Serializer):
    verifier_decision = serializers.CharField(
        allow_null=True, help_text="What the Verifier decided (null: its answer was unusable)."
    )
    decision = serializers.CharField(
        allow_null=True, help_text="The decision after routing (retries, demoted claims, scope)."
    )
    notes = RouteNoteSerializer(many=True, help_text="Why the router changed the decision.")


class TimingsSerializer(serializers.Serializer):
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    queued_seconds = serializers.FloatField(allow_null=True)
    run_seconds = serializers.FloatField(allow_null=True)
    elapsed_seconds = serializers.FloatField(allow_null=True)


class CallbackStateSerializer(serializers.Serializer):
    url = serializers.URLField()
    state = serializers.CharField(help_text="pending, delivered or failed.")
    delivered_at = serializers.DateTimeField(allow_null=True)


class DiagnosisDetailSerializer(DiagnosisSummarySerializer):
    final_answer = serializers.CharField(allow_blank=True, help_text="Markdown; empty until done.")
    error = serializers.CharField(
        allow_blank=True,
        help_text="For a failed session, a message in the request's language; the exception "
        "itself is kept for reviewers only. Empty otherwise.",
    )
    error_code = serializers.ChoiceField(
        choices=[(c, c) for c in FAILURE_CODES],
        allow_null=True,
        help_text="For a failed session, a stable code: internal_error, worker_lost or timeout.",
    )
    cancel_requested = serializers.BooleanField()
    conversation_id = serializers.IntegerField(allow_null=True)
    context = DiagnosisContextSerializer()
    progress = ProgressEventSerializer(many=True)
    executor_output_parse_status = serializers.CharField(allow_null=True)
    gatekeeper_counts = serializers.DictField(allow_null=True)
    claims = ClaimSerializer(many=True)
    hypotheses = HypothesisSerializer(
        many=True, help_text="Allowed hypotheses, after the Composer input filter."
    )
    missing_info = serializers.ListField(child=serializers.CharField())
    recommended_actions = ActionSerializer(many=True)
    executor_proposals = ExecutorProposalsSerializer(
        help_text="What the Executor proposed, before filtering (unverified)."
    )
    routing = RoutingSerializer(allow_null=True)
    composer = ComposerSerializer(allow_null=True)
    model_usage = serializers.DictField(help_text="{roles: {role: {calls, tokens_in, …}}, total}")
    timings = TimingsSerializer()
    callback = CallbackStateSerializer(allow_null=True)


class DiagnosisPageSerializer(serializers.Serializer):
    next = serializers.URLField(allow_null=True)
    previous = serializers.URLField(allow_null=True)
    results = DiagnosisSummarySerializer(many=True)


class ToolInvocationSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    diagnosis_id = serializers.UUIDField()
    attempt = serializers.IntegerField()
    sequence = serializers.IntegerField()
    trace_ref = serializers.CharField()
    tool_name = serializers.CharField()
    arguments = serializers.DictField()
    status = serializers.CharField(help_text="ok, no_data, error or timeout.")
    output = serializers.CharField(allow_blank=True, help_text="Exactly what the model read.")
    output_size = serializers.IntegerField()
    truncated = serializers.BooleanField()
    summary = serializers.DictField()
    error = serializers.CharField(allow_blank=True)
    started_at = serializers.DateTimeField()
    duration_ms = serializers.IntegerField()


class ToolInvocationListSerializer(serializers.Serializer):
    next = serializers.URLField(allow_null=True)
    previous = serializers.URLField(allow_null=True)
    results = ToolInvocationSerializer(many=True)


class CallbackAttemptSerializer(serializers.Serializer):
    attempt = serializers.IntegerField()
    url = serializers.URLField()
    status_code = serializers.IntegerField(allow_null=True)
    error = serializers.CharField(allow_blank=True)
    duration_ms = serializers.IntegerField()
    at = serializers.DateTimeField()


class CallbackAttemptListSerializer(serializers.Serializer):
    results = CallbackAttemptSerializer(many=True)


class ApiKeySerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    prefix = serializers.CharField(help_text="The key starts with rp_<prefix>_.")
    created_at = serializers.DateTimeField()
    last_used_at = serializers.DateTimeField(allow_null=True)
    revoked_at = serializers.DateTimeField(allow_null=True)


class ApiKeyListSerializer(serializers.Serializer):
    results = ApiKeySerializer(many=True)


class ApiKeyCreatedSerializer(ApiKeySerializer):
    key = serializers.CharField(help_text="The bearer key. Shown once; only its hash is stored.")
    signing_secret = serializers.CharField(
        help_text="HMAC-SHA256 secret that signs this key's callbacks "
        "(X-Rootproof-Signature: sha256=<hex of HMAC(secret, raw body)>). Shown once."
    )


class AlertIngestSerializer(serializers.Serializer):
    started = serializers.BooleanField()
    reason = serializers.ChoiceField(
        choices=["started", "duplicate", "resolved", "no_firing_alerts"]
    )
    diagnosis = DiagnosisSummarySerializer(allow_null=True)
