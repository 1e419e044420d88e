"""The layers of the package, read from its import graph (grimp): no runtime import cycle, and the lower layers
never import the upper ones at run time (imports under ``TYPE_CHECKING`` are only annotations)."""

from __future__ import annotations

import grimp
import pytest


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("skillyard", exclude_type_checking_imports=True)


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan's algorithm, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph.modules):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.find_modules_directly_imported_by(start))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    found.append(sorted(group))
    return found


def test_no_runtime_import_cycle(graph):
    assert _cycles(graph) == []


@pytest.mark.parametrize(
    ("lower", "upper"),
    [
        ("skillyard.outputs", "skillyard.invoke"),
        ("skillyard.storage", "skillyard.invoke"),
        ("skillyard.catalog", "skillyard.invoke"),
        ("skillyard.invoke", "skillyard.agent"),
        ("skillyard.outputs", "skillyard.agent"),
        ("skillyard.executors", "skillyard.agent"),
    ],
)
def test_a_lower_layer_never_imports_an_upper_one(graph, lower, upper):
    chains = graph.find_shortest_chains(importer=lower, imported=upper)
    assert not chains, f"{lower} imports {upper} at run time: {sorted(chains)}"


@pytest.mark.parametrize("upper", ["skillyard.yard", "skillyard.invoke.pipeline", "skillyard.cli"])
def test_the_agent_runtime_runs_skills_through_the_public_api(graph, upper):
    """Every agent module but its command line (an edge that opens a host) sees the host only as the yard object
    it is given: no runtime import of yard.py, the pipeline or the CLI."""
    runtime = sorted(m for m in graph.find_children("skillyard.agent") | graph.find_descendants("skillyard.agent"))
    for module in [m for m in runtime if m != "skillyard.agent.cli"]:
        assert not graph.chain_exists(importer=module, imported=upper), (
            f"{module} imports {upper}: {graph.find_shortest_chain(importer=module, imported=upper)}"
        )


def test_the_host_reaches_the_agent_only_through_its_entry_point(graph):
    """yard.py imports no agent module but agent.entry, and that only inside SkillYard.agent (lazily)."""
    agent_imports = {
        m for m in graph.find_modules_directly_imported_by("skillyard.yard") if m.startswith("skillyard.agent")
    }
    assert agent_imports == {"skillyard.agent.entry"}
    for detail in graph.get_import_details(importer="skillyard.yard", imported="skillyard.agent.entry"):
        assert detail["line_contents"].startswith("from .agent.entry import") and detail["line_number"] > 1
    import inspect

    from skillyard import yard

    top_level = [line for line in inspect.getsource(yard).splitlines() if line.startswith(("from .agent", "import"))]
    assert not [line for line in top_level if "agent" in line]
