"""The ``sitecustomize.py`` that gives a paper command the attested torch settings.

With ``deterministic = true`` (the default) a command runs with a folder first on its
``PYTHONPATH`` that holds one generated file, ``sitecustomize.py``. Python imports it at
start-up; it imports nothing heavy itself, but waits for the command to import torch and then,
before the command's next line runs, sets the settings the attestation's suite ran under
(``torch.use_deterministic_algorithms``, cuDNN's deterministic and benchmark flags, the
float32 matmul precision, cuDNN TF32) and writes torch's readback of them next to itself, for
the attestation. A torch before 1.12 has no matmul precision: its TF32 switch is set as the
precision would set it, and the readback says the precision is unavailable
(``verify.gpu.workloads.settings.apply`` does the same). A process that never imports torch
is left alone. An environment's own ``sitecustomize`` still runs: the generated one runs it
after installing the hook.

``samebits paper init`` (and only it) also asks for ``opens``: the hook then first installs an
audit hook (``sys.addaudithook``, the ``open`` event: ``open()``, ``io.open_code``, ``os.open``)
that appends one JSON line, ``["r", PATH]`` or ``["w", PATH]`` (absolute; "w" where the mode
or the flags write), to that file per distinct open of the process and of every Python process
it starts, so that ``samebits_app.paper.draft`` can tell the data a command read from its code
and its outputs. Standard library only, Python 3.8+ (audit hooks are 3.8's); an open the hook
cannot record is skipped, never an error in the command. Without ``opens`` the text is the one
attest always wrote, byte for byte; with no ``settings`` (a command that is not deterministic)
it holds the recorder alone.

``source(settings, readback_path, opens=None)`` is pure: the file's text, byte-stable per input.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

READBACK = "torch-settings.json"

_HEAD = '''\
"""Written by samebits for one paper command (samebits_app/paper/hook.py): the attested
torch settings, applied when the command imports torch. Nothing else."""
import sys

'''

# ``samebits paper init`` only (``opens``): every file the process opens, recorded
_HEAD_OPENS = '''\
"""Written by samebits for one paper command (samebits_app/paper/hook.py): every file the
process opens, recorded for ``samebits paper init``, and the attested torch settings when the
command runs deterministic. Nothing else."""
import sys

OPENS = {opens}


def _record_opens():
    import json
    import os

    try:
        fd = os.open(OPENS, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    except OSError:
        return
    seen = set()

    def audit(event, args):
        if event != "open":
            return
        try:
            name, mode, flags = args
            if isinstance(name, int):
                return
            name = os.path.abspath(os.fsdecode(name))
            if isinstance(mode, str):
                wrote = any(c in mode for c in "wax+")
            else:
                wrote = ((flags or 0) & os.O_ACCMODE) != os.O_RDONLY
            key = ("w" if wrote else "r", name)
            if key not in seen:
                seen.add(key)
                os.write(fd, (json.dumps(key) + "\\n").encode("ascii"))
        except Exception:
            pass

    sys.addaudithook(audit)


_record_opens()


'''

_TORCH = '''\
SETTINGS = {settings}
READBACK = {readback}


def _api(torch, name):
    try:
        return getattr(torch, name, None)
    except AssertionError:
        return None


def _ask(torch, name):
    got = _api(torch, name)
    if got is None:
        return "unavailable (torch %s has no torch.%s)" % (torch.__version__, name)
    return got()


def _apply(torch):
    import json
    import os

    import torch.backends.cuda
    import torch.backends.cudnn

    deterministic = _api(torch, "use_deterministic_algorithms")  # torch 1.8
    if deterministic is not None:
        deterministic(SETTINGS["deterministic_algorithms"])
    torch.backends.cudnn.deterministic = SETTINGS["cudnn_deterministic"]
    torch.backends.cudnn.benchmark = SETTINGS["cudnn_benchmark"]
    precision = _api(torch, "set_float32_matmul_precision")  # torch 1.12
    if precision is not None:
        precision(SETTINGS["float32_matmul_precision"])
    else:  # what set_float32_matmul_precision sets
        torch.backends.cuda.matmul.allow_tf32 = SETTINGS["float32_matmul_precision"] != "highest"
    torch.backends.cudnn.allow_tf32 = SETTINGS["cudnn_allow_tf32"]
    seen = {{
        "deterministic_algorithms": _ask(torch, "are_deterministic_algorithms_enabled"),
        "cudnn_deterministic": bool(torch.backends.cudnn.deterministic),
        "cudnn_benchmark": bool(torch.backends.cudnn.benchmark),
        "float32_matmul_precision": _ask(torch, "get_float32_matmul_precision"),
        "cuda_matmul_allow_tf32": bool(torch.backends.cuda.matmul.allow_tf32),
        "cudnn_allow_tf32": bool(torch.backends.cudnn.allow_tf32),
        "cublas_workspace_config": os.environ.get("CUBLAS_WORKSPACE_CONFIG"),
    }}
    with open(READBACK, "w") as f:
        json.dump(seen, f, sort_keys=True)


class _AfterTorch:
    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        sys.meta_path.remove(self)
        import importlib.util

        spec = importlib.util.find_spec("torch")
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def exec_then_apply(module):
            exec_module(module)
            _apply(module)

        spec.loader.exec_module = exec_then_apply
        return spec


sys.meta_path.insert(0, _AfterTorch())


'''

_NEXT = '''\
def _next_sitecustomize():
    import os

    here = os.path.dirname(os.path.abspath(__file__))
    later = False
    for entry in list(sys.path):
        if os.path.abspath(entry or ".") == here:
            later = True
            continue
        candidate = os.path.join(entry, "sitecustomize.py")
        if later and os.path.isfile(candidate):
            with open(candidate) as f:
                exec(compile(f.read(), candidate, "exec"), {"__name__": "sitecustomize"})
            return


_next_sitecustomize()
'''


def source(settings: Mapping[str, Any] | None, readback: str, *,
           opens: str | None = None) -> str:
    """The text of the hook for ``settings`` (``verify.gpu.workloads.settings.Settings.
    to_dict``; None: no torch settings, for a command that is not deterministic); ``opens``
    (``samebits paper init`` only): the file every open is recorded in."""
    text = (_HEAD_OPENS.format(opens=json.dumps(opens)) if opens is not None else _HEAD)
    if settings is not None:
        keep = ("deterministic_algorithms", "cudnn_deterministic", "cudnn_benchmark",
                "float32_matmul_precision", "cudnn_allow_tf32")
        chosen = {k: settings[k] for k in keep}
        text += _TORCH.format(settings=repr(dict(sorted(chosen.items()))),
                              readback=json.dumps(readback))
    return text + _NEXT
