"""Request and response bodies of the API (the components of its OpenAPI schema)."""

from __future__ import annotations

import inspect
import re
from datetime import UTC, datetime
from typing import Any, ClassVar

from django.urls.converters import SlugConverter
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.settings import api_settings

from diagnosis.api.selectors import DiagnosisDetail
from diagnosis.contracts import FAILURE_CODES, AllowedHypothesis, ComposerAction, RouteNote
from diagnosis.evidence.timeutil import TimeFormatError, time_parse
from diagnosis.models import DiagnosisSession
from diagnosis.selectors import SessionClaim, SessionClaims

# "Has a visible character and no NUL", written so the schema's (ECMA) pattern and
# Python's strip() and DRF's NUL check agree.
NOT_BLANK = r"^[^\x00]*[^\s\x00\x1c-\x1f\x85][^\x00]*$"
NO_NUL = r"^[^\x00]*$"
NOT_BLANK_ERROR = {"invalid": _("这个字段需要可见的文字，且不能包含 NUL 字符。")}
# The URL's slug (Django's <slug:> converter, which the receiver's path uses), ended by
# \Z: Python's $ also matches before a final newline (the schema's ECMA $ does not;
# drf-spectacular writes \Z as $). One rule for an environment's slug in a body or a
# query and a receiver's in a path.
SLUG = rf"^{SlugConverter.regex}\Z"


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
        # The schema's maxLength counts the text as sent; DRF would count it trimmed.
        if self.max_length is not None and len(data) > self.max_length:
            self.fail("max_length", max_length=self.max_length)
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


def _ipv6() -> str:
    """RFC 3986's IPv6address, its nine forms written out as one regular expression."""
    h16, ls32 = "[0-9A-Fa-f]{1,4}", rf"(?:[0-9A-Fa-f]{{1,4}}:[0-9A-Fa-f]{{1,4}}|{_IPV4})"
    forms = [rf"(?:{h16}:){{6}}{ls32}", rf"::(?:{h16}:){{5}}{ls32}"]
    tails = [rf"(?:{h16}:){{{n}}}{ls32}" for n in (4, 3, 2, 1)] + [ls32, h16, ""]
    for before, tail in enumerate(tails):  # [ *before( h16 ":" ) h16 ] "::" tail
        forms.append(rf"(?:(?:{h16}:){{0,{before}}}{h16})?::{tail}")
    return "(?:" + "|".join(forms) + ")"


_OCTET = "(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
_IPV4 = rf"{_OCTET}(?:\.{_OCTET}){{3}}"
_LABEL = "[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_TLD = "(?:[A-Za-z][A-Za-z-]{0,61}[A-Za-z]|xn--[A-Za-z0-9]{1,59})"
_PORT = "(?:6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[1-9]?[0-9]{1,3})"
_PCHAR = "(?:[A-Za-z0-9._~!$&'()*+,;=:@-]|%[0-9A-Fa-f]{2})"
# The http(s) URLs a callback may name: RFC 3986's http URI (no user info), its host a
# DNS name with a top-level label, localhost, an IPv4 address or a bracketed IPv6 one;
# ASCII only (an internationalised name in its xn-- form), as a URI is. This one
# expression is the field's only check and the schema's pattern, so what the schema
# accepts the API accepts. Case-insensitive where RFC 3986 is: the scheme and the host.
HTTP_URL = (
    "^[Hh][Tt][Tt][Pp][Ss]?://"
    rf"(?:(?:{_LABEL}\.)+{_TLD}\.?|[Ll][Oo][Cc][Aa][Ll][Hh][Oo][Ss][Tt]|{_IPV4}|\[{_ipv6()}\])"
    rf"(?::{_PORT})?"
    rf"(?:/{_PCHAR}*)*(?:\?(?:{_PCHAR}|[/?])*)?(?:#(?:{_PCHAR}|[/?])*)?\Z"
)
HTTP_URL_MAX = 500


def schema_pattern(regex: str) -> str:
    """A Python pattern as the schema writes it (ECMA anchors and escapes), as
    drf-spectacular writes a RegexValidator's, for fields whose schema is given by hand."""
    pattern = regex.encode("ascii", "backslashreplace").decode().replace(r"\x", r"\u00")
    return pattern.replace(r"\Z", "$").replace(r"\A", "^")


