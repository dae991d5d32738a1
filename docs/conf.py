"""Sphinx configuration of gpusvm's documentation site (``make -C docs html``).

Built the way scikit-learn and CuPy build theirs: pydata-sphinx-theme, numpydoc API
pages from the docstrings through autosummary, sphinx-gallery for ``examples/`` (run
at build time, on the CPU), MyST for the Markdown pages.
"""

import importlib
import os
import re
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(ROOT))  # this checkout's gpusvm, installed or not

import gpusvm  # noqa: E402

# The gallery runs on the CPU wherever the site is built, so that its figures do not
# depend on the build machine (examples/plot_cpu_and_gpu.py shows the GPU code).
os.environ["GPUSVM_BACKEND"] = "numpy"
os.environ.setdefault("MPLBACKEND", "Agg")

project = "gpusvm"
author = "the gpusvm developers"
copyright = "the gpusvm developers"  # noqa: A001 (Sphinx's name)
release = gpusvm.__version__
version = release

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "numpydoc",
    "myst_parser",
    "sphinx_gallery.gen_gallery",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
templates_path = ["_templates"]
exclude_patterns = [
    "_build",
    "auto_examples/*.ipynb",
    "auto_examples/*.py",
    "auto_examples/*.zip",
    "**/sg_execution_times.rst",
    "sg_execution_times.rst",
]

# --- API pages: autosummary writes one page per public object, numpydoc renders them.
autosummary_generate = True
autosummary_imported_members = False
autodoc_typehints = "none"  # the numpydoc Parameters sections say the types
numpydoc_show_class_members = False  # the class template lists the members instead
numpydoc_class_members_toctree = False
numpydoc_validation_checks = set()  # render the docstrings as they are; no style gate here

# --- Cross-references: every one must resolve (with -W, a broken one fails the build).
# This site has no inventories of other projects' sites (the build reaches no network), so
# their names are left as code; a name the site documents under the module that defines
# it, and gpusvm re-exports (gpusvm.SBPClassifier), resolves there (_reexported below).
nitpicky = True
nitpick_ignore_regex = [
    (r"py:.*", r"(numpy|scipy|sklearn|pathlib|distributed|dask|tracemalloc)(\..*)?"),
    (r"py:obj", r"client"),  # the dask estimators' attribute (numpydoc links attribute names)
]
numpydoc_xref_param_type = False

# --- Markdown (MyST): user guide, algorithms.md, the benchmark report.
myst_enable_extensions = ["colon_fence", "deflist", "dollarmath"]
myst_heading_anchors = 3
# The benchmark report is generated (bench/make_report.py) for GitHub, where headings
# may skip levels; rendered here as it is.
suppress_warnings = ["myst.header"]

# --- Gallery: examples/ run at build time, each draws a figure.
sphinx_gallery_conf = {
    "examples_dirs": [str(ROOT / "examples")],
    "gallery_dirs": ["auto_examples"],
    "filename_pattern": r"/plot_",
    "within_subsection_order": "FileNameSortKey",
    "download_all_examples": False,
    "remove_config_comments": True,
    "abort_on_example_error": False,
    "only_warn_on_example_error": False,
    "matplotlib_animations": False,
    "show_memory": False,
}

# --- HTML: pydata-sphinx-theme, as scikit-learn's and CuPy's sites.
html_theme = "pydata_sphinx_theme"
html_title = f"gpusvm {release}"
html_static_path = []
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "header_links_before_dropdown": 6,
    "navbar_align": "left",
    "secondary_sidebar_items": ["page-toc", "sourcelink"],
}
html_sidebars = {"index": [], "benchmarks": []}
html_show_sourcelink = True


# --- scikit-learn's docstrings, inherited by every estimator (score, get_params, the
# metadata-routing set_*_request methods), cross-reference scikit-learn's own site
# (:ref:`metadata_routing`, :term:`meta-estimator`), which this site does not have:
# render those references as plain text, and only in scikit-learn's docstrings.
_SITE_REFERENCE = re.compile(r":(?:ref|term):`([^`<]*?)\s*(?:<([^`>]*)>)?`")


def _plain_sklearn_references(app, what, name, obj, options, lines):
    if not (getattr(obj, "__module__", None) or "").startswith("sklearn."):
        return
    lines[:] = [_SITE_REFERENCE.sub(lambda m: m.group(1) or m.group(2), line) for line in lines]


def _reexported(app, env, node, contnode):
    """A Python reference to a name gpusvm re-exports (``gpusvm.save``), resolved at the
    object's own module (``gpusvm.model_io.save``), where its page is."""
    target = node.get("reftarget", "")
    if node.get("refdomain") != "py" or not target.startswith("gpusvm."):
        return None
    module_name, _, name = target.rpartition(".")
    try:
        found = getattr(importlib.import_module(module_name), name)
    except (ImportError, AttributeError):
        return None
    home = f"{getattr(found, '__module__', '')}.{getattr(found, '__qualname__', name)}"
    if home == target:
        return None
    return env.domains["py"].resolve_xref(env, node["refdoc"], app.builder, node["reftype"], home, node, contnode)


def setup(app):
    app.connect("autodoc-process-docstring", _plain_sklearn_references)
    app.connect("missing-reference", _reexported)
