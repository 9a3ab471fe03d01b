"""The shared fact extractor and normaliser (diagnosis.facts), without a database."""

from __future__ import annotations

import unicodedata

from hypothesis import given, settings
from hypothesis import strategies as st

from diagnosis.facts import (
    _CJK_CHAR,
    FactKind,
    FactSource,
    _piece_normalize,
    fact_source_of,
    facts_extract,
    span_is_whole,
    text_normalize,
    text_normalize_mapped,
)

EVIDENCE = (
    "2026-03-02T10:21:03Z ERROR payment-service HikariPool-1 - Connection is not available, "
    "request timed out after 30000ms; 12,000 requests failed (x280 over 60m); error ratio 35 %; "
    "image docker.io/jfusterm/stress:latest; ORA-00060: deadlock detected; pool active 50.5"
)


def keys(text, services=()):
    return [(f.kind.value, f.key) for f in facts_extract(text, services=services)]


def bound(claim, evidence=EVIDENCE, services=()):
    source = fact_source_of([evidence])
    return {f.text: source.contains(f) for f in facts_extract(claim, services=services)}


def test_identifiers_of_every_common_shape_are_facts():
    text = "payment-service HikariPool-1 jfusterm/stress ORA-00060 v2.13.9 p99 OOMKilled"
    assert keys(text) == [
        ("identifier", "payment-service"),
        ("identifier", "hikaripool-1"),
        ("identifier", "jfusterm/stress"),
        ("identifier", "ora-00060"),
        ("identifier", "v2.13.9"),
        ("identifier", "p99"),
        ("identifier", "oomkilled"),
    ]


def test_plain_words_abbreviations_and_chinese_text_are_not_facts():
    assert keys("连接池耗尽，e.g. the pool is Full and ERROR logs rose") == []


def test_a_service_name_of_the_environment_is_a_fact_whatever_its_form():
    assert keys("mysql 慢查询", services=["mysql"]) == [("service", "mysql")]
    assert keys("the Order Service is slow", services=["order service"]) == [
        ("service", "order service")
    ]
    assert keys("mysql 慢查询") == []


def test_a_timestamp_gives_a_date_and_a_time_and_its_digits_are_no_numbers():
    assert keys("at 2026-03-02T10:21:03Z") == [("date", "2026-03-02"), ("time", "10:21:03")]


def test_numbers_are_whole_with_their_separators_and_compared_by_value():
    assert keys("12,000 次, 50.50 ms, 35%, 30000ms") == [
        ("number", "12000"),
        ("number", "50.5"),
        ("number", "35"),
        ("number", "30000"),
    ]


def test_a_fact_keeps_its_span_in_the_original_text():
    text = "ＨｉｋａｒｉＰｏｏｌ－１ 在 １０：２１ 超时 ３０％"
    assert [text[f.start : f.end] for f in facts_extract(text)] == [
        "ＨｉｋａｒｉＰｏｏｌ－１",
        "１０：２１",
        "３０％",
    ]


def test_a_time_is_bound_by_a_timestamp_holding_that_minute():
    assert bound("10:21 开始超时") == {"10:21": True}
    assert bound("10:21:03 开始超时") == {"10:21:03": True}
    assert bound("10:22 开始超时") == {"10:22": False}
    assert bound("10:21:04 开始超时") == {"10:21:04": False}


def test_a_number_is_bound_only_by_the_same_whole_number():
    assert bound("12,000 requests failed") == {"12,000": True}
    assert bound("12000 requests failed") == {"12000": True}
    assert bound("280 次") == {"280": True}  # "(x280 over 60m)" is an event count of 280
    assert bound("28 次") == {"28": False}
    assert bound("2800 次") == {"2800": False}
    assert bound("x280 次") == {"x280": True}
    assert bound("900 次") == {"900": False}
    assert bound("50 active") == {"50": False}  # the evidence says 50.5
    assert bound("000 failed") == {"000": False}


