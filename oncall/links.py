"""Where on-call reads an incident: its page in ``sleuth serve`` (``/incidents/<id>``).

One home for the page's name, used by the server to route and by the alerts to link
(``generatorURL``), so a link in an alert always opens the page the server renders.
"""

from __future__ import annotations

import urllib.parse

__all__ = ["INCIDENT_PREFIX", "incident_id", "incident_path", "incident_url"]

INCIDENT_PREFIX = "/incidents/"


def incident_path(incident: str) -> str:
    """``/incidents/<id>``, the id quoted (a ``/`` in it too), for ``sleuth serve``."""
    if not incident:
        raise ValueError("an incident page needs an incident id, got ''")
    return INCIDENT_PREFIX + urllib.parse.quote(incident, safe="")


def incident_id(path: str) -> str | None:
    """The incident a request path names (``incident_path`` reversed); None for any other path."""
    if not path.startswith(INCIDENT_PREFIX) or path == INCIDENT_PREFIX:
        return None
    return urllib.parse.unquote(path[len(INCIDENT_PREFIX):])


def incident_url(base_url: str, incident: str) -> str:
    """The absolute link to an incident's page on the ``sleuth serve`` at ``base_url`` (``http://host:port``)."""
    return base_url.rstrip("/") + incident_path(incident)
