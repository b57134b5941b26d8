"""Turn reStructuredText (Sphinx) pages into documents of plain prose sentences.

A small, rule-based converter made for the Python documentation sources: it keeps
paragraphs, list items and the bodies of admonitions and object descriptions, drops
headings, code, literal and doctest blocks, tables, option and field lists, comments,
footnotes and index entries, rewrites inline markup to its text, then splits
paragraphs into sentences and keeps those that read as prose.

Example:

>>> text = ("Title\\n=====\\n\\nThe :func:`len` function, e.g. for a :class:`list`, counts\\n"
...         "its items.  Here is an example of its use::\\n\\n   len([1, 2])\\n")
>>> rst_documents(text)
[('Title', ['The len function, e.g. for a list, counts its items.', 'Here is an example of its use:'])]
"""

import re

# Directives whose indented body is prose; every other directive is skipped whole.
PROSE_DIRECTIVES = frozenset("""
    note warning important caution tip hint attention danger error impl-detail topic sidebar
    epigraph glossary only versionadded versionchanged deprecated deprecated-removed
    function method classmethod staticmethod abstractmethod decorator decoratormethod
    class exception attribute data describe object cmdoption option envvar opcode
    pdbcommand coroutinefunction coroutinemethod awaitablefunction awaitablemethod
    c:function c:member c:type c:var c:macro c:struct
""".split())
# Directives whose argument is the start of the body text (not a signature).
TEXT_ARGUMENT = frozenset("note warning important caution tip hint attention danger error epigraph".split())
VERSION_NOTES = {"versionadded": "New in version {}:", "versionchanged": "Changed in version {}:",
                 "deprecated": "Deprecated since version {}:",
                 "deprecated-removed": "Deprecated since version {}, will be removed in version {}:"}
SUBSTITUTIONS = {"version": "3.11", "release": "3.11.2"}
DROP = "\x00"  # marks text that cannot be rendered; sentences containing it are dropped

ADORNMENT = re.compile(r"""^([=\-~^"'`#*+.:_])\1{2,}\s*$""")
DIRECTIVE = re.compile(r"^\.\.\s+([\w:-]+)::\s*(.*)$")
BULLET = re.compile(r"^(?:[*+\-\u2022]|#\.|\d+\.|[a-zA-Z]\.|\(\d+\))\s+")
FIELD = re.compile(r"^:[^:`]+:(?:\s|$)")
OPTION = re.compile(r"^--?[A-Za-z0-9]")
SIMPLE_TABLE = re.compile(r"^=+( +=+)+\s*$")
GRID_TABLE = re.compile(r"^\+[-=+]+\+\s*$")
ROLE = re.compile(r":(?:[\w-]+:)?([\w-]+):`((?:[^`\\]|\\.)+)`")


def heading_titles(text):
    """Map each `.. _label:` that precedes a section title to that title (raw markup)."""
    lines = text.splitlines()
    titles, pending = {}, []
    for i, line in enumerate(lines):
        label = re.match(r"^\.\. _([^:]+):\s*$", line)
        if label:
            pending.append(label.group(1).strip().lower())
        elif line.strip() and not ADORNMENT.match(line):
            if i + 1 < len(lines) and ADORNMENT.match(lines[i + 1]):
                titles.update((name, line.strip()) for name in pending)
            pending = []
    return titles