@extend_schema_field(
    {"type": "string", "pattern": schema_pattern(HTTP_URL), "maxLength": HTTP_URL_MAX}
)
class HttpUrlField(_JsonTextField):
    """An http(s) URL: matches ``HTTP_URL`` as sent, the schema's pattern (one message).

    A text field like the others, so its maxLength counts the URL as sent too.
    """

    default_error_messages = {"invalid": serializers.URLField.default_error_messages["invalid"]}

    def __init__(self, **kwargs: Any) -> None:
        # Checked as sent, as the schema's pattern checks it: DRF would trim first.
        kwargs.setdefault("trim_whitespace", False)
        kwargs.setdefault("max_length", HTTP_URL_MAX)
        super().__init__(HTTP_URL, **kwargs)


class SlugTextField(_JsonTextField):
    """A slug (an environment's), matched as sent, as the schema's pattern matches it:
    DRF's SlugField trims first, so " shop " passed a pattern that has no room for spaces."""

    default_error_messages = {"invalid": serializers.SlugField.default_error_messages["invalid"]}

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("trim_whitespace", False)
        super().__init__(SLUG, **kwargs)


_YEAR = "(?:[0-9]{3}[1-9]|[0-9]{2}[1-9][0-9]|[0-9][1-9][0-9]{2}|[1-9][0-9]{3})"  # 0001-9999
_OFFSET = "(?:[Zz]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])"
# RFC 3339's date-time (section 5.6) as the API reads one: an offset always, seconds
# 00-59 (no leap second: no clock the API compares with has one), years 0001-9999 (the
# calendar Python and the databases hold). The schema states this pattern beside
# format: date-time, and the field parses only what it matches; a date the calendar
# lacks (02-30) fails both the format and the parse.
RFC3339_DATETIME = (
    rf"^{_YEAR}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12][0-9]|3[01])"
    rf"[Tt](?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]+)?{_OFFSET}\Z"
)
_RFC3339_DATETIME = re.compile(RFC3339_DATETIME)
_EARLIEST = datetime.min.replace(tzinfo=UTC)
_LATEST = datetime.max.replace(tzinfo=UTC)


@extend_schema_field(
    {"type": "string", "format": "date-time", "pattern": schema_pattern(RFC3339_DATETIME)}
)
class Rfc3339DateTimeField(serializers.DateTimeField):
    """Every date-time the API reads (windows, filters, an alert's times): RFC3339_DATETIME.

    DRF's field takes what Django's parser takes (no offset, a space, no seconds) and
    turns a naive time into the server's zone; an integrator's "2026-03-02 10:20" would
    mean something the schema does not say. A moment whose UTC time falls outside the
    calendar (0001-01-01T00:00:00+01:00) is its first or last instant: each is still
    earlier or later than any stored time, which is all a filter or a window asks of it.
    """

    def to_internal_value(self, value: Any) -> datetime:
        if not isinstance(value, str) or not _RFC3339_DATETIME.match(value):
            self.fail("invalid", format="YYYY-MM-DDThh:mm:ss[.f](Z|±hh:mm)")
        try:
            moment = time_parse(value, to_utc=False)
        except TimeFormatError:
            self.fail("invalid", format="YYYY-MM-DDThh:mm:ss[.f](Z|±hh:mm)")
        try:
            return moment.astimezone(UTC)
        except OverflowError:
            return _EARLIEST if moment.year == 1 else _LATEST


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


# --- Output: the one mapping from rows and read models to the API's JSON ----------------
#
# Each serializer takes a model instance or a typed read-model object (``SessionClaims``
# and its claims, bindings and facts; ``SelfEvaluation`` parts; contract objects) and maps
# its attributes with ``source=``; a ``SerializerMethodField`` only where a value is
# computed. The callback body is the same ``DiagnosisDetailSerializer`` output. What each
# one maps is said in a comment, not a docstring: a docstring would become the component's
# description in the schema integrators read.


