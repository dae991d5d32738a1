"""Cheap checks of the documentation site's sources (docs/ and examples/); the build
itself (``make -C docs html``) runs in CI, not here.

Every example script has the docstring title sphinx-gallery needs, every page is in a
toctree, every public module has an API page, and the code's citations of the math
point at docs/algorithms.md.
"""

import ast
import re
from pathlib import Path

import pytest

pytest.importorskip("sphinx", reason="the docs tools are not installed (pip install -e '.[docs]')")

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
EXAMPLES = ROOT / "examples"
PUBLIC_MODULES = [
    "gpusvm",
    "gpusvm.svm",
    "gpusvm.sbp",
    "gpusvm.linear_model",
    "gpusvm.water_level",
    "gpusvm.kernel_functions",
    "gpusvm.model_io",
    "gpusvm.data_files",
    "gpusvm.datasets",
    "gpusvm.dask",
]
EXAMPLE_SCRIPTS = sorted(EXAMPLES.glob("*.py"))


def toctree_entries(page):
    """The entries of every toctree on a MyST (```{toctree}) or reST (.. toctree::) page."""
    text = page.read_text()
    if page.suffix == ".md":
        blocks = re.findall(r"```\{toctree\}\n(.*?)```", text, flags=re.S)
    else:
        blocks = re.findall(r"\.\. toctree::\n((?:[ \t]+.*\n|\n)*)", text)
    entries = set()
    for block in blocks:
        for line in block.splitlines():
            line = line.strip()
            if line and not line.startswith(":"):
                entries.add(line)
    return entries


def test_there_are_examples():
    assert len(EXAMPLE_SCRIPTS) >= 5
    assert (EXAMPLES / "GALLERY_HEADER.rst").is_file()


@pytest.mark.parametrize("script", EXAMPLE_SCRIPTS, ids=lambda path: path.name)
def test_example_has_a_gallery_title(script):
    """A module docstring that opens with a title underlined by '=', as sphinx-gallery
    needs, and a name the gallery runs (``plot_*.py``)."""
    assert script.name.startswith("plot_"), "sphinx_gallery_conf runs only examples/plot_*.py"
    docstring = ast.get_docstring(ast.parse(script.read_text()), clean=False)
    assert docstring, f"{script.name} has no module docstring"
    lines = docstring.strip("\n").splitlines()
    assert len(lines) >= 3 and lines[0].strip(), f"{script.name}: the docstring must open with a title"
    assert re.fullmatch(r"=+", lines[1].strip()) and len(lines[1].strip()) >= len(lines[0].strip()), (
        f"{script.name}: the title must be underlined with '=' at least as long as it"
    )
    gen_rst = pytest.importorskip("sphinx_gallery.gen_rst")
    _, title = gen_rst.extract_intro_and_title(str(script), docstring)
    assert title == lines[0].strip()


def test_every_user_guide_page_is_in_the_toctree():
    listed = toctree_entries(DOCS / "user_guide" / "index.md")
    pages = {page.stem for page in (DOCS / "user_guide").glob("*.md")} - {"index"}
    assert pages, "no user-guide pages"
    assert pages <= listed, f"user-guide pages not in user_guide/index.md's toctree: {sorted(pages - listed)}"
    assert listed <= pages, f"toctree entries without a page: {sorted(listed - pages)}"


def test_every_top_level_page_is_in_the_toctree():
    listed = toctree_entries(DOCS / "index.md")
    pages = {page.stem for page in DOCS.glob("*.md")} - {"index"}
    assert pages <= listed, f"pages not in index.md's toctree: {sorted(pages - listed)}"
    assert {"user_guide/index", "auto_examples/index", "api/index"} <= listed


def test_every_public_module_has_an_api_page():
    listed = toctree_entries(DOCS / "api" / "index.rst")
    pages = {page.stem for page in (DOCS / "api").glob("*.rst")} - {"index"}
    assert set(PUBLIC_MODULES) <= listed
    assert pages == listed
    for module in PUBLIC_MODULES:
        assert f".. automodule:: {module}\n" in (DOCS / "api" / f"{module}.rst").read_text()


def test_the_api_pages_name_templates_that_exist():
    """autosummary looks a ``:template:`` up from the templates folder, and on a name it
    does not find there silently falls back to its base template, which writes a class's
    page without its methods (the site had none until 2026-11-26)."""
    templates = DOCS / "_templates"
    named = {
        (page.name, name)
        for page in (DOCS / "api").glob("*.rst")
        for name in re.findall(r":template:\s*(\S+)", page.read_text())
    }
    assert {name for _, name in named} == {"autosummary/class.rst", "autosummary/function.rst"}
    assert [f"{page}: {name}" for page, name in named if not (templates / name).is_file()] == []
    assert ":members:" in (templates / "autosummary" / "class.rst").read_text()


def test_the_math_is_cited_inside_the_repository():
    """Code, kernels and tests cite docs/algorithms.md by its path from the root."""
    assert (DOCS / "algorithms.md").is_file()
    outside = []
    for folder, pattern in [("gpusvm", "*.py"), ("kernels", "*.cu*"), ("tests", "*.py")]:
        for path in (ROOT / folder).rglob(pattern):
            for number, line in enumerate(path.read_text().splitlines(), 1):
                if re.search(r"(?<!docs/)\balgorithms\.md", line) and path != Path(__file__).resolve():
                    outside.append(f"{path.relative_to(ROOT)}:{number}")
    assert not outside, f"cite docs/algorithms.md: {outside}"
