"""No module imports itself back through others, across rooms too.

The ``acyclic_siblings`` contract in pyproject.toml sees a cycle only among the modules of one
room (``dsh_acp._config`` -> ``dsh_acp.models._source`` -> ``dsh_acp.models._openai`` ->
``dsh_acp._config`` crosses two and passed it). Lazy imports and ``TYPE_CHECKING`` imports count:
a lazy import back is still a cycle, only one that fails later.
"""

from __future__ import annotations

import grimp

PACKAGES = ("dsh_tools", "reference_tools", "dsh_acp")


def import_cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            module, imported = work[-1]
            for other in imported:
                if other not in index:
                    index[other] = low[other] = len(index)
                    stack.append(other)
                    on_stack.add(other)
                    work.append((other, iter(sorted(graph.find_modules_directly_imported_by(other)))))
                    break
                if other in on_stack:
                    low[module] = min(low[module], index[other])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[module])
                if low[module] == index[module]:
                    group = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.append(member)
                        if member == module:
                            break
                    if len(group) > 1:
                        cycles.append(sorted(group))
    return cycles


def test_the_finder_finds_a_cycle_across_packages() -> None:
    graph = grimp.ImportGraph()
    for module in ("a", "a.x", "b", "b.y", "c"):
        graph.add_module(module)
    graph.add_import(importer="a.x", imported="b.y")
    graph.add_import(importer="b.y", imported="a.x")
    graph.add_import(importer="c", imported="a.x")
    assert import_cycles(graph) == [["a.x", "b.y"]]


def test_no_module_takes_part_in_an_import_cycle() -> None:
    graph = grimp.build_graph(*PACKAGES, cache_dir=None)
    cycles = import_cycles(graph)
    chains = [graph.find_shortest_chain(importer=group[0], imported=group[1]) for group in cycles]
    assert not cycles, "import cycles (put the shared piece in a module both import):\n" + "\n".join(
        f"{' -> '.join(chain or group)} -> ... -> {group[0]}"
        for group, chain in zip(cycles, chains, strict=True)
    )
