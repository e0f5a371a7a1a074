"""pip's installation order, computed over a lock's PyPI part as pip computes it.

pip installs the packages of a resolution one after another and each wheel overwrites what an
earlier one wrote, so where two wheels write one path with different bytes, the file of the
one pip installs last stays. This module is pip 26.3's order, transcribed from
``src/pip/_internal/resolution/resolvelib/resolver.py``: ``Resolver.get_installation_order``,
``get_topological_weights`` and ``_req_set_item_sorter``; the graph is the one resolvelib's
``_build_result`` gives pip (``resolution_graph`` below). Pure: no I/O, no pip import.

**The graph** (``resolution_graph``). Nodes are pip's identifiers: ``None`` (the root), a
project's canonical name (PEP 503, ``canonicalize_name``), ``name[e1,e2]`` for a project
asked for with extras (its extras canonicalised and sorted, pip's ``format_name``), and
``<Python from Requires-Python>`` (``REQUIRES_PYTHON``). Edges, parent to child:

    None -> r               each root requirement whose markers hold (``r`` as below)
    name -> <Python ...>    a distribution whose ``Requires-Python`` is a non-empty, valid
                            specifier set (pip yields that requirement before the others)
    name -> r               each ``Requires-Dist`` whose marker holds with ``extra == ""``
    name[E] -> name         an extras node depends on its own base (pip's note 2b)
    name[E] -> r            each ``Requires-Dist`` without a marker, or whose marker holds
                            for one of the extras of ``E`` the distribution provides (none
                            provided: as ``extra == ""``)

where a requirement ``r`` on ``dep`` with extras ``X`` is the child ``dep[X]``, plus ``dep``
itself when it also has a version specifier or a URL (pip splits such a requirement in two:
``SpecifierWithoutExtrasRequirement`` and ``SpecifierRequirement``); without extras it is
``dep``. Markers are evaluated in the target's environment (``Target.environment()``, the lock's
platform and Python), not this machine's. A requirement on a project that is not among the
locked PyPI packages is left out: one a marker of this evaluation admits that the resolver did
not, and one the conda part provides. The latter is where this graph can differ from pip's:
pip, run in a prefix where conda installed that project, has it in its graph as an installed
distribution with its own edges (not installed again, so never in the order), which can move
its dependants to a later pruning round. A locked package the edges do not reach from the root
(a marker the resolver read otherwise) is taken as a root requirement, so every locked package
has a place in the order.

**The weights** (``topological_weights``), exactly as pip computes them: first the leaves
(nodes but the root with no child) are pruned, round after round, each round's leaves getting
the weight ``len(graph) - 1`` of the graph they were pruned from (so a package with no
dependency, installed first, weighs most); then what is left (cycles and the nodes above them)
is walked depth first from the root, a node's weight being the length of the path it was
reached by (its depth), a node already on the path ending the walk there (the cycle is broken
at that point), and a requirement visited five times not walked again (pip's cap on an
exponential walk); each requirement takes the largest weight it was given. Only the locked
packages (pip's ``RequirementSet`` keys: canonical project names) get weights; extras nodes
and the Requires-Python node shape the graph but are never installed.

**The order** (``installation_order``): the locked packages sorted by ``(weight, canonical
name)``, descending: heaviest first, and among equal weights the name that sorts last first.
The last package of the order is installed last: its files stay.

One thing pip leaves open: it walks each node's children out of a ``set``, whose order for
strings changes from process to process (``PYTHONHASHSEED``); it decides a weight only where a
requirement reaches its five-visit cap before its deepest path is seen, and then pip itself
gives different orders in different runs. Here children are walked in sorted order, so the
same graph always gives the same weights.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from email.parser import HeaderParser

from packaging.markers import InvalidMarker, UndefinedComparison, UndefinedEnvironmentName
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name

PIP_VERSION = "26.3"  # the pip whose resolver.py this module transcribes
REQUIRES_PYTHON = "<Python from Requires-Python>"  # pip's REQUIRES_PYTHON_IDENTIFIER
VISIT_CAP = 5  # pip: a requirement visited this many times is not walked again

Node = str | None
Graph = Mapping[Node, Collection[str]]  # node -> its children (pip's DirectedGraph)


@dataclass(frozen=True, slots=True, kw_only=True)
class Dist:
    """What pip reads from one distribution's core metadata to build the graph."""

    name: str                              # canonical (PEP 503)
    requires_python: str = ""              # the Requires-Python header, as written
    requires_dist: tuple[str, ...] = ()    # every Requires-Dist, as written
    provides_extra: tuple[str, ...] = ()   # every Provides-Extra, as written

    @classmethod
    def from_metadata(cls, name: str, metadata: bytes | str) -> Dist:
        """The fields pip reads from a ``METADATA`` file (RFC 822 headers)."""
        text = metadata.decode("utf-8", "replace") if isinstance(metadata, bytes) else metadata
        msg = HeaderParser().parsestr(text)
        return cls(name=canonicalize_name(name),
                   requires_python=str(msg.get("Requires-Python") or "").strip(),
                   requires_dist=tuple(str(r).strip() for r in msg.get_all("Requires-Dist")
                                       or ()),
                   provides_extra=tuple(str(e).strip() for e in msg.get_all("Provides-Extra")
                                        or ()))

    @property
    def has_requires_python(self) -> bool:
        """pip adds the Requires-Python requirement only for a valid, non-empty specifier."""
        try:
            return bool(str(SpecifierSet(self.requires_python)))
        except InvalidSpecifier:
            return False