class NullIfBlankChoiceField(serializers.ChoiceField):
    """A choice column that stores "" for "none yet", written as null."""

    def to_representation(self, value: Any) -> Any:
        return None if value == "" else super().to_representation(value)


class NullIfBlankCharField(serializers.CharField):
    """A text column that stores "" for "none", written as null."""

    def to_representation(self, value: Any) -> str | None:
        return None if value == "" else super().to_representation(value)


# Keeps a base serializer's fields, read through one attribute of the object mapped.
#
# ``through = ("session", DiagnosisSummarySerializer)``: the summary's fields read
# ``detail.session.<their source>``, so a detail is the summary plus its own fields
# without declaring the summary twice.
class ReadThroughSerializer(serializers.Serializer):
    through: ClassVar[tuple[str, type[serializers.Serializer]]]

    def get_fields(self) -> dict[str, serializers.Field]:
        fields = super().get_fields()
        attribute, base = self.through
        for name in base._declared_fields:
            fields[name].source = f"{attribute}.{fields[name].source or name}"
        return fields


def _seconds(start: datetime | None, end: datetime | None) -> float | None:
    if start and end:
        return round((end - start).total_seconds(), 3)
    return None


# A ``DiagnosisSession`` row, as lists show it.
class DiagnosisSummarySerializer(serializers.Serializer):
    id = serializers.UUIDField(source="public_id", help_text="The diagnosis's public id.")
    status = serializers.ChoiceField(choices=DiagnosisSession.Status.choices)
    stage = serializers.ChoiceField(choices=DiagnosisSession.Stage.choices)
    source = serializers.ChoiceField(choices=DiagnosisSession.Source.choices)
    environment = serializers.CharField(source="environment.slug", help_text="Environment slug.")
    question = serializers.CharField(source="original_query")
    language = serializers.CharField()
    decision = NullIfBlankChoiceField(
        choices=DiagnosisSession.Decision.choices, allow_null=True, help_text="Null until done."
    )
    root_cause_status = NullIfBlankChoiceField(
        choices=DiagnosisSession.RootCause.choices,
        allow_null=True,
        help_text="The answer's one certainty about its root cause, which its badge and "
        "conclusion also show: confirmed (observed directly), inferred (a bounded inference "
        "from accepted evidence), hypothesised (only hypotheses), or undetermined. "
        "Null until done.",
    )
    answer_source = NullIfBlankChoiceField(
        choices=DiagnosisSession.AnswerSource.choices, allow_null=True
    )
    attempt_count = serializers.IntegerField()
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)


# The session's ``context`` column: what the request (or the alert) gave.
class DiagnosisContextSerializer(serializers.Serializer):
    services = serializers.SerializerMethodField()
    window = serializers.SerializerMethodField(
        help_text="{start, end} in RFC 3339: the window the run used or was given."
    )

    @staticmethod
    def _stored(context: object) -> dict[str, Any]:
        return context if isinstance(context, dict) else {}

    @extend_schema_field(serializers.ListField(child=serializers.CharField()))
    def get_services(self, context: object) -> list[str]:
        return [str(s) for s in self._stored(context).get("services") or []]

    @extend_schema_field(serializers.DictField(allow_null=True))
    def get_window(self, context: object) -> Any:
        # An alert's session is given a hint; the run writes the window it used.
        context = self._stored(context)
        return context.get("window") or context.get("window_hint")


# A ``SessionEvent`` row.
class ProgressEventSerializer(serializers.Serializer):
    sequence = serializers.IntegerField()
    kind = serializers.CharField(help_text="stage, tool_call, tool_result, info or error.")
    stage = serializers.CharField(allow_blank=True)
    message = serializers.CharField(allow_blank=True)
    data = serializers.DictField()
    at = serializers.DateTimeField(source="created_at")


# A ``ClaimBinding`` of the read model.
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


# What the Gatekeeper said of a ``SessionClaim``.
class GatekeeperVerdictSerializer(serializers.Serializer):
    verdict = serializers.CharField(allow_blank=True, help_text="accepted or demoted.")
    findings = serializers.SerializerMethodField()

    @extend_schema_field(serializers.ListField(child=serializers.DictField()))
    def get_findings(self, claim: SessionClaim) -> list[dict[str, Any]]:
        # A finding's optional parts appear only when the Gatekeeper set them.
        return [f.model_dump(mode="json", exclude_unset=True) for f in claim.findings]


