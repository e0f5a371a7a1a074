"""The composition layer: the one place that imports both samebits' core and verify.

    cli          ``samebits``: every subcommand wired into one parser
    cmd_lock     ``samebits lock`` / ``lock diff``
    cmd_render   ``samebits render conda|containerfile|nix|oci``
    cmd_install  ``samebits install`` (then ``verify env`` of the result)
    cmd_audit    ``samebits attest`` and ``samebits audit``
    audit/       the attest and audit pipeline, its verdict and its reports

Nothing below this package imports it (``tests/test_layers.py``).
"""
