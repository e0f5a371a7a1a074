"""Auditing the paper itself: the authors' commands, their outputs and their curves.

A paper folder holds ``samebits-paper.toml`` (``manifest``): the lock, the commands to run,
the outputs each writes and how each is compared. ``samebits attest PAPER`` runs the commands
in the locked environment after the suite and records, per command, everything that can change
a result and per output its digest and comparable values (the attestation's ``paper`` key);
``samebits audit PAPER`` reruns them and says, per command, bit-identical, within tolerance,
explained (with numbers) or diverged (the metric, the step, the tensor and index).

Modules, one job each:

    manifest   the manifest: dataclasses and reading
    manifestcheck   its validation, key by key (every problem listed): pure
    runner     run one command: its environment, the settings hook, timeout, its outputs
    hook       the sitecustomize that applies the attested torch settings
    values     metrics and curves out of JSON, CSV, YAML and text: pure
    judge      the authors' record against the reviewer's: pure
    session    the attest and audit steps that tie them together
    svg        a curve, authors' against reviewer's, as inline SVG: pure

Tensors (safetensors, torch.save, .npy, .npz) are read and compared in the environment's own
interpreter by ``python -m verify.errorstats``: nothing here imports torch.
"""
