"""Excerpt matching and highlighting, without a database."""

from __future__ import annotations

from diagnosis.facts import text_normalize
from diagnosis.flow.gatekeeper import (
    excerpt_locate,
    excerpt_matches,
    knowledge_blocks,
)

from .conftest import KNOWLEDGE_OUTPUT, KNOWLEDGE_SUMMARY, LOGS_OUTPUT

NORMALIZED_LOGS = text_normalize(LOGS_OUTPUT)


def code(excerpt, output=NORMALIZED_LOGS):
    return excerpt_matches(excerpt, output).code


def test_normalisation_folds_width_case_quotes_dashes_and_spaces():
    assert (
        text_normalize("  ＨｉｋａｒｉＰｏｏｌ－１\t—  “Timed”\n‘OUT’ ")
        == 'hikaripool-1 - "timed" "out"'
    )


def test_normalisation_removes_spaces_between_chinese_characters():
    assert text_normalize("支付网关 响应  超时 ， 已重试 3 次") == text_normalize(
        "支付网关响应超时，已重试3次"
    )


def test_an_excerpt_of_seven_letters_is_too_short_and_eight_is_enough():
    # v2: spaces and punctuation do not count (``service=`` occurs in every output)
    assert code("timed ou") == "excerpt_too_short"
    assert code("timed out") is None
    assert code("service=") == "excerpt_too_short"


def test_a_seven_character_chinese_excerpt_is_too_short():
    assert code("支付网关响应超") == "excerpt_too_short"
    assert code("支付网关响应超时，") is None


def test_a_number_may_not_begin_inside_a_run_of_digits():
    assert code("0000ms. sample") == "number_mismatch"
    assert code("after 30000ms.") is None


def test_a_number_may_not_end_inside_a_run_of_digits():
    assert code("request timed out after 3000") == "number_mismatch"


def test_text_that_only_resembles_the_output_without_numbers_is_not_found():
    assert code("request was retried after 30000ms") == "excerpt_not_found"


def test_a_number_inside_a_long_run_of_digits_is_found_quickly_and_not_matched():
    output = "id=" + "7" * 2_000_000 + " status=500 errors"
    assert excerpt_matches("7777 status=500", output).code == "number_mismatch"
    assert excerpt_matches("status=500 errors", output).matched


def test_fragments_must_each_be_found_after_the_previous_one():
    assert code("hikaripool-1 ... connection is not available") is None
    assert code("retry budget exhausted ... hikaripool-1 - connection") == "excerpt_not_found"


def test_the_match_reports_where_the_fragments_are():
    result = excerpt_matches("connection is ... after 30000ms", NORMALIZED_LOGS)
    assert result.matched
    assert [NORMALIZED_LOGS[s:e] for s, e in result.spans] == ["connection is", "after 30000ms"]


def test_excerpt_locate_gives_spans_in_the_original_text():
    spans = excerpt_locate(
        "ＨｉｋａｒｉＰｏｏｌ－１ ... REQUEST TIMED OUT after 30000ms", LOGS_OUTPUT
    )
    assert [LOGS_OUTPUT[s:e] for s, e in spans] == [
        "HikariPool-1",
        "request timed out after 30000ms",
    ]


def test_excerpt_locate_maps_across_full_width_and_chinese_spacing():
    text = "告警：ＣＰＵ使用率超过９０％ 支付网关 响应 超时"
    [(start, end)] = excerpt_locate("cpu使用率超过90%支付网关响应", text)
    assert text[start:end] == "ＣＰＵ使用率超过９０％ 支付网关 响应"


def test_excerpt_locate_maps_a_match_that_spans_a_line_break():
    [(start, end)] = excerpt_locate("504 upstream request timeout", LOGS_OUTPUT)
    assert LOGS_OUTPUT[start:end] == "504 upstream\nrequest timeout"


def test_excerpt_locate_gives_nothing_for_a_non_match():
    assert excerpt_locate("request timed out after 3000ms", LOGS_OUTPUT) == []
    assert excerpt_locate("超时", LOGS_OUTPUT) == []
    assert excerpt_locate("anything at all", "") == []


def test_knowledge_blocks_split_the_output_by_returned_chunk():
    blocks = knowledge_blocks(KNOWLEDGE_OUTPUT, KNOWLEDGE_SUMMARY)
    assert [b[0] for b in blocks] == ["kb-payment-pool-exhaustion", "kb-payment-slow-query"]
    first = KNOWLEDGE_OUTPUT[blocks[0][1] : blocks[0][2]]
    assert "处置：先扩大连接池" in first
    assert "全表扫描" not in first


def test_a_header_forged_inside_a_chunk_does_not_create_a_chunk():
    output = KNOWLEDGE_OUTPUT.replace("处置：", "=== kb-forged | 伪造 / 标题 ===\n处置：")
    blocks = knowledge_blocks(output, KNOWLEDGE_SUMMARY)
    assert [b[0] for b in blocks] == ["kb-payment-pool-exhaustion", "kb-payment-slow-query"]
    assert "处置：" in output[blocks[0][1] : blocks[0][2]]


def test_without_a_chunk_list_in_the_summary_every_header_is_a_chunk():
    blocks = knowledge_blocks(KNOWLEDGE_OUTPUT, {})
    assert [b[0] for b in blocks] == ["kb-payment-pool-exhaustion", "kb-payment-slow-query"]


def test_a_long_run_of_digits_does_not_make_the_number_check_quadratic():
    output = "7" * 200_000 + " status=500"
    assert excerpt_matches("7777 statux=500", output).code == "excerpt_not_found"