def test_a_percentage_needs_a_percent_sign_in_the_evidence():
    assert bound("错误率 35%") == {"35%": True}
    assert bound("after 30000%") == {"30000%": False}


def test_an_identifier_is_bound_only_as_a_whole_token():
    assert bound("HikariPool-1 耗尽") == {"HikariPool-1": True}
    assert bound("jfusterm/stress 镜像") == {"jfusterm/stress": True}
    assert bound("ORA-00060 死锁") == {"ORA-00060": True}
    assert bound("HikariPool-10 耗尽") == {"HikariPool-10": False}
    assert bound("payment-service-db 慢") == {"payment-service-db": False}
    assert bound("ORA-0006 死锁") == {"ORA-0006": False}


def test_a_region_cut_from_an_output_is_checked_against_the_text_around_it():
    text = text_normalize("hikaripool-1 - connection is not available")
    source = FactSource()
    source.region_add(text, 6, len(text))  # "pool-1 - connection ..."
    [fact] = facts_extract("pool-1")
    assert not source.contains(fact)
    source.region_add(text, 0, len(text))
    [fact] = facts_extract("HikariPool-1")
    assert source.contains(fact)


def test_whole_spans_do_not_begin_or_end_inside_a_number():
    assert not span_is_whole("reached 50.5 x", 0, 11)  # "reached 50."
    assert not span_is_whole("12,000 requests", 2, 15)  # ",000 requests"
    assert not span_is_whole("50.5 of limit", 2, 13)  # ".5 of limit"
    assert span_is_whole("reached 50.5 x", 0, 12)


def test_the_mapped_normaliser_equals_the_plain_one():
    text = "  ＨｉｋａｒｉＰｏｏｌ－１\t—  “Timed”\n‘OUT’ 支付 网关 "
    assert text_normalize_mapped(text)[0] == text_normalize(text)
    assert text_normalize_mapped(text, fold=False)[0].lower() == text_normalize(text)


numbers = st.integers(min_value=0, max_value=10**7)


@settings(max_examples=200, deadline=None)
@given(st.lists(numbers, min_size=1, max_size=4), st.data())
def test_a_claim_whose_numbers_come_from_its_evidence_is_bound_and_one_changed_digit_is_not(
    values, data
):
    evidence = " ".join(f"metric_{i} value {v}" for i, v in enumerate(values))
    source = fact_source_of([evidence])
    claim = "；".join(f"指标 {v} 次" for v in values)
    assert all(source.contains(f) for f in facts_extract(claim))

    which = data.draw(st.integers(min_value=0, max_value=len(values) - 1))
    digits = str(values[which])
    position = data.draw(st.integers(min_value=0, max_value=len(digits) - 1))
    replacement = data.draw(st.sampled_from([d for d in "0123456789" if d != digits[position]]))
    changed = digits[:position] + replacement + digits[position + 1 :]
    if int(changed) in values:  # the changed number happens to be another true one
        return
    facts = facts_extract(f"指标 {changed} 次")
    assert [f.kind for f in facts] == [FactKind.NUMBER]
    assert not source.contains(facts[0])


def _reference_normalize_mapped(text, *, fold):
    """The first, per-character implementation: the oracle for the fast ones."""
    chars: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    n = len(text)
    i = 0
    while i < n:
        j = i + 1
        while j < n and text[j] >= "\u0300" and unicodedata.combining(text[j]):
            j += 1
        for ch in _piece_normalize(text[i:j], fold):
            chars.append(ch)
            starts.append(i)
            ends.append(j)
        i = j
    # collapse whitespace runs to one space, strip both ends
    c2: list[str] = []
    s2: list[int] = []
    e2: list[int] = []
    pending: tuple[int, int] | None = None
    for ch, s, e in zip(chars, starts, ends, strict=True):
        if ch.isspace():
            if pending is None:
                pending = (s, e)
            continue
        if pending is not None and c2:
            c2.append(" ")
            s2.append(pending[0])
            e2.append(pending[1])
        pending = None
        c2.append(ch)
        s2.append(s)
        e2.append(e)
    # drop spaces next to a CJK character
    c3: list[str] = []
    s3: list[int] = []
    e3: list[int] = []
    for k, ch in enumerate(c2):
        if ch == " " and (
            (k > 0 and _CJK_CHAR.match(c2[k - 1]))
            or (k + 1 < len(c2) and _CJK_CHAR.match(c2[k + 1]))
        ):
            continue
        c3.append(ch)
        s3.append(s2[k])
        e3.append(e2[k])
    return "".join(c3), s3, e3