# What the Verifier said of a ``SessionClaim``.
class VerifierCheckSerializer(serializers.Serializer):
    classification = serializers.CharField(
        allow_blank=True,
        help_text="direct_observation, reasonable_inference, overstated, unsupported, "
        "external_unknown or contradicted; empty when the Verifier gave none.",
    )
    reason = serializers.CharField(allow_blank=True)


# A ``contracts.ClaimFact`` of the Gatekeeper report.
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


# A ``SessionClaim`` of the read model.
class ClaimSerializer(serializers.Serializer):
    claim_id = serializers.CharField(allow_blank=True)
    text = serializers.CharField(allow_blank=True)
    type = serializers.CharField(source="claim_type", allow_blank=True)
    entity = serializers.CharField(allow_blank=True)
    support_level = serializers.CharField(allow_blank=True)
    placement = serializers.CharField(
        allow_blank=True,
        help_text="Where the Composer filter put it: allowed_claim, hypothesis, missing_info, "
        "dropped.",
    )
    gatekeeper = GatekeeperVerdictSerializer(source="*")
    verifier = VerifierCheckSerializer(source="*")
    bindings = BindingSerializer(many=True)
    facts = ClaimFactSerializer(
        many=True,
        help_text="gatekeeper_v2: each number, time, date and identifier of the claim's text "
        "and the binding that binds it (binding null: unbound). Empty for older sessions.",
    )


# A ``contracts.AllowedHypothesis``.
class HypothesisSerializer(serializers.Serializer):
    text = serializers.CharField()
    basis = serializers.CharField(allow_blank=True)
    entity = serializers.CharField(allow_null=True, allow_blank=True)


# A ``contracts.ComposerAction``.
class ActionSerializer(serializers.Serializer):
    text = serializers.CharField()
    reason = serializers.CharField(allow_blank=True)


# What ``SessionClaims`` holds of the Executor's proposals, in the Composer's terms.
class ExecutorProposalsSerializer(serializers.Serializer):
    hypotheses = serializers.SerializerMethodField()
    recommended_actions = serializers.SerializerMethodField()
    missing_info = serializers.ListField(child=serializers.CharField())

    @extend_schema_field(HypothesisSerializer(many=True))
    def get_hypotheses(self, claims: SessionClaims) -> Any:
        proposed = [
            AllowedHypothesis(text=h.hypothesis_text, basis=h.basis, entity=h.entity or "")
            for h in claims.hypotheses
        ]
        return HypothesisSerializer(proposed, many=True).data

    @extend_schema_field(ActionSerializer(many=True))
    def get_recommended_actions(self, claims: SessionClaims) -> Any:
        proposed = [ComposerAction(text=a.action_text, reason=a.reason) for a in claims.actions]
        return ActionSerializer(proposed, many=True).data


# A ``contracts.ComposerOutputSnapshot``.
class ComposerSerializer(serializers.Serializer):
    status = serializers.CharField(allow_null=True)
    source = serializers.CharField(allow_null=True)
    guard_findings = serializers.ListField(child=serializers.CharField())


# A pair of ``VerifierEvaluation.route_notes_coded()``: the note and its code, if any.
class RouteNoteSerializer(serializers.Serializer):
    text = serializers.SerializerMethodField(help_text="The note as recorded (English).")
    code = serializers.SerializerMethodField(
        help_text="A stable code (verifier_malformed, verifier_allowed_demoted_claims, "
        "retry_budget_exhausted, pass_without_accepted_claims, scope_unknown_services); "
        "null for sessions recorded before codes.",
    )
    params = serializers.SerializerMethodField(
        help_text="The numbers, ids and names the note names."
    )

    @extend_schema_field(serializers.CharField())
    def get_text(self, note: tuple[str, RouteNote | None]) -> str:
        return note[0]

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_code(self, note: tuple[str, RouteNote | None]) -> str | None:
        return (note[1].code or None) if note[1] else None

    @extend_schema_field(serializers.DictField())
    def get_params(self, note: tuple[str, RouteNote | None]) -> dict[str, Any]:
        return dict(note[1].params) if note[1] else {}


