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

``source(settings, readback_path)`` is pure: the file's text, byte-stable per input.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

READBACK = "torch-settings.json"

_TEMPLATE = '''\
"""Written by samebits for one paper command (samebits_app/paper/hook.py): the attested
torch settings, applied when the command imports torch. Nothing else."""
import sys

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
                exec(compile(f.read(), candidate, "exec"), {{"__name__": "sitecustomize"}})
            return


_next_sitecustomize()
'''


def source(settings: Mapping[str, Any], readback: str) -> str:
    """The text of the hook for ``settings``
    (``verify.gpu.workloads.settings.Settings.to_dict``)."""
    keep = ("deterministic_algorithms", "cudnn_deterministic", "cudnn_benchmark",
            "float32_matmul_precision", "cudnn_allow_tf32")
    chosen = {k: settings[k] for k in keep}
    return _TEMPLATE.format(settings=repr(dict(sorted(chosen.items()))),
                            readback=json.dumps(readback))
