"""samebits.lock.pipordering against pip's own functions: the installed pip's
``get_topological_weights`` (the oracle: the real function, called in this process) on pip's
own test graphs and on random ones, pip's ``get_installation_order`` cases from its test
suite, and the graph pip builds from metadata (extras, Requires-Python, markers)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pip._internal.resolution.resolvelib.resolver import (
    _req_set_item_sorter,
    get_topological_weights,
)
from pip._vendor.resolvelib.structs import DirectedGraph

from samebits.foreign.target import Target
from samebits.lock.pipordering import (
    PIP_VERSION,
    REQUIRES_PYTHON,
    Dist,
    installation_order,
    pip_order,
    resolution_graph,
    topological_weights,
)

Graph = Mapping[str | None, set[str]]
ENV = Target(platform="linux-64", python="3.11", glibc="2.28").environment()


class SortedGraph(DirectedGraph):  # type: ignore[type-arg]
    """pip's graph with each node's children walked in sorted order: pip walks a set, whose
    order only matters where its five-visit cap binds (the module docstring); with the same
    order the two must agree on every graph."""

    def iter_children(self, key: str | None) -> Iterator[str]:
        return iter(sorted(self._forwards[key]))


def _pip_graph(edges: Graph) -> SortedGraph:
    g = SortedGraph()
    for node in edges:
        g.add(node)
    for node, kids in edges.items():
        for kid in kids:
            if kid not in g:
                g.add(kid)
            g.connect(node, kid)
    return g


def _edges(pairs: list[tuple[str | None, str]]) -> dict[str | None, set[str]]:
    out: dict[str | None, set[str]] = {None: set()}
    for parent, child in pairs:
        out.setdefault(parent, set()).add(child)
        out.setdefault(child, set())
    return out


def pip_weights(edges: Graph, keys: set[str]) -> dict[str | None, int]:
    return get_topological_weights(_pip_graph(edges), keys)


def pip_installation_order(edges: Graph, keys: set[str]) -> list[str]:
    """pip's Resolver.get_installation_order without a resolver: its sort of the weights."""
    weights = pip_weights(edges, keys)
    return [k for k, _ in sorted(((k, None) for k in keys), reverse=True,
                                 key=lambda item: _req_set_item_sorter(item, weights))]


def test_the_transcribed_pip_is_the_installed_one() -> None:
    """The module names the pip it transcribes; the venv's pip is that one."""
    import pip

    assert pip.__version__ == PIP_VERSION


# pip's tests/unit/resolution_resolvelib/test_resolver.py, test_new_resolver_topological_weights
# (github.com/pypa/pip): its graphs, judged by the installed pip's function
PIP_GRAPHS = {
    "deep second edge": [(None, "one"), (None, "two"), ("one", "five"), ("two", "three"),
                         ("three", "four"), ("four", "five")],
    "linear": [(None, "one"), ("one", "two"), ("two", "three"), ("three", "four"),
               ("four", "five")],
    "linear AND root -> three": [(None, "one"), ("one", "two"), ("two", "three"),
                                 ("three", "four"), ("four", "five"), (None, "three")],
    "linear AND one -> four": [(None, "one"), ("one", "two"), ("two", "three"),
                               ("three", "four"), ("four", "five"), ("one", "four")],
    "linear AND four -> one (cycle)": [(None, "one"), ("one", "two"), ("two", "three"),
                                       ("three", "four"), ("four", "five"), ("four", "one")],
    "linear AND four -> three (cycle)": [(None, "one"), ("one", "two"), ("two", "three"),
                                         ("three", "four"), ("four", "five"),
                                         ("four", "three")],
}


@pytest.mark.parametrize("keys", [None, {"one", "three", "five"}, {"four", "five"}])
@pytest.mark.parametrize("name", sorted(PIP_GRAPHS))
def test_weights_are_pips_on_pips_graphs(name: str, keys: set[str] | None) -> None:
    """pip's own test graphs, all keys and restricted ones: the same weights as pip's."""
    edges = _edges(PIP_GRAPHS[name])  # type: ignore[arg-type]
    keys = keys or {n for n in edges if n is not None}
    assert topological_weights(edges, keys) == pip_weights(edges, keys)


# the same file's test_new_resolver_get_installation_order: edges and pip's expected order
@pytest.mark.parametrize(("pairs", "expected"), [
    ([(None, "require-simple"), ("require-simple", "simple")], ["simple", "require-simple"]),
    ([(None, "meta"), ("meta", "simple"), ("meta", "simple2")], ["simple2", "simple", "meta"]),
    ([(None, "toporequires"), (None, "toporequires2"), (None, "toporequires3"),
      (None, "toporequires4"), ("toporequires2", "toporequires"),
      ("toporequires3", "toporequires"), ("toporequires4", "toporequires"),
      ("toporequires4", "toporequires2"), ("toporequires4", "toporequires3")],
     ["toporequires", "toporequires3", "toporequires2", "toporequires4"]),
])
def test_installation_order_is_pips(pairs: list[tuple[str | None, str]],
                                    expected: list[str]) -> None:
    """pip's expected orders; equal weights go by name, the later name first."""
    edges = _edges(pairs)
    keys = {n for n in edges if n is not None}
    assert installation_order(edges, keys) == expected == pip_installation_order(edges, keys)


