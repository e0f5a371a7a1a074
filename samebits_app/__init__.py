"""The composition layer: the one place that imports both samebits' core and verify.

Every ``samebits`` command is one module named after it, ``cmd_<command>.py``:

    cli          ``samebits``: every subcommand wired into one parser (docpages: the --help
                 epilogs' docs pages)
    cmd_init     ``samebits init``          cmd_lock     ``samebits lock`` / ``lock diff``
    cmd_freeze   ``samebits freeze``        cmd_render   ``samebits render ...``
    cmd_install  ``samebits install``       cmd_bundle   ``samebits bundle`` / ``bundle check``
    cmd_attest   ``samebits attest``        cmd_audit    ``samebits audit``
    cmd_check    ``samebits check``         cmd_keygen   ``samebits keygen``
    cmd_cache    ``samebits cache verify``
    audit/       the attest and audit pipeline, its verdict and its reports
    paper/       the paper manifest, its tree and inputs, the sandboxed runner, judging outputs

``samebits verify ...`` is verify's own (``verify/cli.py``, ``verify/<area>/cmd_<name>.py``).
Nothing below this package imports it (``tests/integration/test_layers.py``).
"""
