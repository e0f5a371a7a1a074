"""The tests' configuration: the plugin package tests/fixtures/ (hooks, markers, shared
fixtures), registered for every test under tests/. The tests are in three layers:

    tests/unit         pure, in-process: no outside program, no network, seconds in all
    tests/integration  real components: uv, py-rattler, skopeo, umoci, Nix, bubblewrap, Slurm,
                       interpreters in subprocesses, HTTP servers on loopback
    tests/e2e          whole workflows: installs of real locks, audits of papers, the
                       installed console script

Each test carries its layer as a marker (``-m unit``); see tests/fixtures/plugin.py.
"""

pytest_plugins = ["tests.fixtures.plugin", "tests.fixtures.lock", "tests.fixtures.render",
                  "tests.fixtures.verify"]