def inline(text, refs=None):
    """Rewrite reST/Sphinx inline markup to the text a reader would see."""
    saved = []

    def keep(value):
        saved.append(value)
        return "\x01%d\x02" % (len(saved) - 1)

    def role(match):
        name, body = match.group(1).lower(), match.group(2).replace("\\", "")
        titled = re.match(r"^(.*?)\s*<([^<>]+)>$", body, re.S)
        if titled and titled.group(1):
            return keep(titled.group(1))
        target = titled.group(2) if titled else body
        if name in ("ref", "doc"):
            title = (refs or {}).get(target.lower())
            return inline(title, None) if title else DROP
        if name in ("pep", "rfc"):
            return keep("%s %s" % (name.upper(), target.split("#")[0]))
        if name in ("issue", "gh"):
            return keep(("bpo-" if name == "issue" else "gh-") + target)
        if name == "abbr":
            return keep(target.split(" (")[0])
        target = target.lstrip("!")
        if target.startswith("~"):
            target = target[1:].split(".")[-1]
        if name in ("samp", "file"):
            target = target.replace("{", "").replace("}", "")
        return keep(target)

    text = re.sub(r"``(.+?)``", lambda m: keep(m.group(1)), text)
    text = ROLE.sub(role, text)
    text = re.sub(r"`([^`<]+?)\s*<[^`>]*>`__?", r"\1", text)       # `text <url>`_
    text = re.sub(r"`([^`]+)`__?", r"\1", text)                     # `text`_
    text = re.sub(r"`([^`]+)`", r"\1", text)                        # default role
    text = re.sub(r"\s*\[(?:#[\w-]*|\d+|\*)\]_", "", text)           # footnote refs
    text = re.sub(r"\|(\w+)\|", lambda m: SUBSTITUTIONS.get(m.group(1), DROP), text)
    text = re.sub(r"\*\*(\S(?:.*?\S)?)\*\*", r"\1", text)
    text = re.sub(r"(?<![\w*\\])\*(\S(?:[^*]*?\S)?)\*(?![\w*])", r"\1", text)
    text = re.sub(r"\\(.)", lambda m: "" if m.group(1).isspace() else m.group(1), text)
    text = re.sub(r"\x01(\d+)\x02", lambda m: saved[int(m.group(1))], text)
    return " ".join(text.split())


def _blocks(text):
    """Yield ('title', raw) for top-level section titles and ('para', raw) for prose."""
    lines = text.expandtabs(8).splitlines() + [""]
    styles, para, para_indent = [], [], None
    skip_indent = None      # skip blank lines and lines indented deeper than this
    skip_to_blank = False   # skip up to the next blank line
    table_end = False       # inside a simple table: skip to a border followed by a blank line
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        i += 1
        if table_end:
            table_end = not (SIMPLE_TABLE.match(stripped) and not nxt.strip())
            continue
        if skip_to_blank:
            skip_to_blank = bool(stripped)
            continue
        if skip_indent is not None:
            if not stripped or indent > skip_indent:
                continue
            skip_indent = None
        if para and (not stripped or indent != para_indent):
            text, literal_follows = _literal_intro(" ".join(para))
            if literal_follows:
                skip_indent = indent_of_para
            yield "para", text
            para = []
            if skip_indent is not None and (not stripped or indent > skip_indent):
                continue
            skip_indent = None
        if not stripped:
            continue
        if para:                                        # a paragraph's next line
            para.append(stripped)
            continue
        # Section titles: optional overline, text, underline.
        over = ADORNMENT.match(line) and nxt.strip() and i + 1 < len(lines) and ADORNMENT.match(lines[i + 1])
        if over or (indent == 0 and ADORNMENT.match(nxt) and not ADORNMENT.match(line)):
            title = nxt.strip() if over else stripped
            style = (nxt if not over else lines[i + 1]).strip()[0] + ("o" if over else "")
            if style not in styles:
                styles.append(style)
            if styles.index(style) <= 1:
                yield "title", title
            i += 2 if over else 1
            continue
        if ADORNMENT.match(line):                       # transition or stray adornment
            continue
        if stripped == ".." or stripped.startswith(".. "):
            directive = DIRECTIVE.match(stripped)
            name = directive.group(1).lower() if directive else ""
            if name not in PROSE_DIRECTIVES:            # comments, targets, footnotes, code, ...
                skip_indent = indent
                continue
            arg = directive.group(2)
            if name in VERSION_NOTES and arg:
                note, count = VERSION_NOTES[name], VERSION_NOTES[name].count("{}")
                words = arg.split(" ", count)
                if len(words) >= count:
                    arg = " ".join([note.format(*words[:count])] + words[count:])
            elif name not in TEXT_ARGUMENT:
                arg = ""
            if arg:
                para, para_indent, indent_of_para = [arg], next_indent(lines, i, indent), indent
            continue
        if SIMPLE_TABLE.match(stripped):
            table_end = True
        elif FIELD.match(stripped):                     # field lists, directive options
            skip_indent = indent
        elif (GRID_TABLE.match(stripped) or OPTION.match(stripped) or stripped.startswith(">>>")
              or stripped.startswith("| ")):            # tables, option lists, doctests, line blocks
            skip_to_blank = True
        else:
            bullet = BULLET.match(stripped)
            start = bullet.end() if bullet else 0
            para, para_indent, indent_of_para = [stripped[start:]], indent + start, indent


