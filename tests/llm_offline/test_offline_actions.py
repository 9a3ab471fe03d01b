"""The recommended action fits the kind of fault the answer gives.

Every kind the engine can state (``texts.kind_names``) leads to an action of its own that
names the service: a network root's network path, a configuration root's change, never
the generic "look at the error logs" of a kind that has nothing better to say. The kind
comes with the cause the ranking found (a resource, a change, a latency, errors), in the
pairs the engine forms; the action follows the kind whatever that cause is.
"""

from __future__ import annotations

import pytest

from diagnosis.offline.analysis import Suspect
from diagnosis.offline.hypotheses import action_build
from diagnosis.offline.texts import kind_names, texts

SERVICE = "svc-under-test"

# (fault kind, the cause kinds it comes with): Suspect.kind, subkind
PAIRS = {
    "cpu": [("resource", "cpu"), ("latency", "")],
    "memory": [("resource", "memory"), ("latency", ""), ("errors", "")],
    "disk": [("resource", "disk"), ("errors", "")],
    "resource_exhaustion": [("resource", "pool"), ("resource", "threads")],
    "network": [("latency", ""), ("errors", ""), ("dependency", "")],
    "configuration": [("change", ""), ("errors", ""), ("dependency", "")],
    "code": [("code", ""), ("errors", ""), ("change", "")],
    "latency": [("latency", "")],
    "errors": [("errors", "")],
    "dependency": [("dependency_target", "")],
}
# the kinds whose action says what to do about the kind itself
OWN_ACTION = {"cpu", "memory", "disk", "network", "configuration"}


def _suspect(fault_kind: str, kind: str, subkind: str) -> Suspect:
    entry = Suspect(service=SERVICE, kind=kind, subkind=subkind, has_data=True)
    entry.fault_kind = "" if fault_kind == "dependency" else fault_kind
    return entry


def test_every_kind_the_engine_can_state_has_its_pairs_here():
    assert set(PAIRS) == set(kind_names("zh-CN"))


@pytest.mark.parametrize("lang", ["zh-CN", "en"])
@pytest.mark.parametrize(
    ("fault_kind", "kind", "subkind"),
    [(fault, kind, sub) for fault, pairs in PAIRS.items() for kind, sub in pairs],
)
def test_every_kind_gets_an_action_of_its_own_that_names_the_service(
    lang, fault_kind, kind, subkind
):
    t = texts(lang)
    action = action_build(_suspect(fault_kind, kind, subkind), lang, "reason_root")
    assert SERVICE in action.action_text
    generic = {t["act_other"].format(svc=SERVICE)}
    if fault_kind != "errors":
        generic.add(t["act_errors"].format(svc=SERVICE))
    assert action.action_text not in generic, (fault_kind, kind)
    if fault_kind in OWN_ACTION:
        assert action.action_text == t[f"act_{fault_kind}"].format(svc=SERVICE)


@pytest.mark.parametrize("key", ["act_network", "act_configuration"])
def test_the_network_and_configuration_actions_are_translated(key):
    assert texts("en")[key] != texts("zh-CN")[key]
    assert "{svc}" in texts("en")[key]
