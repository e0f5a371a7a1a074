"""The clock an sdist's build reads: the date is ``SOURCE_DATE_EPOCH``, time still runs.

Reproducible builds give a build its date through ``SOURCE_DATE_EPOCH`` (setuptools, flit and
hatchling stamp their zip entries with it), but a ``setup.py`` may also write the date it runs
on into a file: basicsr 1.4.2 (Real-ESRGAN's dependency) writes ``# TIME: <time.asctime()>``
into its ``version.py``, so two builds a second apart gave two wheels and the lock refused it
("two builds ... gave different wheels"), where pip installs whichever it built.

``clock_environment(work)`` writes a ``sitecustomize.py`` into ``work`` and returns the
``PYTHONPATH`` that makes every Python the build starts (uv passes it to the backend's
processes) import it. It makes the readings of the *date* ``SOURCE_DATE_EPOCH``:
``time.asctime()``, ``ctime()``, ``localtime()``, ``gmtime()`` and ``strftime(fmt)`` called
without a time of their own. ``time.time()``, ``time_ns()`` and the monotonic clocks run on,
so a build that waits or measures still ends; a build that stamps ``time.time()`` itself is
still caught by the lock's two builds. The zone is UTC (``build.build_environment``).
"""

from __future__ import annotations

from pathlib import Path

SITECUSTOMIZE = '''\
# samebits: the date a build reads is SOURCE_DATE_EPOCH (samebits/install/buildclock.py)
import os as _os
import time as _time

_EPOCH = float(_os.environ.get("SOURCE_DATE_EPOCH") or 0)
_asctime, _ctime = _time.asctime, _time.ctime
_localtime, _gmtime, _strftime = _time.localtime, _time.gmtime, _time.strftime


def _asctime_at(t=None):
    return _asctime(_localtime(_EPOCH) if t is None else t)


def _ctime_at(secs=None):
    return _ctime(_EPOCH if secs is None else secs)


def _localtime_at(secs=None):
    return _localtime(_EPOCH if secs is None else secs)


def _gmtime_at(secs=None):
    return _gmtime(_EPOCH if secs is None else secs)


def _strftime_at(fmt, t=None):
    return _strftime(fmt, _localtime(_EPOCH) if t is None else t)


_time.asctime, _time.ctime = _asctime_at, _ctime_at
_time.localtime, _time.gmtime, _time.strftime = _localtime_at, _gmtime_at, _strftime_at
'''


def clock_environment(work: Path) -> dict[str, str]:
    """``{"PYTHONPATH": ...}`` for a build run in ``work``: the folder of the clock's
    ``sitecustomize.py`` (written there)."""
    folder = work / "samebits-clock"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sitecustomize.py").write_text(SITECUSTOMIZE)
    return {"PYTHONPATH": str(folder)}