def _literal_intro(text):
    """Render a paragraph ending in '::' as reST does; also say whether a literal block follows."""
    if not text.endswith("::"):
        return text, False
    return (text[:-1] if re.search(r"\S::$", text) else text[:-2].rstrip()), True


def next_indent(lines, i, indent):
    """Indentation of the next non-blank line after index i-1 (the body of a directive)."""
    for line in lines[i:]:
        if line.strip():
            return max(len(line) - len(line.lstrip()), indent + 1)
    return indent + 1


# Abbreviations after which a period does not end a sentence.
ABBREVIATIONS = frozenset("""e.g i.e cf vs viz approx resp al fig no nos mr mrs ms dr st sec ch
    ref refs eq incl esp jan feb mar apr jun jul aug sep sept oct nov dec""".split())
PLAIN_WORD = re.compile(r"""["'(]*[A-Za-z][a-z'-]*[.,;:!?"')]*""")  # a word, not code
SENTENCE_END = re.compile(r"""[.!?]["')\]]*\s+(?=["'(\[]?[A-Z0-9])""")


def split_sentences(paragraph):
    """Split a paragraph of plain text into sentences.

    >>> split_sentences("Use e.g. Python 3.11 here. It works, i.e. it runs. (By A. B. Smith. Thanks.) Done.")
    ['Use e.g. Python 3.11 here.', 'It works, i.e. it runs.', '(By A. B. Smith. Thanks.)', 'Done.']
    """
    sentences, start = [], 0
    for match in SENTENCE_END.finditer(paragraph):
        head = paragraph[start:match.start() + 1]
        word = re.search(r"(\S+)\.$", head)
        word = word.group(1).lower().lstrip("(\"'") if word else ""
        if word in ABBREVIATIONS or (len(word) == 1 and word.isalpha()) or head.endswith(".."):
            continue
        rest = paragraph[match.end():]
        if head.count("(") > head.count(")") and rest.count(")") > rest.count("("):
            continue                                    # inside parentheses
        sentences.append(paragraph[start:match.end()].strip())
        start = match.end()
    sentences.append(paragraph[start:].strip())
    return [s for s in sentences if s]


def is_prose(sentence, min_words=5):
    """True for a sentence that reads as English prose rather than a fragment or code."""
    if DROP in sentence or len(sentence.split()) < min_words or len(sentence) > 600:
        return False
    if not (sentence[0].isupper() or sentence[0] in "\"'(" or sentence[0].isdigit()):
        return False
    if not re.search(r"""[.!?:]["')\]]*$""", sentence) or sentence.rstrip(")").endswith("..."):
        return False
    letters = sum(c.isalpha() or c.isspace() for c in sentence) / len(sentence)
    tokens = sentence.split()
    plain = sum(1 for token in tokens if PLAIN_WORD.fullmatch(token)) / len(tokens)
    return letters >= 0.85 and plain >= 0.6 and len(re.findall(r"[A-Za-z]+", sentence)) >= min_words


def rst_documents(text, refs=None, min_sentences=1):
    """Convert one reST page to [(title, [sentence, ...]), ...], one entry per top section.

    Sections at the first two heading levels of the page start a new document; deeper
    sections are merged into their parent.  Documents with fewer than min_sentences
    prose sentences are dropped.
    """
    if refs is None:
        refs = heading_titles(text)
    documents, title, sentences = [], "", []
    for kind, raw in _blocks(text):
        if kind == "title":
            if len(sentences) >= min_sentences:
                documents.append((inline(title, refs), sentences))
            title, sentences = raw, []
        else:
            sentences.extend(s for s in split_sentences(inline(raw, refs)) if is_prose(s))
    if len(sentences) >= min_sentences:
        documents.append((inline(title, refs), sentences))
    return documents