# A ``contracts.VerifierEvaluation``: the Verifier's decision and the router's.
class RoutingSerializer(serializers.Serializer):
    verifier_decision = serializers.CharField(
        source="decision",
        allow_null=True,
        help_text="What the Verifier decided (null: its answer was unusable).",
    )
    decision = serializers.CharField(
        source="routed_decision",
        allow_null=True,
        help_text="The decision after routing (retries, demoted claims, scope).",
    )
    notes = RouteNoteSerializer(
        source="route_notes_coded", many=True, help_text="Why the router changed the decision."
    )


# A ``DiagnosisSession``'s moments and the durations between them.
class TimingsSerializer(serializers.Serializer):
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    queued_seconds = serializers.SerializerMethodField()
    run_seconds = serializers.SerializerMethodField()
    elapsed_seconds = serializers.SerializerMethodField()

    @extend_schema_field(serializers.FloatField(allow_null=True))
    def get_queued_seconds(self, session: DiagnosisSession) -> float | None:
        return _seconds(session.created_at, session.started_at)

    @extend_schema_field(serializers.FloatField(allow_null=True))
    def get_run_seconds(self, session: DiagnosisSession) -> float | None:
        return _seconds(session.started_at, session.finished_at)

    @extend_schema_field(serializers.FloatField(allow_null=True))
    def get_elapsed_seconds(self, session: DiagnosisSession) -> float | None:
        return _seconds(session.created_at, session.finished_at or timezone.now())


# A ``DiagnosisSession``'s callback URL and its ``ApiSubmission``'s delivery state.
class CallbackStateSerializer(serializers.Serializer):
    url = serializers.URLField(source="callback_url")
    state = serializers.CharField(
        source="api_submission.callback_state", help_text="pending, delivered or failed."
    )
    delivered_at = serializers.DateTimeField(
        source="api_submission.callback_delivered_at", allow_null=True
    )


# A ``DiagnosisDetail``: the session row, its progress and its read models.
class DiagnosisDetailSerializer(ReadThroughSerializer, DiagnosisSummarySerializer):
    through = ("session", DiagnosisSummarySerializer)

    final_answer = serializers.CharField(
        source="session.final_answer", allow_blank=True, help_text="Markdown; empty until done."
    )
    error = serializers.CharField(
        source="failure_message",
        allow_blank=True,
        help_text="For a failed session, a message in the request's language; the exception "
        "itself is kept for reviewers only. Empty otherwise.",
    )
    error_code = NullIfBlankChoiceField(
        source="failure_code",
        choices=[(c, c) for c in FAILURE_CODES],
        allow_null=True,
        help_text="For a failed session, a stable code: internal_error, worker_lost or timeout.",
    )
    cancel_requested = serializers.BooleanField(source="session.cancel_requested")
    conversation_id = serializers.IntegerField(source="session.conversation_id", allow_null=True)
    context = DiagnosisContextSerializer(source="session.context")
    progress = ProgressEventSerializer(source="events", many=True)
    executor_output_parse_status = NullIfBlankCharField(
        source="session.executor_output_parse_status", allow_null=True
    )
    gatekeeper_counts = serializers.SerializerMethodField()
    claims = ClaimSerializer(source="claims.claims", many=True)
    hypotheses = serializers.SerializerMethodField(
        help_text="Allowed hypotheses, after the Composer input filter."
    )
    missing_info = serializers.SerializerMethodField()
    recommended_actions = serializers.SerializerMethodField()
    executor_proposals = ExecutorProposalsSerializer(
        source="claims", help_text="What the Executor proposed, before filtering (unverified)."
    )
    routing = RoutingSerializer(source="evaluation.verifier_evaluation", allow_null=True)
    # Null before the Verifier (or the Composer) ran: a lookup through a missing record is null.
    composer = ComposerSerializer(
        source="evaluation.verifier_evaluation.composer_output", allow_null=True
    )
    model_usage = serializers.DictField(
        source="session.llm_usage", help_text="{roles: {role: {calls, tokens_in, …}}, total}"
    )
    timings = TimingsSerializer(source="session")
    callback = serializers.SerializerMethodField()

    @extend_schema_field(serializers.DictField(allow_null=True))
    def get_gatekeeper_counts(self, detail: DiagnosisDetail) -> dict[str, Any] | None:
        report = detail.evaluation.gatekeeper
        if report is None:
            return None
        return report.counts.model_dump(mode="json", exclude_unset=True) or None

    # What the Composer input filter allowed; empty before it ran.
    @extend_schema_field(HypothesisSerializer(many=True))
    def get_hypotheses(self, detail: DiagnosisDetail) -> Any:
        filtered = detail.evaluation.composer_input
        return HypothesisSerializer(filtered.allowed_hypotheses if filtered else [], many=True).data

    @extend_schema_field(serializers.ListField(child=serializers.CharField()))
    def get_missing_info(self, detail: DiagnosisDetail) -> list[str]:
        filtered = detail.evaluation.composer_input
        return list(filtered.missing_info) if filtered else []

    @extend_schema_field(ActionSerializer(many=True))
    def get_recommended_actions(self, detail: DiagnosisDetail) -> Any:
        filtered = detail.evaluation.composer_input
        return ActionSerializer(filtered.recommended_actions if filtered else [], many=True).data

    @extend_schema_field(CallbackStateSerializer(allow_null=True))
    def get_callback(self, detail: DiagnosisDetail) -> Any:
        session = detail.session
        if not session.callback_url or getattr(session, "api_submission", None) is None:
            return None
        return CallbackStateSerializer(session).data


