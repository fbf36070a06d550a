"""An incident's JSON reads back (``Incident.from_dict``): what ``sleuth report --incident``, ClickHouse,
the incidents topic, the alerter and on-call verdicts read, in every version sleuth wrote."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sleuth.errors import ConfigError
from sleuth.localizer.impact import Impact
from sleuth.localizer.incident import AttributionSummary, Incident, IncidentCause, RootOperator, Suspect
from sleuth.localizer.search import Action, Cause, Step
from sleuth.topology import DeviceKind

#: Documents as sleuth wrote them: ``network.json`` and ``stage_imbalance.json`` by the version before
#: the typed incident (every field, byte for byte ``Incident.to_json``), ``first_format.json`` as the
#: first localizer did (no steps, no root ``ran``/``again``, no attribution).
WRITTEN = Path(__file__).with_name("incidents")

INCIDENT = Incident(
    job="job-1", incident="job-1-15-29", t_from_ns=10, t_to_ns=20, iterations=(15, 16), cause=IncidentCause.NETWORK,
    suspects=(Suspect("spine:s1", DeviceKind.SPINE, 0.7), Suspect("link:leaf:l0~spine:s1", DeviceKind.LINK, 0.2)),
    roots=(
        RootOperator(15, Cause.NETWORK, 3, "dp.0", 15, "all_reduce", (3, 7), 0.93, 15),
        # Reached from iteration 16's search, it ran at the end of 15, and was as slow again in 17.
        RootOperator(16, Cause.NETWORK, 3, "pp.0", 40, "send", (3, 11), 0.8, 15, (17,)),
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
    attributed = Incident.from_json((WRITTEN / "network.json").read_text())
    assert attributed.attribution is not None and Incident.from_dict(attributed.to_dict()) == attributed


def test_kinds_and_causes_read_back_as_enums_and_are_written_as_their_strings():
    read = Incident.from_json(INCIDENT.to_json())
    assert read.suspects[0].kind is DeviceKind.SPINE and read.roots[0].cause is Cause.NETWORK
    assert read.cause is IncidentCause.NETWORK and read.steps[0].action is Action.PIVOT
    document = INCIDENT.to_dict()
    assert (document["cause"], document["suspects"][0]["kind"], document["roots"][0]["cause"]) == (
        "network", "spine", "network")
    assert all(type(value) is str for value in (document["cause"], document["suspects"][0]["kind"],
                                                document["roots"][0]["cause"], document["steps"][0]["action"]))


@pytest.mark.parametrize("name", ["network.json", "stage_imbalance.json"])
def test_a_document_the_previous_version_wrote_reads_and_writes_back_byte_for_byte(name):
    text = (WRITTEN / name).read_text()
    assert Incident.from_json(text).to_json() + "\n" == text


def test_a_document_of_the_first_format_reads_with_the_defaults_of_what_came_later():
    incident = Incident.from_json((WRITTEN / "first_format.json").read_text(), source="first_format.json")
    assert incident.steps == () and incident.attribution is None
    assert [(r.iteration, r.ran, r.again, r.cause) for r in incident.roots] == [
        (15, 15, (), Cause.NETWORK), (17, 17, (), Cause.COMPUTE)]
    assert [s.kind for s in incident.suspects] == [DeviceKind.SPINE, DeviceKind.LINK, DeviceKind.NIC]
    assert incident.impact == Impact(1.2346, 100.0, 121.0, 0.51234567, 15)


def test_an_attribution_reads_back_with_its_null_share():
    stage = Incident.from_json((WRITTEN / "stage_imbalance.json").read_text())
    assert stage.attribution == AttributionSummary("irregular", 1.1, 2.0, (), (("compute", 1.1),), 0.1, 0.9)
    network = Incident.from_json((WRITTEN / "network.json").read_text())
    assert network.attribution is not None and network.attribution.last_stage_share is None
    assert network.attribution.top_ranks == ((3, 1.4567), (11, 1.2))


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


def test_keys_the_reader_does_not_know_are_passed_over():
    # The incidents topic adds ``steps_omitted`` when an incident is too large for one message.
    document = {**INCIDENT.to_dict(), "steps": [], "steps_omitted": 2}
    assert Incident.from_dict(document).steps == ()
    # A whole number written as a float (as JSON writers of other languages do) reads as the integer.
    assert Incident.from_dict({**INCIDENT.to_dict(), "world": 16.0}).world == 16


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.pop("suspects"), "incident.json: not an incident document (suspects: missing)"),
        (lambda d: d.update(cause="cosmic rays"),
         "cause: must be one of compute, network, mixed, stage_imbalance, seqlen_imbalance, scattered_pauses, got a string 'cosmic rays'"),
        (lambda d: d["steps"][0].update(action="sideways"),
         "steps[0].action: must be one of pivot, bfs, dfs, back, member, got a string 'sideways'"),
        (lambda d: d.update(iterations="x"), "iterations: must be an array, got a string 'x'"),
        (lambda d: d["roots"][1].update(cause=None), "roots[1].cause: must be one of compute, network, got null"),
        (lambda d: d["roots"][0]["ranks"].append("7"), "roots[0].ranks[2]: must be an integer, got a string '7'"),
        (lambda d: d["suspects"][1].update(kind="cable"), "suspects[1].kind: must be one of gpu, nvswitch, nic"),
        (lambda d: d["suspects"][0].update(score=True), "suspects[0].score: must be a number, got a boolean True"),
        (lambda d: d["impact"].pop("gpu_hours_lost"), "impact.gpu_hours_lost: missing"),
        (lambda d: d.update(impact=[1.2]), "impact: must be an object, got an array"),
        (lambda d: d.update(world=16.5), "world: must be an integer, got a number 16.5"),
        (lambda d: d.update(attribution={"trigger": "slowdown"}), "attribution.slowdown: missing"),
    ],
)
def test_bad_documents_name_the_field_at_fault(change, message):
    document = INCIDENT.to_dict()
    change(document)
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        Incident.from_dict(document, source="incident.json")


def test_not_json_and_not_an_object_are_refused():
    with pytest.raises(ConfigError, match="x.json: not JSON"):
        Incident.from_json("{", source="x.json")
    with pytest.raises(ConfigError, match="expected a JSON object, got an array"):
        Incident.from_dict([1, 2])


_ints = st.integers(min_value=-1, max_value=2**62)
_numbers = st.floats(min_value=0.0, max_value=1e12, allow_nan=False)
_names = st.text(min_size=1, max_size=12)
_roots = st.builds(RootOperator, _ints, st.sampled_from(Cause), _ints, _names, _ints, _names,
                   st.tuples(_ints, _ints), _numbers, _ints, st.lists(_ints, max_size=3).map(tuple))
_steps = st.builds(Step, _ints, _names, _ints, _names, _ints, st.sampled_from(Action))
_attributions = st.builds(
    AttributionSummary, st.sampled_from(["slowdown", "irregular"]), _numbers, _numbers,
    st.lists(st.tuples(_ints, _numbers), max_size=3).map(tuple), st.lists(st.tuples(_names, _numbers), max_size=3).map(tuple),
    _numbers, st.none() | _numbers,
)
_incidents = st.builds(
    Incident, job=_names, incident=_names, t_from_ns=_ints, t_to_ns=_ints,
    iterations=st.lists(_ints, min_size=1, max_size=4).map(tuple), cause=st.sampled_from(IncidentCause),
    suspects=st.lists(st.builds(Suspect, _names, st.sampled_from(DeviceKind), _numbers), max_size=3).map(tuple),
    roots=st.lists(_roots, max_size=3).map(tuple), traversal=st.lists(_ints, max_size=4).map(tuple),
    steps=st.lists(_steps, max_size=3).map(tuple), ranks_fetched=_ints, world=_ints,
    impact=st.builds(Impact, _numbers, _numbers, _numbers, _numbers, _ints), advice=st.text(max_size=20),
    seconds=_numbers, attribution=st.none() | _attributions,
)


@settings(max_examples=80, deadline=None)
@given(_incidents)
def test_any_incident_reads_back_as_written_and_writes_the_same_json_again(incident: Incident) -> None:
    text = incident.to_json()
    again = Incident.from_json(text)
    assert again.to_json() == text  # floats come back at the precision written, and stay there
    assert Incident.from_json(again.to_json()) == again
    assert [s.kind for s in again.suspects] == [s.kind for s in incident.suspects]
    assert [(r.cause, r.ran, r.again) for r in again.roots] == [(r.cause, r.ran, r.again) for r in incident.roots]
    assert again.steps == incident.steps and (again.attribution is None) == (incident.attribution is None)
