"""Auditing the paper itself: the authors' commands, their outputs and their curves.

A paper folder holds ``samebits-paper.toml`` (``manifest``): the lock, the commands to run,
the outputs each writes, how each is compared and the data (``[[inputs]]``) the commands read.
``samebits attest PAPER`` checks the inputs, runs the commands in the locked environment before
the suite and records the paper's tree (its code, file by file), the inputs and, per command,
everything that can change a result and per output its digest and comparable values (the
attestation's ``paper`` key; every file and input an in-toto subject); ``samebits audit
PAPER`` compares the reviewer's code and inputs with the attested ones first, reruns the
commands and says, per command, bit-identical, within tolerance, explained (with numbers) or
diverged (the metric, the step, the tensor and index), each divergence under the cause that
explains it (the code, an input, a changed declaration) where there is one.

Modules, one job each:

    manifest   the manifest: dataclasses and reading
    manifestcheck   its validation, key by key (every problem listed): pure
    tree       the paper's files: which ones (the rule), their record, the reviewer's against it
    inputs     [[inputs]]: read or fetched, proved by sha256, against the attested ones
    runner     run one command: its environment, the settings hook, timeout, its outputs
    hook       the sitecustomize that applies the attested torch settings
    values     metrics and curves out of JSON, CSV, YAML and text: pure
    judge      the authors' record against the reviewer's: pure
    session    the attest and audit steps that tie them together
    svg        a curve, authors' against reviewer's, as inline SVG: pure

Tensors (safetensors, torch.save, .npy, .npz) are read and compared in the environment's own
interpreter by ``python -m verify.gpu.errorstats``: nothing here imports torch.
"""
