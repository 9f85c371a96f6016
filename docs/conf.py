"""Sphinx configuration of the course's website (`make site`, see the Makefile).

Sources: README.md and the stored notebooks, laid out in a staging folder by the `course_site` extension beside
this file (Sphinx reads only what lies under its source folder, and the notebooks must stay where they are).
"""
import logging
import sys
from pathlib import Path

import jieba

sys.path.insert(0, str(Path(__file__).resolve().parent))

project = "dispatcher-notebooks"
author = "the dispatcher-notebooks authors"
copyright = "the dispatcher-notebooks authors, BSD-3-Clause"
language = "en"  # `make site` builds the Chinese edition with -D language=zh_CN

# The Chinese edition: one gettext catalogue per page (`make catalogues` extracts them), translated in
# docs/locale/zh_CN/LC_MESSAGES/ with docs/locale/zh_CN/glossary.md as the terminology. Sphinx compiles each .po
# into a .mo beside it, so it reads a copy under build/ (course_site lays it out). No source locations in the
# catalogues: a cell moved in a notebook changes no translation file.
locale_dirs = [str(Path(__file__).resolve().parent.parent / "build" / "locale")]
gettext_compact = False
gettext_location = False
gettext_uuid = False
# The Chinese search splits words with jieba, which logs to stderr and caches its dictionary: in build/, quietly.
jieba.setLogLevel(logging.WARNING)
jieba.dt.tmp_dir = str(Path(__file__).resolve().parent.parent / "build")

extensions = ["myst_nb", "course_site"]

# nbval already proves every stored output (`make test`): the site shows them and runs nothing.
nb_execution_mode = "off"
# A build log or warning a kernel printed belongs to the notebook as stored; show it as Jupyter does.
nb_output_stderr = "show"
nb_merge_streams = True
myst_heading_anchors = 3
# Straight quotes as written: prose here quotes code (torch.autocast("cpu") in an exercise's instructions), and a
# curly quote pasted into Python is a syntax error. (Sphinx never curls Chinese quotes.)
smartquotes = False
# The gettext builder extracts what a learner reads, not cell outputs: without these, a listing's LaTeX or HTML
# form would become a sentence to translate.
nb_mime_priority_overrides = [("gettext", "text/latex", None), ("gettext", "text/html", None)]

# PyTorch's docs use pytorch-sphinx-theme2, built on pydata-sphinx-theme. Its 0.4.13 builds offline, but every page
# it writes loads jQuery, list.js and Google Fonts from CDNs, Google Tag Manager and a Facebook pixel, searches with
# Google's custom search of pytorch.org (not this site), links a stylesheet the package does not ship, carries the
# Linux Foundation's PyTorch footer, and it holds Sphinx at <= 7.2.6. Its base theme ships its fonts and icons and
# keeps Sphinx's own search, so a page read without network (on 127.0.0.1 in tests/test_site.py) is complete.
html_theme = "pydata_sphinx_theme"
html_title = "dispatcher-notebooks"
html_theme_options = {
    "navigation_with_keys": True,
    "show_prev_next": True,
    "show_toc_level": 2,
    "navbar_align": "left",
    "navbar_end": ["language-switch", "theme-switcher", "navbar-icon-links"],
    "footer_start": ["copyright"],
    "footer_end": ["sphinx-version"],
}
# The reader's light or dark setting; unset, the theme logs an error in the console on every first visit.
html_context = {"default_mode": "auto"}
html_static_path = ["_static"]
templates_path = ["_templates"]
html_favicon = "_static/favicon.svg"
html_css_files = ["course.css"]
# The pages are the notebooks; a second copy of each under _sources/ would only double the site.
html_copy_source = False
html_show_sourcelink = False
html_last_updated_fmt = None
