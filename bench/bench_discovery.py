"""Discovery of 1,000 skill folders: cold (SkillYard construction scans) against reading and parsing each SKILL.md
with python-frontmatter, a rescan with nothing changed against the cold discovery, and a new process's discovery
from the manifest cache under SKILLYARD_HOME against the cold one; then whole ``skillyard list`` commands over
2,500 folders, with an empty and with a warm cache.

    python bench/bench_discovery.py

Targets: cold / bare parse <= 2; rescan / cold <= 0.1; cached / cold <= 0.5.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

from _common import best_of_each, isolate, verdict

TMP, BASE = isolate("discovery")

import frontmatter  # noqa: E402

from skillyard.catalog.schema import schema_problem  # noqa: E402
from skillyard.yard import SkillYard  # noqa: E402  (after isolate(): the host reads the environment)

N_SKILLS = 1000
N_LIST = 2500  # folders of the tree the whole commands list (d)
LIST_RUNS = 3
ROUNDS = 5  # each round: one cold discovery, one bare parse, RESCANS_PER_ROUND rescans (interleaved)
BUDGET_S = 25.0  # fewer rounds (at least 3) when a cold discovery is slow
RESCANS_PER_ROUND = 2
COLD_TARGET = 2.0
RESCAN_TARGET = 0.1
CACHED_TARGET = 0.5
CATEGORIES = ("web", "dev", "data", "media", "productivity")
BINS = ("curl", "jq", "gh", "ffmpeg", "git", "rg")

HANDLER = textwrap.dedent(
    """\
    \"\"\"Tool {i:04d}: look something up and return a short answer.\"\"\"

    import json


    async def execute(input, ctx):
        query = input["query"]
        limit = int(input.get("limit") or 5)
        return {{"query": query, "limit": limit, "results": [], "note": json.dumps(ctx.get("skill_args") or {{}})}}
    """
)


def body(i: int, kind: str) -> str:
    """About 1.5 KB of markdown, like the body of a real SKILL.md."""
    return textwrap.dedent(
        f"""\
        # {kind.title()} {i:04d}

        Use this skill when the user asks to look up, compare or summarize things in the {CATEGORIES[i % 5]}
        area. It returns a short list of results with their sources; say so when nothing was found.

        ## When to use

        - The user names a topic and wants current facts about it.
        - The user wants a comparison of two or three items.
        - Not for opinions, and not for anything that needs a login the user did not configure.

        ## How

        1. Call the skill with `query` set to the user's words, trimmed of greetings.
        2. Pass `limit` only when the user asked for a number of results.
        3. Quote each result's source next to it.

        ```bash
        {BINS[i % 6]} --version
        ```

        ## Notes

        Results are cached for ten minutes. Errors carry an `error` field that says what to fix; read it to
        the user rather than retrying blindly. See references/usage.md for the full list of options.
        """
    )


def frontmatter_text(i: int, name: str, env: str) -> str:
    """Realistic frontmatter: OpenClaw JSON metadata on one line for half, nested YAML for the other half."""
    desc = (
        f"Look up and summarize {CATEGORIES[i % 5]} topics: returns sources. "
        "Use when the user asks for current facts; not for opinions."
    )
    head = [
        f"name: {name}",
        f"description: {json.dumps(desc)}",
        f"version: 1.{i % 7}.{i % 10}",
        "license: MIT",
        f"homepage: https://example.com/skills/{name}",
    ]
    if i % 4 < 2:
        meta = {
            "openclaw": {
                "emoji": "🔧",
                "primaryEnv": env,
                "requires": {"env": [env], "bins": [BINS[i % 6], BINS[(i + 1) % 6]]},
                "install": [
                    {
                        "id": "brew",
                        "kind": "brew",
                        "formula": BINS[i % 6],
                        "bins": [BINS[i % 6]],
                        "label": f"Install {BINS[i % 6]} (brew)",
                    }
                ],
            }
        }
        head.append(f"metadata: {json.dumps(meta, ensure_ascii=False)}")
    else:
        head += [
            "metadata:",
            "  openclaw:",
            '    emoji: "📘"',
            f"    primaryEnv: {env}",
            "    requires:",
            f"      env: [{env}]",
            f"      bins: [{BINS[i % 6]}]",
            "    os: [linux, darwin]",
            f"  tags: [{CATEGORIES[i % 5]}, lookup]",
            f"category: {CATEGORIES[i % 5]}",
        ]
    return "---\n" + "\n".join(head) + "\n---\n\n"


def generate(root: Path, count: int = N_SKILLS) -> list[Path]:
    """``count`` folders: even ones with handler.py + schema.json, odd ones SKILL.md only."""
    paths = []
    for i in range(count):
        handler = i % 2 == 0
        name = f"{'tool' if handler else 'guide'}-{i:04d}"
        folder = root / name
        folder.mkdir(parents=True)
        md = folder / "SKILL.md"
        md.write_text(
            frontmatter_text(i, name, f"{name.upper().replace('-', '_')}_API_KEY")
            + body(i, "tool" if handler else "guide"),
            encoding="utf-8",
        )
        if handler:
            (folder / "handler.py").write_text(HANDLER.format(i=i), encoding="utf-8")
            schema = {
                "type": "object",
                "required": ["query"],
                "properties": {  # distinct per skill, as in life
                    "query": {"type": "string", "description": f"what to look up in {CATEGORIES[i % 5]} ({name})"},
                    "limit": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": 10 + i % 40,
                        "description": "how many results",
                    },
                },
            }
            (folder / "schema.json").write_text(json.dumps(schema, indent=2), encoding="utf-8")
        paths.append(md)
    return paths


def bare_parse(paths: list[Path]) -> None:
    for path in paths:
        frontmatter.loads(path.read_text(encoding="utf-8"))


def main() -> None:
    root = BASE / "skills"
    paths = generate(root)

    yard = SkillYard(skills_dirs=[root], include_builtin=False)  # warm-up: plugins, lazy imports, page cache
    skills = [e.skill for e in yard.entries]
    broken = [f"{s.name}: {s.error}" for s in skills if s.error]
    handlers = sum(1 for s in skills if s.skill_type == "handler" and s.exec.type == "PYTHON")
    if len(skills) != N_SKILLS or broken or handlers != N_SKILLS // 2:
        sys.exit(f"unexpected catalog: {len(skills)} skills, {handlers} Python handlers, broken: {broken[:3]}")
    gated = sum(1 for s in skills if s.requires.env and s.requires.bins)
    bare_parse(paths)

    # Each cold discovery gets a fresh SKILLYARD_HOME, so no cache kept there could make it warm, and an empty
    # in-process cache of checked schemas (a new process starts with one).
    homes = iter(BASE / f"home-{n}" for n in itertools.count())

    def cold_discovery() -> None:
        os.environ["SKILLYARD_HOME"] = str(next(homes))
        schema_problem.cache_clear()
        SkillYard(skills_dirs=[root], include_builtin=False)

    # A new process over an unchanged tree: empty in-memory caches, the manifest cache of an earlier run on disk.
    warm_home = BASE / "home-warm"
    os.environ["SKILLYARD_HOME"] = str(warm_home)
    SkillYard(skills_dirs=[root], include_builtin=False)
    cached_parsed: list[int] = []

    def cached_discovery() -> None:
        os.environ["SKILLYARD_HOME"] = str(warm_home)
        schema_problem.cache_clear()
        cached_parsed.append(SkillYard(skills_dirs=[root], include_builtin=False).catalog.last_parsed)

    rescanned: list[int] = []
    contenders = {
        "cold": cold_discovery,
        "bare": lambda: bare_parse(paths),
        "rescan": lambda: rescanned.append(yard.rescan()),
        "cached": cached_discovery,
    }
    best = best_of_each(contenders, ROUNDS, BUDGET_S, repeat={"rescan": RESCANS_PER_ROUND})
    cold, bare, rescan, cached = best["cold"], best["bare"], best["rescan"], best["cached"]
    if any(rescanned):
        sys.exit(f"rescan with nothing changed re-read folders: {rescanned}")
    if any(cached_parsed):
        sys.exit(f"discovery from the manifest cache of an unchanged tree re-read folders: {cached_parsed}")
    commands = whole_commands()

    print(f"python {sys.version.split()[0]}; best of up to {ROUNDS} interleaved rounds")
    print(
        f"{N_SKILLS} skill folders: {handlers} with handler.py + schema.json, {N_SKILLS - handlers} SKILL.md only; "
        f"{gated} declare metadata.openclaw.requires env + bins"
    )
    print(
        f"(a) cold discovery  SkillYard(skills_dirs=[root]):      {cold * 1e3:8.1f} ms  "
        f"({cold / N_SKILLS * 1e6:,.0f} µs/skill)"
    )
    print(
        f"    baseline: read + frontmatter.loads each SKILL.md:  {bare * 1e3:8.1f} ms  "
        f"({bare / N_SKILLS * 1e6:,.0f} µs/skill)"
    )
    cold_ratio = cold / bare
    print(f"    cold/bare = {cold_ratio:.2f}x; target <= {COLD_TARGET:g}x: {verdict(cold_ratio <= COLD_TARGET)}")
    rescan_ratio = rescan / cold
    print(
        f"(b) yard.rescan(), nothing changed:                    {rescan * 1e3:8.1f} ms  "
        f"({rescan / N_SKILLS * 1e6:,.0f} µs/skill, 0 folders re-read)"
    )
    print(
        f"    rescan/cold = {rescan_ratio:.3f}x; target <= {RESCAN_TARGET:g}x: {verdict(rescan_ratio <= RESCAN_TARGET)}"
    )
    cached_ratio = cached / cold
    print(
        f"(c) a new SkillYard, manifest cache warm:              {cached * 1e3:8.1f} ms  "
        f"({cached / N_SKILLS * 1e6:,.0f} µs/skill, 0 folders re-read)"
    )
    print(
        f"    cached/cold = {cached_ratio:.3f}x; target <= {CACHED_TARGET:g}x: {verdict(cached_ratio <= CACHED_TARGET)}"
    )
    print(f"(d) whole commands over {N_LIST:,} folders, best of {LIST_RUNS} (no target; start-up included):")
    for label, seconds in commands.items():
        print(f"    {label:<44} {seconds:6.2f} s")


def whole_commands() -> dict[str, float]:
    """``skillyard list`` as a user runs it, over a bigger tree: with an empty cache, then with a warm one."""
    tree = BASE / "list-tree"
    generate(tree, N_LIST)
    listing = [sys.executable, "-m", "skillyard", "list", "--json", "--no-builtin", "--skills-dir", str(tree)]
    homes = iter(BASE / f"list-home-{n}" for n in itertools.count())
    warm = BASE / "list-home-warm"

    def timed(argv: list[str], home: Path | None) -> float:
        env = dict(os.environ, **({"SKILLYARD_HOME": str(home)} if home else {}))
        start = time.perf_counter()
        done = subprocess.run(argv, env=env, capture_output=True, check=False)
        elapsed = time.perf_counter() - start
        if done.returncode != 0 or (argv is listing and len(json.loads(done.stdout)) != N_LIST):
            sys.exit(f"{' '.join(argv[2:])} failed: {done.stderr.decode()[-500:]}")
        return elapsed

    timed(listing, warm)  # fills the warm cache
    runs: dict[str, tuple[list[str], Callable[[], Path | None]]] = {
        "start-up: python -c 'import skillyard.cli'": ([sys.executable, "-c", "import skillyard.cli"], lambda: None),
        "skillyard list --json, empty cache": (listing, lambda: next(homes)),
        "skillyard list --json, warm cache": (listing, lambda: warm),
    }
    best = dict.fromkeys(runs, float("inf"))
    for _ in range(LIST_RUNS):
        for label, (argv, home) in runs.items():
            best[label] = min(best[label], timed(argv, home()))
    return best


if __name__ == "__main__":
    main()