class DiagnosisPageSerializer(serializers.Serializer):
    next = serializers.URLField(allow_null=True)
    previous = serializers.URLField(allow_null=True)
    results = DiagnosisSummarySerializer(many=True)


# A ``ToolInvocation`` row (its session is read from the row's cached relation).
class ToolInvocationSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    diagnosis_id = serializers.UUIDField(source="session.public_id")
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


# A ``CallbackAttempt`` row.
class CallbackAttemptSerializer(serializers.Serializer):
    attempt = serializers.IntegerField()
    url = serializers.URLField()
    status_code = serializers.IntegerField(allow_null=True)
    error = serializers.CharField(allow_blank=True)
    duration_ms = serializers.IntegerField()
    at = serializers.DateTimeField()


# A queryset of ``CallbackAttempt`` rows, as ``{"results": [...]}``.
class CallbackAttemptListSerializer(serializers.Serializer):
    results = CallbackAttemptSerializer(source="*", many=True)


# An ``ApiKey`` row (never its secret).
class ApiKeySerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    prefix = serializers.CharField(help_text="The key starts with rp_<prefix>_.")
    created_at = serializers.DateTimeField()
    last_used_at = serializers.DateTimeField(allow_null=True)
    revoked_at = serializers.DateTimeField(allow_null=True)


# A queryset of ``ApiKey`` rows, as ``{"results": [...]}``.
class ApiKeyListSerializer(serializers.Serializer):
    results = ApiKeySerializer(source="*", many=True)


# A ``CreatedApiKey``: the new row and the two secrets shown only now.
class ApiKeyCreatedSerializer(ReadThroughSerializer, ApiKeySerializer):
    through = ("api_key", ApiKeySerializer)

    key = serializers.CharField(help_text="The bearer key. Shown once; only its hash is stored.")
    signing_secret = serializers.CharField(
        help_text="HMAC-SHA256 secret that signs this key's callbacks "
        "(X-Rootproof-Signature: sha256=<hex of HMAC(secret, raw body)>). Shown once."
    )


# An ``AlertIngestResult``.
class AlertIngestSerializer(serializers.Serializer):
    started = serializers.BooleanField()
    reason = serializers.ChoiceField(
        choices=["started", "duplicate", "resolved", "no_firing_alerts"]
    )
    diagnosis = DiagnosisSummarySerializer(source="session", allow_null=True)