@st.composite
def graphs(draw: st.DrawFn) -> tuple[dict[str | None, set[str]], set[str]]:
    """A graph as resolvelib leaves it: every node reachable from the root; cycles, self
    edges and unreachable-then-dropped nodes allowed; some nodes not requirement keys."""
    names = [f"p{i}" for i in range(draw(st.integers(1, 9)))]
    edges: dict[str | None, set[str]] = {None: set(draw(st.sets(st.sampled_from(names),
                                                               min_size=1)))}
    for n in names:
        edges[n] = set(draw(st.sets(st.sampled_from(names))))
    seen, todo = set(), [None]
    while todo:
        for kid in edges[todo.pop()]:
            if kid not in seen:
                seen.add(kid)
                todo.append(kid)
    edges = {k: v for k, v in edges.items() if k is None or k in seen}
    keys = {n for n in seen if draw(st.booleans()) or n == names[0]} & seen
    return edges, keys


@settings(max_examples=400, deadline=None)
@given(graphs())
def test_weights_are_pips_on_random_graphs(case: tuple[dict[str | None, set[str]], set[str]]
                                           ) -> None:
    """Any graph, cycles included (the five-visit cap too): pip's weights and order."""
    edges, keys = case
    assert topological_weights(edges, keys) == pip_weights(edges, keys)
    assert installation_order(edges, keys) == pip_installation_order(edges, keys)


def test_the_graph_is_not_changed() -> None:
    """Pruning works on a copy: the caller's graph is as it was."""
    edges = _edges([(None, "a"), ("a", "b"), ("b", "a")])
    before = {k: set(v) for k, v in edges.items()}
    topological_weights(edges, {"a", "b"})
    assert edges == before


RP = "Requires-Python: >=3.8\n"


def _dist(name: str, *requires: str, rp: bool = False, extras: tuple[str, ...] = ()) -> Dist:
    text = "".join([f"Name: {name}\n", RP if rp else "",
                    *(f"Requires-Dist: {r}\n" for r in requires),
                    *(f"Provides-Extra: {e}\n" for e in extras)])
    return Dist.from_metadata(name, text.encode())


@pytest.mark.parametrize(("dists", "roots", "graph"), [
    ([_dist("a", rp=True), _dist("b")], ["a", "b"],
     {None: {"a", "b"}, "a": {REQUIRES_PYTHON}, "b": set(), REQUIRES_PYTHON: set()}),
    ([_dist("Top", "Lib_X[Fast]"), _dist("lib-x", "base", "turbo; extra == 'FAST'",
                                         extras=("fast",)),
      _dist("turbo"), _dist("base")], ["top"],
     {None: {"top"}, "top": {"lib-x[fast]"}, "lib-x[fast]": {"lib-x", "base", "turbo"},
      "lib-x": {"base"}, "base": set(), "turbo": set()}),
    ([_dist("t", "l[y]>=1"), _dist("l", "y; extra == 'y'", extras=("y",)), _dist("y")],
     ["t"],
     {None: {"t"}, "t": {"l", "l[y]"}, "l[y]": {"l", "y"}, "l": set(), "y": set()}),
    ([_dist("a", "cuda; platform_machine == 'aarch64'", "gone"), _dist("cuda"),
      _dist("orphan")], ["a; python_version >= '3'", "nope; python_version < '3'"],
     {None: {"a", "cuda", "orphan"}, "a": set(), "cuda": set(), "orphan": set()}),
], ids=["requires-python", "extras, names canonicalised", "extras with a specifier",
        "markers for the target; unlocked left out; unreached taken as roots"])
def test_resolution_graph(dists: list[Dist], roots: list[str], graph: Graph) -> None:
    """pip's graph from metadata: extras nodes, the Requires-Python node, the target's
    markers (x86_64 here: the aarch64-only dependency is no edge)."""
    assert resolution_graph(dists, roots, ENV) == {k: frozenset(v) for k, v in graph.items()}


def test_requires_python_orders_leaves() -> None:
    """A dependency-free package without Requires-Python is pruned a round earlier than one
    with it, so it installs first even where its name would put it last."""
    assert pip_order([_dist("a"), _dist("b", rp=True)], ["a", "b"], ENV) == ["a", "b"]
    assert pip_order([_dist("a"), _dist("b")], ["a", "b"], ENV) == ["b", "a"]


def test_invalid_requires_python_adds_no_node() -> None:
    """pip reads an invalid Requires-Python as none (no Requires-Python requirement)."""
    assert not _dist("a").has_requires_python
    assert not Dist(name="a", requires_python=">=three").has_requires_python
    assert Dist(name="a", requires_python=">=3.8").has_requires_python
