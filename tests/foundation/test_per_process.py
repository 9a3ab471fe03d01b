"""Values kept per process: one per arguments, at most maxsize, rebuilt by a forked child."""

from __future__ import annotations

from diagnosis.per_process import per_process
from tests.support.forking import forked_child_check


@per_process(maxsize=2)
def _built(*, name: str) -> list[str]:
    return [name]


def test_the_same_arguments_give_the_same_value_and_others_their_own():
    assert _built(name="a") is _built(name="a")
    assert _built(name="a") is not _built(name="b")


def test_past_maxsize_the_oldest_value_is_built_again():
    first = _built(name="first")
    _built(name="second")
    _built(name="third")
    assert _built(name="first") is not first


def test_a_forked_child_builds_its_own_value_once():
    parent = _built(name="shared")
    assert forked_child_check(
        lambda: (
            _built(name="shared") is not parent and _built(name="shared") is _built(name="shared")
        )
    )
    assert _built(name="shared") is parent
