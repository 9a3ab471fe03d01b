from diagnosis.tokens import estimate_tokens


def test_each_cjk_character_counts_as_one_token_and_other_text_as_a_third():
    assert estimate_tokens("") == 0
    assert estimate_tokens("连接池") == 3
    assert estimate_tokens("abcd") == 2
    assert estimate_tokens("连接池 pool") == 3 + 2


def test_the_estimate_is_never_below_a_word_count():
    text = "payment-service timed out after 30000ms on pool HikariPool-1 " * 50
    assert estimate_tokens(text) >= len(text.split())
