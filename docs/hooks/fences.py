"""MkDocs hook: the tests' words in a fence's info string (```` ```bash slow needs=torch ````) are dropped for the site.

tests/test_readme.py reads the words after a block's language (``skip``, ``slow``, ``needs=MODULE``) to know how to
run it; GitHub reads only the first word, but Python-Markdown's fences take ```` ```bash skip ```` for text and the
block would render as a paragraph. The page keeps the language only.
"""

from __future__ import annotations

import re
from typing import Any

#: an opening fence with a language and then the tests' words (and nothing else: attribute lists are left alone)
FENCE = re.compile(r"^(?P<fence>```+)(?P<lang>[\w+-]+)(?P<words>(?:[ \t]+(?:skip|slow|needs=[\w.,]+))+)[ \t]*$", re.M)


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    return FENCE.sub(lambda m: m.group("fence") + m.group("lang"), markdown)
