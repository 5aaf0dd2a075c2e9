"""The documentation holds to the code: the architecture page names the import contracts'
layers in their order, every link between the pages resolves, and the README's links too."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
ARCHITECTURE = ROOT / "docs" / "architecture.md"
LAYERS_HEADING = "## The layers"
# A numbered item whose first code span is a layer, as pyproject.toml writes it:
# "3. `claybot.api | claybot.client`: ..."
LAYER_ITEM = re.compile(r"^\d+\.\s+`([^`]+)`")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^\s*(```|~~~)")


def contracts() -> list[dict[str, Any]]:
    with (ROOT / "pyproject.toml").open("rb") as file:
        config = tomllib.load(file)
    found: list[dict[str, Any]] = config["tool"]["importlinter"]["contracts"]
    return found


def normalized(layer: str) -> str:
    return " ".join(layer.split())


def contract_layers() -> list[str]:
    """The layers of the top-level layers contract (one without ``containers``)."""
    top = [c for c in contracts() if c["type"] == "layers" and "containers" not in c]
    assert len(top) == 1, f"expected one top-level layers contract, found {len(top)}"
    return [normalized(layer) for layer in top[0]["layers"]]


def documented_layers(text: str) -> list[str]:
    """The numbered items of the page's "The layers" section, in order."""
    lines = text.splitlines()
    assert LAYERS_HEADING in lines, f"{ARCHITECTURE} has no {LAYERS_HEADING!r} section"
    start = lines.index(LAYERS_HEADING) + 1
    layers: list[str] = []
    for line in lines[start:]:
        if line.startswith("## "):
            break
        match = LAYER_ITEM.match(line)
        if match:
            layers.append(normalized(match.group(1)))
    return layers


def test_architecture_names_every_layer_in_the_contracts_order() -> None:
    documented = documented_layers(ARCHITECTURE.read_text())
    assert documented == contract_layers(), (
        "docs/architecture.md's 'The layers' must list pyproject.toml's layers, top to "
        "bottom, each written as there: change the page with the contract"
    )


def test_a_reordered_or_added_layer_is_told_apart() -> None:
    # The comparison above is of the parsed lists; this holds the parser to reading
    # every item, so that a layer moved or added in one place only shows as a difference.
    text = ARCHITECTURE.read_text()
    layers = documented_layers(text)
    first, second = (f"`{layer}`" for layer in layers[:2])
    swapped = text.replace(first, "\0").replace(second, first).replace("\0", second)
    assert documented_layers(swapped)[:2] == layers[1::-1]
    added = text.replace(f"1. {first}", f"1. `claybot.newlayer`: new.\n2. {first}", 1)
    assert documented_layers(added) == ["claybot.newlayer", *layers]


def test_architecture_names_every_contract() -> None:
    text = ARCHITECTURE.read_text()
    missing = [c["name"] for c in contracts() if c["name"] not in text]
    assert not missing, f"docs/architecture.md does not describe the contracts {missing}"


def outside_code(text: str) -> str:
    """The text without its fenced code blocks (links and headings there are not ones)."""
    kept: list[str] = []
    fenced = False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            kept.append(line)
    return "\n".join(kept)


def mkdocs_anchors(page: Path) -> set[str]:
    """The ids MkDocs gives the page's headings (its toc extension, as it builds them)."""
    import markdown

    converter = markdown.Markdown(extensions=["fenced_code", "tables", "toc"])
    converter.convert(page.read_text())
    anchors: set[str] = set()
    pending: list[dict[str, Any]] = list(converter.toc_tokens)
    while pending:
        token = pending.pop()
        anchors.add(token["id"])
        pending.extend(token["children"])
    return anchors


def github_anchor(heading: str) -> str:
    """GitHub's id for a heading of the README: lower case, punctuation dropped."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def test_readme_links_resolve() -> None:
    readme = ROOT / "README.md"
    text = outside_code(readme.read_text())
    own_anchors = {
        github_anchor(line.lstrip("#")) for line in text.splitlines() if line.startswith("#")
    }
    broken: list[str] = []
    links = LINK.findall(text)
    assert links, "the README links to nothing: the pattern no longer finds its links"
    for target in links:
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:: not ours to check
            continue
        path_part, _, anchor = target.partition("#")
        if not path_part:
            if anchor not in own_anchors:
                broken.append(f"{target}: no such heading in the README")
            continue
        path = (ROOT / path_part).resolve()
        if not path.exists():
            broken.append(f"{target}: no such file")
        elif anchor and path.suffix == ".md" and anchor not in mkdocs_anchors(path):
            broken.append(f"{target}: {path_part} has no heading with that anchor")
    assert not broken, "README.md's links that resolve to nothing:\n" + "\n".join(broken)


def test_docs_build_strict(tmp_path: Path) -> None:
    """mkdocs.yml's validation makes a link or an anchor that resolves to nothing (and a
    page left out of the nav) a warning, and --strict makes a warning fail the build."""
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # its banner is not ours to show
    # Not --quiet: it hides the warnings from the count --strict fails on.
    command = [sys.executable, "-m", "mkdocs", "build", "--strict"]
    command += ["--config-file", str(ROOT / "mkdocs.yml"), "--site-dir", str(tmp_path / "site")]
    try:
        result = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
            cwd=ROOT,
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"mkdocs build did not finish in {exc.timeout} s")
    assert result.returncode == 0, (
        "mkdocs build --strict failed (is the dev extra installed? pip install -e '.[dev]'):\n"
        + result.stdout
        + result.stderr
    )
    assert (tmp_path / "site" / "architecture" / "index.html").exists()