def format_name(project: str, extras: Iterable[str]) -> str:
    """pip's ``format_name``: ``project[e1,e2]`` with the extras sorted, or the project."""
    extras = sorted(set(extras))
    return f"{project}[{','.join(extras)}]" if extras else project


def _holds(req: Requirement, environment: Mapping[str, str], extras: Sequence[str]) -> bool:
    """pip's ``match_markers``: no marker, or it holds for one of ``extras`` ("" for none)."""
    if req.marker is None:
        return True
    for extra in extras or ("",):
        try:
            if req.marker.evaluate({**environment, "extra": extra}):
                return True
        except (UndefinedComparison, UndefinedEnvironmentName, InvalidMarker):
            continue
    return False


def _children(req: Requirement, locked: Collection[str]) -> list[str]:
    """The nodes one requirement adds as children (pip's ``_make_requirements_from_install_req``:
    with extras and a specifier or URL, both the project and the extras node)."""
    name = canonicalize_name(req.name)
    if name not in locked:
        return []
    extras = {canonicalize_name(e) for e in req.extras}
    if not extras:
        return [name]
    with_extras = format_name(name, extras)
    return [name, with_extras] if (req.specifier or req.url) else [with_extras]


def _parse(text: str) -> Requirement | None:
    try:
        return Requirement(text.strip())
    except InvalidRequirement:
        return None


def resolution_graph(dists: Iterable[Dist], roots: Iterable[str],
                     environment: Mapping[str, str]) -> dict[Node, frozenset[str]]:
    """The graph resolvelib gives pip for a resolution of ``roots`` (requirement strings) whose
    distributions are ``dists``, with markers read in ``environment`` (module docstring)."""
    by_name = {d.name: d for d in dists}
    graph: dict[Node, set[str]] = {None: set()}
    for text in roots:
        req = _parse(text)
        if req is not None and _holds(req, environment, ()):
            graph[None].update(_children(req, by_name))
    todo = sorted(graph[None])
    while todo:
        node = todo.pop()
        if node in graph:
            continue
        kids: set[str] = set()
        project, _, bracket = node.partition("[")
        dist = by_name[project]
        asked = tuple(sorted({e for e in bracket.rstrip("]").split(",") if e})) \
            if bracket else ()
        if not bracket:
            if dist.has_requires_python:
                kids.add(REQUIRES_PYTHON)
            context: tuple[str, ...] = ()
        else:
            kids.add(project)
            provided = {canonicalize_name(e) for e in dist.provides_extra}
            context = tuple(e for e in asked if e in provided)
        for text in dist.requires_dist:
            req = _parse(text)
            if req is not None and _holds(req, environment, context):
                kids.update(_children(req, by_name))
        graph[node] = kids
        todo.extend(sorted(k for k in kids if k not in graph and k != REQUIRES_PYTHON))
    if any(REQUIRES_PYTHON in kids for kids in graph.values()):
        graph[REQUIRES_PYTHON] = set()
    unreached = sorted(set(by_name) - {n for n in graph if n is not None})
    if unreached:
        return resolution_graph(by_name.values(), [*roots_of(graph), *unreached],
                                environment)
    return {node: frozenset(kids) for node, kids in graph.items()}


def roots_of(graph: Graph) -> list[str]:
    """The root's children as requirement strings (``name[extras]`` reads back as itself)."""
    return sorted(graph.get(None, ()))


def topological_weights(graph: Graph, requirement_keys: Collection[str]) -> dict[str, int]:
    """pip's ``get_topological_weights``: the weight of every node in ``requirement_keys``
    (module docstring). ``graph`` is not changed."""
    forward: dict[Node, set[str]] = {node: set(kids) for node, kids in graph.items()}
    keys = set(requirement_keys)
    weights: dict[Node, list[int]] = {}
    path: set[Node] = set()

    def visit(node: Node) -> None:
        if node in path:
            return  # a cycle: broken here
        seen = weights.get(node, [])
        if len(seen) >= VISIT_CAP:
            return
        path.add(node)
        for child in sorted(forward[node]):  # pip walks a set: see the module docstring
            visit(child)
        path.remove(node)
        if node not in keys:
            return
        seen.append(len(path))
        weights[node] = seen

    while True:  # prune the leaves, round after round
        leaves = {node for node in forward if node is not None and not forward[node]}
        if not leaves:
            break
        weight = len(forward) - 1
        for leaf in leaves:
            if leaf in keys:
                weights[leaf] = [weight]
        for leaf in leaves:
            del forward[leaf]
        for kids in forward.values():
            kids -= leaves
    if None in forward:
        visit(None)
    missing = keys - {n for n in weights if n is not None}
    if missing:  # pip fails an assertion here; a graph from resolution_graph never does
        raise ValueError(f"not in the graph: {', '.join(sorted(missing))}")
    return {str(node): max(w) for node, w in weights.items()}


def installation_order(graph: Graph, requirement_keys: Collection[str]) -> list[str]:
    """pip's ``get_installation_order``: the requirement keys, first installed first (the
    last one's files stay where two write one path)."""
    weights = topological_weights(graph, requirement_keys)
    names = {canonicalize_name(k) for k in requirement_keys}
    return sorted(names, key=lambda n: (weights[n], n), reverse=True)


def pip_order(dists: Sequence[Dist], roots: Iterable[str],
              environment: Mapping[str, str]) -> list[str]:
    """The order pip installs ``dists`` in, for a resolution of ``roots``."""
    graph = resolution_graph(dists, roots, environment)
    return installation_order(graph, [d.name for d in dists])
