import pytest

from sleuth.logger import core


@pytest.fixture(params=sorted(core.IMPLEMENTATIONS))
def impl(request):
    """Each twin of the recorder in turn: the C extension and the pure-Python module."""
    return core.load(request.param)
