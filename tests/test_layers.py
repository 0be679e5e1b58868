"""The package's imports point one way (docs/ARCHITECTURE.md, Packages): ``simulator`` <- ``traces``
<- ``policies`` <- ``clustersim``, and no module imports itself back through others. Every import
statement of every module is read, those inside functions too (a lazy import is still a dependency)."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# the checkout's folder -> its package (pyproject's package-dir), lowest layer first
LAYERS = {"simulator": "clustersim.simulator", "traces": "clustersim.traces", "policies": "clustersim.policies",
          "clustersim": "clustersim"}
RANK = {pkg: i for i, pkg in enumerate(LAYERS.values())}
# old names kept as aliases of a moved module (sys.modules points them at it): not a dependency
ALIASES = {"clustersim.policies.conformance": "clustersim.conformance"}


def modules() -> dict[str, Path]:
    """Module name -> file, for every module of the four layers."""
    out = {}
    for folder, pkg in LAYERS.items():
        for f in sorted((ROOT / folder).rglob("*.py")):
            parts = list(f.relative_to(ROOT / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join([pkg, *parts])] = f
    return out


def imports(name: str, path: Path, known: dict) -> set[str]:
    """The package's modules ``name`` imports anywhere in its code."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:   # relative: from the module's package up
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            # ``from pkg import mod`` imports the submodule; ``from mod import name`` the module
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        else:
            continue
        for t in targets:
            while t and t not in known:   # clustersim.simulator.job.JobSpec -> clustersim.simulator.job
                t = t.rpartition(".")[0]
            if t and t != name:
                out.add(t)
    return out


def layer(module: str) -> str:
    return max((p for p in LAYERS.values() if module == p or module.startswith(p + ".")), key=len)


GRAPH = {m: imports(m, f, modules()) for m, f in modules().items()}


def test_every_layer_imports_only_itself_and_the_layers_below():
    upward = sorted(f"{m} -> {t}" for m, ts in GRAPH.items() for t in ts
                    if RANK[layer(t)] > RANK[layer(m)] and t != layer(m) and ALIASES.get(m) != t)
    assert not upward, "imports against the layering:\n" + "\n".join(upward)


def test_no_module_imports_itself_back_through_others():
    # Tarjan's strongly connected components: a component of more than one module is a cycle
    index, low, stack, on, cycles = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(GRAPH[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in sorted(GRAPH):
        if v not in index:
            visit(v)
    assert not cycles, "import cycles: " + "; ".join(" <-> ".join(c) for c in cycles)


def test_the_walk_sees_the_imports_it_checks():
    # the graph is read right: known edges are in it (else the tests above would pass vacuously)
    assert "clustersim.simulator.progress" in GRAPH["clustersim.simulator.engine"]
    assert "clustersim.simulator.paths" in GRAPH["clustersim.simulator.goodput"]   # a lazy import
    assert "clustersim.rundirs" in GRAPH["clustersim.collect"]
    assert "clustersim.simulator.job" in GRAPH["clustersim.traces.schema"] or \
        "clustersim.simulator.arrow" in GRAPH["clustersim.traces.schema"]