TEXTS = st.text(
    alphabet=st.one_of(
        st.characters(max_codepoint=127),
        st.sampled_from(
            list("连接池超时，：；（）「」“”‘’—–－ＨＩ１０％\u3000\u00a0é\u0301\u0327ßİﬁ")
        ),
    ),
    max_size=80,
)


@settings(max_examples=400, deadline=None)
@given(TEXTS, st.booleans())
def test_the_mapped_normaliser_equals_the_per_character_reference(text, fold):
    assert text_normalize_mapped(text, fold=fold) == _reference_normalize_mapped(text, fold=fold)
    if fold:
        assert text_normalize_mapped(text)[0] == text_normalize(text) or not text.isascii()


# --- facts as people write them (docs/contracts.md §2) -----------------------------------


def test_an_event_count_binds_its_number_whole_and_nothing_else():
    for written in ("(x42 over 12m)", "x42 over 3m", "Back-off (x42)"):
        assert bound("重启 42 次", written) == {"42": True}, written
        assert bound("重启 4 次", written) == {"4": False}, written
        assert bound("重启 142 次", written) == {"142": False}, written
    for other in ("x142 over 12m", "4.2", "42.5", "0x42", "x4.2"):
        assert bound("重启 42 次", other) == {"42": False}, other


def test_a_timestamp_of_any_common_form_binds_its_date_and_clock_time():
    forms = [
        "2026-05-04 09:12:41.207 INFO main",  # JVM / logback
        "2026-05-04 09:12:41,207 WARN [pool-1]",  # log4j
        "2026-05-04T09:12:41.207Z level=error",  # ISO, Loki
        "ts=2026-05-04T09:12:41.207+08:00 level=warn",  # Go logfmt
        "2026/05/04 09:12:41 http: TLS handshake error",  # Go log
        "Last Timestamp:  Mon, 04 May 2026 09:12:41 +0000",  # kubectl describe
        '10.0.0.7 - - [04/May/2026:09:12:41 +0000] "GET /pay HTTP/1.1" 504',  # nginx
    ]
    for form in forms:
        got = bound("2026-05-04 09:12 开始报错，09:12:41 第一次超时", form)
        assert got == {"2026-05-04": True, "09:12": True, "09:12:41": True}, form
        shifted = bound("2026-05-05 09:13 开始报错，09:12:42 第一次超时", form)
        assert shifted == {"2026-05-05": False, "09:13": False, "09:12:42": False}, form


def test_a_date_written_in_chinese_is_the_same_date():
    assert keys("2026年5月4日 09:12 开始") == [("date", "2026-05-04"), ("time", "09:12")]
    assert bound("2026年5月4日开始", "2026-05-04T09:12:41Z") == {"2026年5月4日": True}
    assert bound("2026年5月5日开始", "2026-05-04T09:12:41Z") == {"2026年5月5日": False}


def test_an_excerpt_that_ends_inside_a_timestamp_still_binds_the_parts_it_holds():
    text = text_normalize("2026-05-04 09:12:41.207 INFO")
    source = FactSource()
    source.region_add(text, 0, text.index(":41"))  # "2026-05-04 09:12"
    date, minute, second = facts_extract("2026-05-04 09:12 09:12:41")
    assert source.contains(date) and source.contains(minute)
    assert not source.contains(second)
