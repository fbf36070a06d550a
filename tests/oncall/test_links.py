"""Incident pages of ``sleuth serve``: the link an alert carries names the incident the server shows."""

from __future__ import annotations

import urllib.parse

import pytest

from sleuth.oncall.links import incident_id, incident_path, incident_url


@pytest.mark.parametrize("incident", ["sim-20-59", "job/with slash-3-4", "ü 100%?#"])
def test_the_server_reads_back_the_id_of_every_link(incident) -> None:
    url = incident_url("http://sleuth.example:18080/", incident)
    assert url.startswith("http://sleuth.example:18080/incidents/") and " " not in url
    assert incident_id(urllib.parse.urlsplit(url).path) == incident
    assert incident_path(incident) == url.removeprefix("http://sleuth.example:18080")


def test_other_paths_name_no_incident() -> None:
    assert incident_id("/") is None and incident_id("/incidents/") is None and incident_id("/healthz") is None
    with pytest.raises(ValueError, match="incident id"):
        incident_path("")
