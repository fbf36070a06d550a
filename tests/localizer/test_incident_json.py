"""An incident's JSON reads back (``Incident.from_dict``): what ``sleuth report --incident`` and ClickHouse give."""

from __future__ import annotations

import json

import pytest

from sleuth.errors import ConfigError
from sleuth.localizer.impact import Impact
from sleuth.localizer.incident import Incident, IncidentCause, RootOperator, Suspect
from sleuth.localizer.search import Action, Step

INCIDENT = Incident(
    job="job-1", incident="job-1-15-29", t_from_ns=10, t_to_ns=20, iterations=(15, 16), cause=IncidentCause.NETWORK,
    suspects=(Suspect("spine:s1", "spine", 0.7), Suspect("link:leaf:l0~spine:s1", "link", 0.2)),
    roots=(
        RootOperator(15, "network", 3, "dp.0", 15, "all_reduce", (3, 7), 0.93, 15),
        # Reached from iteration 16's search, it ran at the end of 15, and was as slow again in 17.
        RootOperator(16, "network", 3, "pp.0", 40, "send", (3, 11), 0.8, 15, (17,)),
    ),
    traversal=(0, 3),
    steps=(Step(0, "dp.0", 15, "all_reduce", 15, Action.PIVOT), Step(3, "dp.0", 15, "all_reduce", 15, Action.BFS)),
    ranks_fetched=8, world=16, impact=Impact(1.2, 100.0, 120.0, 0.5, 15), advice="", seconds=0.25,
)


def test_to_dict_then_from_dict_gives_the_incident_back():
    document = json.loads(INCIDENT.to_json())
    assert document["steps"][1] == {"rank": 3, "comm": "dp.0", "seq": 15, "op": "all_reduce", "iteration": 15,
                                    "action": "bfs"}
    assert Incident.from_dict(document) == INCIDENT
    assert Incident.from_json(INCIDENT.to_json()) == INCIDENT


def test_a_root_keeps_the_iteration_it_ran_in_apart_from_the_one_searched():
    roots = json.loads(INCIDENT.to_json())["roots"]
    assert (roots[1]["iteration"], roots[1]["ran"], roots[1]["again"]) == (16, 15, [17])
    # A document written before ``ran`` was: read as the searched iteration, as it was then.
    for root in roots:
        del root["ran"], root["again"]
    document = {**INCIDENT.to_dict(), "roots": roots}
    assert [(r.iteration, r.ran, r.again) for r in Incident.from_dict(document).roots] == [(15, 15, ()), (16, 16, ())]


def test_a_document_without_steps_reads_with_none():
    document = INCIDENT.to_dict()
    del document["steps"]
    assert Incident.from_dict(document).steps == ()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.pop("suspects"), "incident.json: not an incident document (missing key 'suspects')"),
        (lambda d: d.update(cause="cosmic rays"), "'cosmic rays' is not a valid IncidentCause"),
        (lambda d: d["steps"][0].update(action="sideways"), "'sideways' is not a valid Action"),
        (lambda d: d.update(iterations="x"), "invalid literal for int"),
    ],
)
def test_bad_documents_name_what_is_wrong(change, message):
    document = INCIDENT.to_dict()
    change(document)
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        Incident.from_dict(document, source="incident.json")


def test_not_json_and_not_an_object_are_refused():
    with pytest.raises(ConfigError, match="x.json: not JSON"):
        Incident.from_json("{", source="x.json")
    with pytest.raises(ConfigError, match="expected a JSON object, got list"):
        Incident.from_dict([1, 2])
